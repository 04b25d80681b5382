import { createServer, type Server } from 'node:http';
import { expectSameBytes } from '../test/bytes.js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PostGuardError } from '../lib/errors.js';
import { DEFAULT_SEGMENT_SIZE, sealStream, type SealOptions } from '../lib/index.js';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from '../lib/keys.js';
import { SEGMENT_OVERHEAD } from '../lib/segments.js';
import { OPEN_QUEUE_BYTES } from '../lib/crypto/segment-hasher-node.js';
import { chunkedSource, collector } from '../test/streams.js';
import { reviveError } from './errors.js';
import { splitFrame } from '../lib/frame.js';
import { serveDecrypter } from './offload-serve.js';
import { readableToPort } from './port-stream.js';
import {
  contentDisposition,
  createDecrypterRoute,
  installDecrypter,
  safeFilename,
  type DecrypterOptions,
} from './sw-core.js';
import {
  MESSAGE_READ,
  MESSAGE_REGISTER,
  MESSAGE_REVOKE,
  type DownloadEvent,
  type RegisterRequest,
} from './sw-protocol.js';

/**
 * The service worker's logic in Node, behind a minimal stand-in for ServiceWorkerGlobalScope
 * (an EventTarget with `registration.scope` and fetch/message events). Real HTTP for URL sources.
 * The real service worker in Chromium is tested in worker/test/service-worker.spec.ts.
 */

const TS = 1_700_000_000;
const ALICE = 'alice@example.org';
const EMAIL = 'pbdf.sidn-pbdf.email.email';
const SCOPE = 'https://app.example/sub/';

let vk: string;
let usk: string;
let otherUsk: string;
let ciphertext: Uint8Array;
let plain: Uint8Array;
let framingBytes: number;
let sealLarge: (segments?: number) => Promise<Uint8Array>;
let server: Server;
/** The Range headers the test server's /ranged file was asked for. */
const rangeRequests: string[] = [];
let serverUrl: string;
const sender = { ts: TS, con: [{ t: EMAIL, v: 'bob@example.org' }] };
let kemMpk: string;
let sealOptions: SealOptions;

beforeAll(async () => {
  const kem = generateKemKeys();
  const ibs = generateSigningKeys();
  vk = ibs.vk;
  const alice = { ts: TS, con: [{ t: EMAIL, v: ALICE }] };
  usk = extractUsk(kem.msk, alice);
  otherUsk = extractUsk(kem.msk, { ts: TS, con: [{ t: EMAIL, v: 'eve@example.org' }] });
  const options: SealOptions = {
    policy: { [ALICE]: alice },
    pubSignKey: { key: extractSigningKey(ibs.sk, sender), policy: sender },
  };
  plain = Uint8Array.from({ length: 3 * DEFAULT_SEGMENT_SIZE + 1234 }, (_, i) => (i * 5 + 1) & 255);
  const out = collector();
  await sealStream(kem.mpk, options, chunkedSource(plain), out.writable);
  ciphertext = out.bytes();
  framingBytes = splitFrame(ciphertext).framingBytes;
  kemMpk = kem.mpk;
  sealOptions = options;
  sealLarge = async (segments = 16) => {
    const big = collector();
    await sealStream(kem.mpk, options, chunkedSource(new Uint8Array(segments * DEFAULT_SEGMENT_SIZE)), big.writable);
    return big.bytes();
  };
  server = createServer((req, res) => {
    if (req.url === '/ct')
      res
        .writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': ciphertext.length })
        .end(ciphertext);
    else if (req.url === '/ranged') {
      // A static file server that answers one byte range (what the seekable path asks for).
      rangeRequests.push(req.headers.range ?? '');
      const match = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
      if (match === null)
        return void res
          .writeHead(200, { 'content-length': ciphertext.length, 'accept-ranges': 'bytes' })
          .end(ciphertext);
      const start = Number(match[1]);
      const end = Math.min(match[2] === '' ? Infinity : Number(match[2]), ciphertext.length - 1);
      res
        .writeHead(206, {
          'content-range': `bytes ${start}-${end}/${ciphertext.length}`,
          'content-length': end - start + 1,
        })
        .end(ciphertext.subarray(start, end + 1));
    } else res.writeHead(404).end('no');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  serverUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});

afterAll(() => new Promise((resolve) => server?.close(resolve)));

type Scope = EventTarget & { registration: { scope: string } };

function worker(options: DecrypterOptions = {}) {
  let lastPort: MessagePort | undefined;
  const scope: Scope = Object.assign(new EventTarget(), { registration: { scope: SCOPE }, fetch: globalThis.fetch });
  installDecrypter(scope as unknown as ServiceWorkerGlobalScope, { progressIntervalMs: 0, ...options });

  /** Posts a registration; resolves with the reply, and collects later events. */
  async function register(request: Partial<RegisterRequest>) {
    const { port1, port2 } = new MessageChannel();
    const events: DownloadEvent[] = [];
    let ended!: (e: DownloadEvent) => void;
    const end = new Promise<DownloadEvent>((resolve) => (ended = resolve));
    const reply = new Promise<DownloadEvent>((resolve) => {
      port1.onmessage = ({ data }: MessageEvent<DownloadEvent>) => {
        events.push(data);
        if (data.type === 'registered') resolve(data);
        // A seekable registration goes on after a 'done': only an error ends it.
        if (
          (data.type === 'done' && request.seekable !== true) ||
          data.type === 'error' ||
          (data.type === 'registered' && !data.ok)
        ) {
          ended(data);
          port1.close();
        }
      };
    });
    lastPort = port1;
    const base = {
      recipientId: ALICE,
      usk,
      vk,
      filename: 'report.bin',
      source: { kind: 'blob', blob: new Blob([ciphertext as BlobPart]) },
    };
    // The message event as a browser dispatches it: the worker reads only event.data and event.ports.
    scope.dispatchEvent(
      Object.assign(new Event('message'), {
        data: { type: MESSAGE_REGISTER, request: { ...base, ...request } },
        ports: [port2],
        waitUntil() {},
      }),
    );
    return { reply: await reply, events, end };
  }

  function get(
    url: string,
    method = 'GET',
    headers: Record<string, string> = {},
  ): { response: Promise<Response>; lifetime: Promise<unknown> } {
    let response: Promise<Response> | undefined;
    const lifetimes: Promise<unknown>[] = [];
    scope.dispatchEvent(
      Object.assign(new Event('fetch'), {
        request: new Request(url, { method, headers }),
        respondWith: (r: Response | Promise<Response>) => (response = Promise.resolve(r)),
        waitUntil: (p: Promise<unknown>) => lifetimes.push(p),
      }),
    );
    if (response === undefined) throw new Error(`not handled: ${url}`);
    return { response, lifetime: Promise.all(lifetimes) };
  }

  const revoke = (id: string) =>
    scope.dispatchEvent(
      Object.assign(new Event('message'), { data: { type: MESSAGE_REVOKE, id }, ports: [], waitUntil() {} }),
    );
  /** The page's side of a paced download: what it has read, on the last registration's reply port. */
  const acknowledge = (bytes: number) => lastPort!.postMessage({ type: MESSAGE_READ, bytes });
  return { scope, register, get, revoke, acknowledge };
}

const registeredUrl = (reply: DownloadEvent) => {
  if (reply.type !== 'registered' || !reply.ok) throw new Error(`not registered: ${JSON.stringify(reply)}`);
  return reply.url;
};

async function bytesOf(response: Response): Promise<Uint8Array> {
  return new Uint8Array(await response.arrayBuffer());
}

describe('a registered download', () => {
  it('is served once, as a stream of plaintext with the right headers, then reported done', async () => {
    const w = worker();
    const { reply, events, end } = await w.register({
      filename: 'naïve résumé "v2".pdf',
      contentType: 'application/pdf',
    });
    const url = registeredUrl(reply);
    expect(url).toMatch(/^https:\/\/app\.example\/sub\/pg-download\/[\w-]{22}\/na%C3%AFve/);
    const { response, lifetime } = w.get(url);
    const res = await response;
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/pdf');
    expect(res.headers.get('content-disposition')).toBe(
      `attachment; filename="na_ve r_sum_ _v2_.pdf"; filename*=UTF-8''na%C3%AFve%20r%C3%A9sum%C3%A9%20%22v2%22.pdf`,
    );
    expect(res.headers.get('content-length')).toBe(String(plain.length));
    expect(res.headers.get('content-security-policy')).toBe('sandbox');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expectSameBytes(await bytesOf(res), plain);
    await lifetime;
    expect(await end).toEqual({
      type: 'done',
      bytes: plain.length,
      result: { public: sender, contentSigner: 'public', bound: true },
    });
    expect(events.some((e) => e.type === 'progress')).toBe(true);
    const again = await w.get(url).response;
    expect(again.status).toBe(404);
    expect(again.headers.get('x-postguard-error')).toBe('UNKNOWN_DOWNLOAD');
  });

  it("takes a key set's candidates (a PKG after a rotation): the keys that open the file are found among them", async () => {
    const w = worker();
    const { reply, end } = await w.register({
      usk: [
        { id: 'other', key: otherUsk },
        { id: 'current', key: usk },
      ],
      vk: [
        { id: 'new', key: generateSigningKeys().vk },
        { id: 'old', key: vk },
      ],
    });
    const res = await w.get(registeredUrl(reply)).response;
    expect(res.status).toBe(200);
    expectSameBytes(await bytesOf(res), plain);
    expect(await end).toMatchObject({ type: 'done', bytes: plain.length });
  });

  it('fetches a URL source and takes its size from Content-Length', async () => {
    const w = worker();
    const { reply } = await w.register({ source: { kind: 'url', url: `${serverUrl}/ct` } });
    const res = await w.get(registeredUrl(reply)).response;
    expect(res.headers.get('content-length')).toBe(String(plain.length));
    expectSameBytes(await bytesOf(res), plain);
  });

  it('a URL source that fails is a 502 with SOURCE_FAILED', async () => {
    const w = worker();
    const { reply, end } = await w.register({ source: { kind: 'url', url: `${serverUrl}/missing` } });
    const res = await w.get(registeredUrl(reply)).response;
    expect(res.status).toBe(502);
    expect(res.headers.get('x-postguard-error')).toBe('SOURCE_FAILED');
    expect(reviveError(((await end) as { error: unknown }).error)).toMatchObject({ code: 'SOURCE_FAILED' });
  });

  it('a stream within the hold limit is verified whole first and has an exact Content-Length', async () => {
    const w = worker();
    const { reply, events, end } = await w.register({
      source: { kind: 'stream', stream: chunkedSource(ciphertext, 40_000) },
    });
    const res = await w.get(registeredUrl(reply)).response;
    expect(res.headers.get('x-postguard-verified')).toBe('complete');
    expect(res.headers.get('content-length')).toBe(String(plain.length));
    expectSameBytes(await bytesOf(res), plain);
    await end;
    expect(events.some((e) => e.type === 'verifying')).toBe(true);
  });

  it('a stream beyond the hold limit streams, with a Content-Length only when its size is declared', async () => {
    const w = worker({ holdLimitBytes: 100_000 });
    const without = await w.register({ source: { kind: 'stream', stream: chunkedSource(ciphertext, 40_000) } });
    const a = await w.get(registeredUrl(without.reply)).response;
    expect(a.headers.get('x-postguard-verified')).toBe('streaming');
    expect(a.headers.get('content-length')).toBeNull();
    expectSameBytes(await bytesOf(a), plain);
    const withSize = await w.register({
      source: { kind: 'stream', stream: chunkedSource(ciphertext, 40_000) },
      size: ciphertext.length,
    });
    const b = await w.get(registeredUrl(withSize.reply)).response;
    expect(b.headers.get('content-length')).toBe(String(plain.length));
    expectSameBytes(await bytesOf(b), plain);
  });

  it('a Blob beyond the hold limit is read twice: verified completely, then sent with an exact Content-Length', async () => {
    const w = worker({ holdLimitBytes: 100_000 });
    const { reply, events, end } = await w.register({});
    const res = await w.get(registeredUrl(reply)).response;
    expect(res.headers.get('x-postguard-verified')).toBe('complete');
    expect(res.headers.get('content-length')).toBe(String(plain.length));
    expectSameBytes(await bytesOf(res), plain);
    expect(await end).toMatchObject({ type: 'done', bytes: plain.length });
    // Everything was verified before the first byte went out.
    const firstSent = events.findIndex((e) => e.type === 'progress');
    const verifying = events
      .slice(0, firstSent)
      .filter((e) => e.type === 'verifying')
      .map((e) => (e as { bytes: number }).bytes);
    expect(Math.max(...verifying)).toBeGreaterThan(plain.length / 2);
  });

  it('a Blob read twice is decrypted the second time against the first reading: other bytes are refused before any byte', async () => {
    // A Blob cannot change; this one pretends to (another sealing of the same plaintext, same
    // sender and length) to show that the second reading must be the bytes the first verified.
    const other = await (async () => {
      const again = collector();
      await sealStream(kemMpk, sealOptions, chunkedSource(plain), again.writable);
      return again.bytes();
    })();
    expect(other.length).toBe(ciphertext.length);
    let readings = 0;
    class ChangingBlob extends Blob {
      override stream() {
        return readings++ === 0 ? super.stream() : new Blob([other as BlobPart]).stream();
      }
    }
    const w = worker({ holdLimitBytes: 100_000 });
    const { reply, end } = await w.register({
      source: { kind: 'blob', blob: new ChangingBlob([ciphertext as BlobPart]) },
    });
    const res = await w.get(registeredUrl(reply)).response;
    expect([res.status, res.headers.get('x-postguard-error')]).toEqual([422, 'TAMPERED']);
    expect(reviveError(((await end) as { error: unknown }).error)).toMatchObject({ code: 'TAMPERED' });
    expect(readings).toBe(2);
  });

  it('a Blob read twice keeps what it could hold of the first reading: the second reads only the rest, from the next segment', async () => {
    // Two segments' plaintext fit under this limit (segment 0 less its signer block, then segment 1).
    const starts: number[] = [];
    let streams = 0;
    class WatchedBlob extends Blob {
      override stream() {
        streams++;
        return super.stream();
      }
      override slice(start?: number, end?: number, type?: string) {
        starts.push(start ?? 0);
        return super.slice(start, end, type);
      }
    }
    const w = worker({ holdLimitBytes: 2 * DEFAULT_SEGMENT_SIZE });
    const { reply, events, end } = await w.register({
      source: { kind: 'blob', blob: new WatchedBlob([ciphertext as BlobPart]) },
    });
    const res = await w.get(registeredUrl(reply)).response;
    expect(res.headers.get('x-postguard-verified')).toBe('complete');
    expect(res.headers.get('content-length')).toBe(String(plain.length));
    expectSameBytes(await bytesOf(res), plain);
    expect(await end).toMatchObject({ type: 'done', bytes: plain.length });
    expect([streams, starts]).toEqual([1, [framingBytes + 2 * (DEFAULT_SEGMENT_SIZE + 112)]]);
    // Still everything verified before the first byte went out.
    const firstSent = events.findIndex((e) => e.type === 'progress');
    const verified = events.slice(0, firstSent).filter((e) => e.type === 'verifying');
    expect(Math.max(...verified.map((e) => (e as { bytes: number }).bytes))).toBe(plain.length);
  });

  it('a Blob whose rest is not the bytes the first reading verified is refused before any byte', async () => {
    // A Blob cannot change; this one pretends to, in the part the second reading reads (a slice).
    const other = await (async () => {
      const again = collector();
      await sealStream(kemMpk, sealOptions, chunkedSource(plain), again.writable);
      return again.bytes();
    })();
    class ChangingBlob extends Blob {
      override slice(start?: number, end?: number, type?: string) {
        return new Blob([other as BlobPart]).slice(start, end, type);
      }
    }
    const w = worker({ holdLimitBytes: 2 * DEFAULT_SEGMENT_SIZE });
    const { reply, end } = await w.register({
      source: { kind: 'blob', blob: new ChangingBlob([ciphertext as BlobPart]) },
    });
    const res = await w.get(registeredUrl(reply)).response;
    expect([res.status, res.headers.get('x-postguard-error')]).toEqual([422, 'TAMPERED']);
    expect(reviveError(((await end) as { error: unknown }).error)).toMatchObject({ code: 'TAMPERED' });
  });

  it("decrypts a page's stream relayed over a port (what download.ts sends) as it arrives", async () => {
    const w = worker();
    const { reply, end } = await w.register({
      source: { kind: 'relay', port: readableToPort(chunkedSource(ciphertext, 40_000)) },
      size: ciphertext.length,
    });
    const res = await w.get(registeredUrl(reply)).response;
    expect(res.headers.get('content-length')).toBe(String(plain.length));
    expectSameBytes(await bytesOf(res), plain);
    expect(await end).toMatchObject({ type: 'done', bytes: plain.length });
  });

  it('keeps the worker alive while the body streams, but not past the event cap', async () => {
    const w = worker();
    const { reply } = await w.register({});
    const { response, lifetime } = w.get(registeredUrl(reply));
    let ended = false;
    void lifetime.then(() => (ended = true));
    const res = await response;
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(ended).toBe(false); // headers sent, body not read yet
    await bytesOf(res);
    await lifetime;

    const capped = worker({ maxEventMs: 50 });
    const second = await capped.register({});
    const unread = capped.get(registeredUrl(second.reply));
    await unread.response;
    await unread.lifetime; // resolves at the cap although the body was never read
  });

  it('HEAD of a one-shot download is refused (405, Allow: GET) without spending it; of an unknown one, 404', async () => {
    const w = worker();
    const { reply } = await w.register({});
    const head = await w.get(registeredUrl(reply), 'HEAD').response;
    expect([head.status, head.headers.get('allow'), head.headers.get('x-postguard-error')]).toEqual([
      405,
      'GET',
      'METHOD_NOT_ALLOWED',
    ]);
    expect((await w.get(registeredUrl(reply)).response).status).toBe(200);
    expect((await w.get(registeredUrl(reply), 'HEAD').response).status).toBe(404);
  });
});

describe('failures', () => {
  const tamperedAt = (offset: number) => {
    const bad = ciphertext.slice();
    bad[offset]! ^= 0x01;
    return bad;
  };

  it('a segment that fails is an HTTP error before any byte, whether the file is held or read twice', async () => {
    const bad = tamperedAt(ciphertext.length - DEFAULT_SEGMENT_SIZE - 500); // inside segment 2
    for (const holdLimitBytes of [undefined, 100_000]) {
      const w = worker({ holdLimitBytes });
      const { reply, end, events } = await w.register({ source: { kind: 'blob', blob: new Blob([bad as BlobPart]) } });
      const res = await w.get(registeredUrl(reply)).response;
      expect([res.status, res.headers.get('x-postguard-error')]).toEqual([422, 'TAMPERED']);
      expect(reviveError(((await end) as { error: unknown }).error)).toMatchObject({ code: 'TAMPERED' });
      expect(events.some((e) => e.type === 'progress')).toBe(false);
    }
  });

  it('streaming (a one-shot stream past the hold limit, or verifyFirst: false): a late failure errors the body', async () => {
    const bad = tamperedAt(ciphertext.length - DEFAULT_SEGMENT_SIZE - 500); // inside segment 2
    const w = worker({ holdLimitBytes: 100_000 });
    const one = await w.register({ source: { kind: 'stream', stream: chunkedSource(bad) } });
    const a = await w.get(registeredUrl(one.reply)).response;
    expect([a.status, a.headers.get('x-postguard-verified')]).toEqual([200, 'streaming']);
    await expect(bytesOf(a)).rejects.toMatchObject({ code: 'TAMPERED' });
    expect(reviveError(((await one.end) as { error: unknown }).error)).toMatchObject({ code: 'TAMPERED' });
    const v = worker();
    const two = await v.register({ source: { kind: 'blob', blob: new Blob([bad as BlobPart]) }, verifyFirst: false });
    const b = await v.get(registeredUrl(two.reply)).response;
    expect([b.status, b.headers.get('x-postguard-verified')]).toEqual([200, 'streaming']);
    await expect(bytesOf(b)).rejects.toMatchObject({ code: 'TAMPERED' });
  });

  it('streaming holds back the last authenticated chunk until the final segment verified', async () => {
    const w = worker({ holdLimitBytes: 0 });
    const bad = tamperedAt(ciphertext.length - 20); // the final segment
    const { reply } = await w.register({
      source: { kind: 'blob', blob: new Blob([bad as BlobPart]) },
      verifyFirst: false,
    });
    const res = await w.get(registeredUrl(reply)).response;
    expect(res.headers.get('content-length')).toBe(String(plain.length));
    const reader = res.body!.getReader();
    let received = 0;
    const error = await (async () => {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return undefined;
        received += value.byteLength;
      }
    })().catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'TAMPERED' });
    // Segments 0 and 1 went out; segment 2 (good, but the last before the bad final one) was held.
    expect(received).toBeLessThanOrEqual(2 * DEFAULT_SEGMENT_SIZE);
  });

  it('a cut at a segment boundary is TRUNCATED, in either mode', async () => {
    // The framing and the first two segments: whole segments, just no final one.
    const cut = ciphertext.slice(0, framingBytes + 2 * (DEFAULT_SEGMENT_SIZE + SEGMENT_OVERHEAD));
    const w = worker();
    const again = await w.register({ source: { kind: 'stream', stream: chunkedSource(cut) } });
    const a = await w.get(registeredUrl(again.reply)).response;
    expect([a.status, a.headers.get('x-postguard-error')]).toEqual([422, 'TRUNCATED']);
    const s = worker({ holdLimitBytes: 0 });
    const streamed = await s.register({ source: { kind: 'stream', stream: chunkedSource(cut) } });
    const b = await s.get(registeredUrl(streamed.reply)).response;
    expect(b.status).toBe(200);
    await expect(bytesOf(b)).rejects.toMatchObject({ code: 'TRUNCATED' });
    expect(reviveError(((await streamed.end) as { error: unknown }).error)).toMatchObject({ code: 'TRUNCATED' });
  });

  it('a source that ends before its announced size is TRUNCATED, not TAMPERED, wherever it is cut', async () => {
    for (const cutAt of [framingBytes + 1000, ciphertext.length - 1, ciphertext.length - DEFAULT_SEGMENT_SIZE]) {
      for (const holdLimitBytes of [undefined, 0]) {
        const w = worker({ holdLimitBytes });
        const { reply, end } = await w.register({
          source: { kind: 'relay', port: readableToPort(chunkedSource(ciphertext.slice(0, cutAt), 40_000)) },
          size: ciphertext.length,
        });
        const res = await w.get(registeredUrl(reply)).response;
        if (res.status === 200) await expect(bytesOf(res)).rejects.toMatchObject({ code: 'TRUNCATED' });
        else expect([res.status, res.headers.get('x-postguard-error')]).toEqual([422, 'TRUNCATED']);
        const error = reviveError(((await end) as { error: unknown }).error);
        expect(error, `cut at ${cutAt}`).toMatchObject({ code: 'TRUNCATED' });
        expect((error as Error).message).toContain(`of its ${ciphertext.length} bytes`);
      }
    }
  });

  it('a URL whose body ends short of its Content-Length is TRUNCATED', async () => {
    const cutting = createServer((req, res) => {
      res.writeHead(200, { 'content-length': ciphertext.length });
      res.write(ciphertext.subarray(0, ciphertext.length - 5000), () => res.destroy());
    });
    await new Promise<void>((resolve) => cutting.listen(0, '127.0.0.1', resolve));
    try {
      const w = worker();
      const { reply, end } = await w.register({
        source: { kind: 'url', url: `http://127.0.0.1:${(cutting.address() as { port: number }).port}/ct` },
      });
      const res = await w.get(registeredUrl(reply)).response;
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(reviveError(((await end) as { error: unknown }).error)).toMatchObject({
        code: expect.stringMatching(/^(TRUNCATED|SOURCE_FAILED)$/),
      });
    } finally {
      await new Promise((resolve) => cutting.close(resolve));
    }
  });

  it('a URL that answers with other bytes the second time: those are authenticated as they stream', async () => {
    let requests = 0;
    const bad = tamperedAt(ciphertext.length - 20);
    const changing = createServer((req, res) => {
      const body = requests++ === 0 ? ciphertext : bad;
      res.writeHead(200, { 'content-length': body.length }).end(body);
    });
    await new Promise<void>((resolve) => changing.listen(0, '127.0.0.1', resolve));
    try {
      const w = worker({ holdLimitBytes: 100_000 });
      const { reply, end } = await w.register({
        source: { kind: 'url', url: `http://127.0.0.1:${(changing.address() as { port: number }).port}/ct` },
      });
      const res = await w.get(registeredUrl(reply)).response;
      expect([res.status, res.headers.get('x-postguard-verified')]).toEqual([200, 'complete']);
      await expect(bytesOf(res)).rejects.toMatchObject({ code: 'TAMPERED' });
      expect(reviveError(((await end) as { error: unknown }).error)).toMatchObject({ code: 'TAMPERED' });
      expect(requests).toBe(2);
    } finally {
      await new Promise((resolve) => changing.close(resolve));
    }
  });

  it('a URL with a strong ETag is asked for the same bytes the second time: a changed file is refused before any byte', async () => {
    let version = 'v1';
    const headersSeen: Array<string | undefined> = [];
    const server = createServer((req, res) => {
      headersSeen.push(req.headers['if-match']);
      const etag = `"${version}"`;
      if (req.headers['if-match'] !== undefined && req.headers['if-match'] !== etag)
        return void res.writeHead(412).end();
      res.writeHead(200, { 'content-length': ciphertext.length, etag }).end(ciphertext);
      version = 'v2'; // the file changes after the first answer
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const w = worker({ holdLimitBytes: 100_000 });
      const { reply, end } = await w.register({
        source: { kind: 'url', url: `http://127.0.0.1:${(server.address() as { port: number }).port}/ct` },
      });
      const res = await w.get(registeredUrl(reply)).response;
      expect([res.status, res.headers.get('x-postguard-error')]).toEqual([502, 'SOURCE_FAILED']);
      expect((reviveError(((await end) as { error: unknown }).error) as Error).message).toContain('412');
      expect(headersSeen).toEqual([undefined, '"v1"']);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('a source that stalls fails within the stall timeout instead of waiting forever', async () => {
    for (const holdLimitBytes of [undefined, 0]) {
      const w = worker({ stallTimeoutMs: 300, holdLimitBytes });
      let sent = false;
      const stalling = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (sent) return new Promise<void>(() => undefined); // never again
          sent = true;
          controller.enqueue(ciphertext.slice(0, framingBytes + 2 * (DEFAULT_SEGMENT_SIZE + SEGMENT_OVERHEAD)));
        },
      });
      const started = Date.now();
      const { reply, end } = await w.register({ source: { kind: 'stream', stream: stalling } });
      const res = await w.get(registeredUrl(reply)).response;
      if (res.status === 200) await expect(bytesOf(res)).rejects.toMatchObject({ code: 'SOURCE_FAILED' });
      else expect([res.status, res.headers.get('x-postguard-error')]).toEqual([502, 'SOURCE_FAILED']);
      const error = reviveError(((await end) as { error: unknown }).error);
      expect(error).toMatchObject({ code: 'SOURCE_FAILED' });
      expect((error as Error).message).toContain('stopped arriving');
      expect(Date.now() - started).toBeLessThan(5000);
    }
  });

  it('a failure before any plaintext is an HTTP error naming the code', async () => {
    const w = worker();
    const cases: Array<[Partial<RegisterRequest>, number, string]> = [
      [{ usk: otherUsk }, 403, 'WRONG_KEY'],
      [{ recipientId: 'mallory@example.org' }, 403, 'UNKNOWN_RECIPIENT'],
      [{ source: { kind: 'blob', blob: new Blob([new Uint8Array(100)]) } }, 422, 'NOT_POSTGUARD'],
      [{ source: { kind: 'blob', blob: new Blob([tamperedAt(framingBytes + 100) as BlobPart]) } }, 422, 'TAMPERED'],
      [{ source: { kind: 'blob', blob: new Blob([tamperedAt(framingBytes - 5) as BlobPart]) } }, 422, 'BAD_SIGNATURE'],
      [{ source: { kind: 'blob', blob: new Blob([ciphertext.slice(0, 20) as BlobPart]) } }, 422, 'TRUNCATED'],
    ];
    for (const [request, status, code] of cases) {
      const { reply } = await w.register(request);
      const res = await w.get(registeredUrl(reply)).response;
      expect([res.status, res.headers.get('x-postguard-error')]).toEqual([status, code]);
      expect(await res.json()).toMatchObject({ error: code });
    }
  });

  it('a declared size one byte too large never gives a complete response', async () => {
    const w = worker({ holdLimitBytes: 0 });
    const { reply, end } = await w.register({
      source: { kind: 'stream', stream: chunkedSource(ciphertext, 40_000) },
      size: ciphertext.length + 1,
    });
    const res = await w.get(registeredUrl(reply)).response;
    if (res.status === 200)
      await expect(bytesOf(res)).rejects.toMatchObject({ code: expect.stringMatching(/^(MALFORMED|TRUNCATED)$/) });
    else expect(res.headers.get('x-postguard-error')).toBe('TRUNCATED');
    expect(reviveError(((await end) as { error: unknown }).error)).toMatchObject({ code: 'TRUNCATED' });
  });

  it('cancelling the body stops the decryption and the source', async () => {
    const w = worker({ holdLimitBytes: 0 });
    // Long enough that what may be in flight (6 MiB of segments for an opener on Node's hashing thread;
    // a service worker hashes inline, with four) is not half of it.
    const large = await sealLarge(64);
    let cancelled = false;
    let reads = 0;
    const source = new ReadableStream<Uint8Array>({
      pull(controller) {
        const offset = reads++ * 65_536;
        if (offset >= large.length) controller.close();
        else controller.enqueue(large.slice(offset, offset + 65_536));
      },
      cancel() {
        cancelled = true;
      },
    });
    const { reply, end } = await w.register({ source: { kind: 'stream', stream: source } });
    const res = await w.get(registeredUrl(reply)).response;
    const reader = res.body!.getReader();
    await reader.read();
    await reader.cancel('user cancelled');
    // A reader that cancels is a user's choice, told apart from a sink that broke.
    expect(reviveError(((await end) as { error: unknown }).error)).toMatchObject({ code: 'CANCELLED' });
    await expect.poll(() => cancelled).toBe(true);
    expect(reads * 65_536).toBeLessThan(large.length / 2);
  });

  it("cancelling the body of a relayed source cancels the page's stream with a coded reason", async () => {
    const w = worker({ holdLimitBytes: 0 });
    const large = await sealLarge(48);
    let cancelled: unknown;
    let reads = 0;
    const source = new ReadableStream<Uint8Array>({
      pull(controller) {
        const offset = reads++ * 65_536;
        if (offset >= large.length) controller.close();
        else controller.enqueue(large.slice(offset, offset + 65_536));
      },
      cancel: (reason) => void (cancelled = reason ?? 'no reason'),
    });
    const { reply } = await w.register({ source: { kind: 'relay', port: readableToPort(source) } });
    const reader = (await w.get(registeredUrl(reply)).response).body!.getReader();
    await reader.read();
    await reader.cancel('user cancelled');
    await expect.poll(() => cancelled).toBeDefined();
    expect(cancelled).toBeInstanceOf(PostGuardError);
    expect(cancelled).toMatchObject({ code: 'CANCELLED', cause: 'user cancelled' });
    // Read ahead: the relay's window and a batch, the segments in flight; not the whole 16 MiB.
    expect(reads * 65_536).toBeLessThan(OPEN_QUEUE_BYTES + 2 * 1_048_576);
  });
});

describe('pacing', () => {
  it('a paced download runs at most a window ahead of what the page acknowledged, and completes as it acknowledges', async () => {
    const w = worker({ holdLimitBytes: 0, pacingWindowBytes: 300_000 });
    const { reply, end } = await w.register({ paced: true });
    const res = await w.get(registeredUrl(reply)).response;
    const reader = res.body!.getReader();
    let read = 0;
    // Without acknowledgements the worker stops at the window (plus the chunk in hand).
    let pending = reader.read();
    for (;;) {
      const next = await Promise.race([
        pending,
        new Promise<'waiting'>((resolve) => setTimeout(() => resolve('waiting'), 300)),
      ]);
      if (next === 'waiting') break;
      if (next.done) throw new Error('a paced body ran to its end unacknowledged');
      read += next.value.byteLength;
      pending = reader.read();
    }
    expect(read).toBeGreaterThan(0);
    expect(read).toBeLessThanOrEqual(300_000 + DEFAULT_SEGMENT_SIZE);
    expect(read).toBeLessThan(plain.length);
    // Acknowledge as we read: it runs to the end.
    w.acknowledge(read);
    for (;;) {
      const next = await pending;
      pending = reader.read();
      if (next.done) break;
      read += next.value.byteLength;
      w.acknowledge(read);
    }
    expect(read).toBe(plain.length);
    expect(await end).toMatchObject({ type: 'done', bytes: plain.length });
  });

  it('a paced download whose page stops acknowledging fails with SINK_FAILED after the stall timeout', async () => {
    const w = worker({ holdLimitBytes: 0, pacingWindowBytes: 100_000, stallTimeoutMs: 300 });
    const { reply, end } = await w.register({ paced: true });
    const res = await w.get(registeredUrl(reply)).response;
    const started = Date.now();
    await expect(bytesOf(res)).rejects.toMatchObject({ code: 'SINK_FAILED' });
    const error = reviveError(((await end) as { error: unknown }).error);
    expect(error).toMatchObject({ code: 'SINK_FAILED' });
    expect((error as Error).message).toContain('stopped reading');
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('an unpaced download ignores acknowledgements and is not held back', async () => {
    const w = worker({ holdLimitBytes: 0, pacingWindowBytes: 1 });
    const { reply } = await w.register({});
    expectSameBytes(await bytesOf(await w.get(registeredUrl(reply)).response), plain);
  });
});

describe('heartbeat', () => {
  it('a download being answered says it is alive while its body is paused, and stops once it ends', async () => {
    const w = worker({ heartbeatMs: 50, holdLimitBytes: 0 });
    const { reply, events, end } = await w.register({});
    const res = await w.get(registeredUrl(reply)).response;
    await new Promise((resolve) => setTimeout(resolve, 400)); // nobody reads
    const alive = events.filter((e) => e.type === 'alive').length;
    expect(alive).toBeGreaterThanOrEqual(3);
    await bytesOf(res);
    await end;
    const after = events.length;
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(events.length).toBe(after);
  });
});

describe('range requests (seekable)', () => {
  const WIRE = DEFAULT_SEGMENT_SIZE + SEGMENT_OVERHEAD;
  const ranged = (w: ReturnType<typeof worker>, url: string, range: string, headers: Record<string, string> = {}) =>
    w.get(url, 'GET', { range, ...headers }).response;
  const blobOf = (bytes: Uint8Array) => ({ kind: 'blob' as const, blob: new Blob([bytes as BlobPart]) });
  /** Byte equality without vitest's element-by-element diffing (seconds for a megabyte). */
  const same = (a: Uint8Array, b: Uint8Array) =>
    Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));

  it('a seekable Blob answers many requests: 206 with the exact range, 416 past the end, 200 whole with Accept-Ranges', async () => {
    const w = worker();
    const { reply, events } = await w.register({ seekable: true, disposition: 'inline', contentType: 'video/webm' });
    expect(reply).toMatchObject({ ok: true, seekable: true });
    const url = registeredUrl(reply);

    // Across the boundary of segments 1 and 2.
    const start = 2 * DEFAULT_SEGMENT_SIZE - 1000;
    const res = await ranged(w, url, `bytes=${start}-${start + 4999}`);
    expect(res.status).toBe(206);
    expect(res.headers.get('content-range')).toBe(`bytes ${start}-${start + 4999}/${plain.length}`);
    expect(res.headers.get('content-length')).toBe('5000');
    expect(res.headers.get('accept-ranges')).toBe('bytes');
    expect(res.headers.get('x-postguard-verified')).toBe('segments');
    expect(res.headers.get('content-type')).toBe('video/webm');
    expect(res.headers.get('content-security-policy')).toBe('sandbox');
    expect(same(await bytesOf(res), plain.slice(start, start + 5000))).toBe(true);
    // The page hears of the range on its port, which may deliver after the body has been read.
    await expect
      .poll(() => events)
      .toContainEqual({
        type: 'range',
        start,
        end: start + 4999,
        total: plain.length,
        sender,
      });

    const open = await ranged(w, url, 'bytes=0-');
    expect([open.status, open.headers.get('content-range')]).toEqual([
      206,
      `bytes 0-${plain.length - 1}/${plain.length}`,
    ]);
    expect(same(await bytesOf(open), plain)).toBe(true);
    const suffix = await ranged(w, url, 'bytes=-10');
    expect(same(await bytesOf(suffix), plain.slice(-10))).toBe(true);
    const multi = await ranged(w, url, 'bytes=5000000-, 7-9, 20-29');
    expect([multi.status, multi.headers.get('content-range')]).toEqual([206, `bytes 7-9/${plain.length}`]);
    expect(same(await bytesOf(multi), plain.slice(7, 10))).toBe(true);

    const past = await ranged(w, url, `bytes=${plain.length}-`);
    expect([past.status, past.headers.get('content-range')]).toEqual([416, `bytes */${plain.length}`]);

    // Without Range (or with an If-Range we cannot honour): the whole file, verified, and still seekable.
    for (const whole of [await w.get(url).response, await ranged(w, url, 'bytes=10-', { 'if-range': '"x"' })]) {
      expect([whole.status, whole.headers.get('accept-ranges'), whole.headers.get('x-postguard-verified')]).toEqual([
        200,
        'bytes',
        'complete',
      ]);
      expect(same(await bytesOf(whole), plain)).toBe(true);
    }
    await expect.poll(() => events.filter((e) => e.type === 'done').length).toBe(2);
    expect(events.find((e) => e.type === 'done')).toMatchObject({
      result: { public: sender, contentSigner: 'public', bound: true },
    });
    expect((await ranged(w, url, 'bytes=1-1')).status).toBe(206);
  });

  it('HEAD of a seekable file: the length and Accept-Ranges a GET would send, no body, nothing spent', async () => {
    const w = worker();
    const { reply, events } = await w.register({ seekable: true, contentType: 'video/webm' });
    const url = registeredUrl(reply);
    const head = await w.get(url, 'HEAD').response;
    expect([head.status, head.headers.get('content-length'), head.headers.get('accept-ranges')]).toEqual([
      200,
      String(plain.length),
      'bytes',
    ]);
    expect(head.headers.get('content-type')).toBe('video/webm');
    expect(head.body).toBeNull();
    // No range was served and nothing ended: the registration still answers.
    expect(events.filter((e) => e.type === 'range' || e.type === 'done' || e.type === 'error')).toEqual([]);
    const res = await ranged(w, url, 'bytes=3-5');
    expect([res.status, same(await bytesOf(res), plain.slice(3, 6))]).toEqual([206, true]);

    // A damaged final segment: the HEAD reports what a GET would (422 TAMPERED), and the registration ends.
    const bad = ciphertext.slice();
    bad[bad.length - 20]! ^= 1;
    const damaged = await w.register({ seekable: true, source: blobOf(bad) });
    const refused = await w.get(registeredUrl(damaged.reply), 'HEAD').response;
    expect([refused.status, refused.headers.get('x-postguard-error'), refused.body]).toEqual([422, 'TAMPERED', null]);
    expect((await w.get(registeredUrl(damaged.reply), 'HEAD').response).status).toBe(404);

    // A URL whose server does not answer ranges: no length known without reading it, and no seeking.
    const plainServer = await w.register({ seekable: true, source: { kind: 'url', url: `${serverUrl}/ct` } });
    const whole = await w.get(registeredUrl(plainServer.reply), 'HEAD').response;
    expect([whole.status, whole.headers.get('accept-ranges'), whole.headers.get('content-length')]).toEqual([
      200,
      'none',
      null,
    ]);
  });

  it('property: any range of a seekable file is exactly plaintext.slice(a, b + 1)', async () => {
    const w = worker();
    const url = registeredUrl((await w.register({ seekable: true })).reply);
    await fc.assert(
      fc.asyncProperty(fc.nat(plain.length - 1), fc.nat(plain.length), async (a, length) => {
        const b = Math.min(plain.length - 1, a + length);
        const res = await ranged(w, url, `bytes=${a}-${b}`);
        expect(res.headers.get('content-range')).toBe(`bytes ${a}-${b}/${plain.length}`);
        expect(same(await bytesOf(res), plain.slice(a, b + 1))).toBe(true);
      }),
      { numRuns: 60 },
    );
  });

  it('a tampered segment errors the body of a range that needs it, tells the page TAMPERED, and ends the registration', async () => {
    const bad = ciphertext.slice();
    bad[framingBytes + 2 * WIRE + 100]! ^= 0x01; // inside segment 2
    const w = worker();
    const { reply, end } = await w.register({ seekable: true, source: blobOf(bad) });
    const url = registeredUrl(reply);
    // Segment 1 alone is fine: segments authenticate on their own.
    const good = await ranged(w, url, `bytes=${DEFAULT_SEGMENT_SIZE}-${DEFAULT_SEGMENT_SIZE + 99}`);
    expect(same(await bytesOf(good), plain.slice(DEFAULT_SEGMENT_SIZE, DEFAULT_SEGMENT_SIZE + 100))).toBe(true);
    const res = await ranged(w, url, `bytes=${DEFAULT_SEGMENT_SIZE}-`);
    expect(res.status).toBe(206);
    await expect(bytesOf(res)).rejects.toMatchObject({ code: 'TAMPERED' });
    expect(reviveError(((await end) as { error: unknown }).error)).toMatchObject({ code: 'TAMPERED' });
    expect((await ranged(w, url, 'bytes=0-9')).status).toBe(404);
  });

  it('segment 0 and the final segment are authenticated before the first range: damaged or cut, no byte is served', async () => {
    const finalTampered = ciphertext.slice();
    finalTampered[ciphertext.length - 20]! ^= 0x01;
    const cut = ciphertext.slice(0, framingBytes + 3 * WIRE); // whole segments, no final one
    const shorter = ciphertext.slice(0, ciphertext.length - 1);
    for (const [bytes, code] of [
      [finalTampered, 'TAMPERED'],
      [cut, 'TRUNCATED'],
      [shorter, 'TAMPERED'],
    ] as const) {
      const w = worker();
      const { reply, end } = await w.register({ seekable: true, source: blobOf(bytes) });
      const res = await ranged(w, registeredUrl(reply), 'bytes=0-99');
      expect([res.status, res.headers.get('x-postguard-error')], code).toEqual([422, code]);
      expect(reviveError(((await end) as { error: unknown }).error)).toMatchObject({ code });
    }
    const w = worker();
    const { reply } = await w.register({ seekable: true, usk: otherUsk });
    const res = await ranged(w, registeredUrl(reply), 'bytes=0-99');
    expect([res.status, res.headers.get('x-postguard-error')]).toEqual([403, 'WRONG_KEY']);
  });

  it('a reader that drops a range (a seeking video) ends that response only', async () => {
    const w = worker();
    const { reply, events } = await w.register({ seekable: true });
    const url = registeredUrl(reply);
    const res = await ranged(w, url, 'bytes=0-');
    const reader = res.body!.getReader();
    await reader.read();
    await reader.cancel('seeked elsewhere');
    const next = await ranged(w, url, 'bytes=-100');
    expect(same(await bytesOf(next), plain.slice(-100))).toBe(true);
    // A full response dropped by its reader is not an error either.
    const whole = await w.get(url).response;
    await whole.body!.cancel('seeked');
    expect((await ranged(w, url, 'bytes=0-0')).status).toBe(206);
    expect(events.filter((e) => e.type === 'error')).toEqual([]);
  });

  it('a range dropped while its next segment is being decrypted ends quietly (WebKit does this as it seeks)', async () => {
    // A Blob whose reads take a while, so that the cancel lands while a pull waits for a segment.
    class SlowBlob extends Blob {
      override slice(start?: number, end?: number): Blob {
        const part = super.slice(start, end);
        return Object.assign(part, {
          arrayBuffer: () =>
            new Promise<ArrayBuffer>((resolve) => setTimeout(() => resolve(Blob.prototype.arrayBuffer.call(part)), 50)),
        });
      }
    }
    const w = worker();
    const { reply, events } = await w.register({
      seekable: true,
      source: { kind: 'blob', blob: new SlowBlob([ciphertext as BlobPart]) },
    });
    const url = registeredUrl(reply);
    const res = await ranged(w, url, `bytes=${DEFAULT_SEGMENT_SIZE}-`);
    const reader = res.body!.getReader();
    const pending = reader.read();
    await new Promise((resolve) => setTimeout(resolve, 10));
    await reader.cancel('seeked');
    await pending;
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(events.filter((e) => e.type === 'error')).toEqual([]);
    expect(same(await bytesOf(await ranged(w, url, 'bytes=5-9')), plain.slice(5, 10))).toBe(true);
  });

  it('a URL whose server answers ranges is read in ranges; one that does not is served whole', async () => {
    const w = worker();
    rangeRequests.length = 0;
    const { reply } = await w.register({ seekable: true, source: { kind: 'url', url: `${serverUrl}/ranged` } });
    const url = registeredUrl(reply);
    const start = 2 * DEFAULT_SEGMENT_SIZE + 10;
    const res = await ranged(w, url, `bytes=${start}-${start + 99}`);
    expect([res.status, res.headers.get('content-range')]).toEqual([
      206,
      `bytes ${start}-${start + 99}/${plain.length}`,
    ]);
    expect(same(await bytesOf(res), plain.slice(start, start + 100))).toBe(true);
    // The probe (framing and the start of segment 0), segment 0, the final segment, segment 2; never the whole file.
    expect(rangeRequests.every((r) => /^bytes=\d+-\d+$/.test(r))).toBe(true);
    expect(rangeRequests).toContain(`bytes=${framingBytes + 2 * WIRE}-${framingBytes + 3 * WIRE - 1}`);

    const plainServer = await w.register({ seekable: true, source: { kind: 'url', url: `${serverUrl}/ct` } });
    const whole = await ranged(w, registeredUrl(plainServer.reply), 'bytes=100-199');
    expect([whole.status, whole.headers.get('accept-ranges'), whole.headers.get('x-postguard-verified')]).toEqual([
      200,
      'none',
      'complete',
    ]);
    expect(same(await bytesOf(whole), plain)).toBe(true);
  });

  it('a stream cannot seek: registered seekable it is served once, whole, ignoring Range', async () => {
    const w = worker();
    const { reply } = await w.register({
      seekable: true,
      source: { kind: 'stream', stream: chunkedSource(ciphertext, 40_000) },
    });
    expect(reply).toMatchObject({ ok: true, seekable: false });
    const url = registeredUrl(reply);
    const res = await ranged(w, url, 'bytes=100-199');
    expect([res.status, res.headers.get('accept-ranges'), res.headers.get('content-range')]).toEqual([
      200,
      'none',
      null,
    ]);
    expect(same(await bytesOf(res), plain)).toBe(true);
    expect((await ranged(w, url, 'bytes=100-199')).status).toBe(404);
  });

  it('a one-shot registration ignores Range: the whole file, verified, once', async () => {
    const w = worker();
    const { reply } = await w.register({});
    const res = await ranged(w, registeredUrl(reply), 'bytes=100-199');
    expect([res.status, res.headers.get('accept-ranges')]).toEqual([200, 'none']);
    expect(same(await bytesOf(res), plain)).toBe(true);
  });

  it('a seekable registration lives while it is requested (each request starts its lifetime again), then says so', async () => {
    const w = worker();
    const ttlMs = 400;
    const { reply, end, events } = await w.register({ seekable: true, ttlMs });
    const url = registeredUrl(reply);
    const born = Date.now();
    // Requests every ~150 ms for three lifetimes: a video that plays. HEAD renews too.
    let lastRequest = born;
    while (Date.now() - born < 3 * ttlMs) {
      expect((await ranged(w, url, 'bytes=0-9')).status).toBe(206);
      lastRequest = Date.now();
      expect((await w.get(url, 'HEAD').response).status).toBe(200);
      await new Promise((r) => setTimeout(r, 150));
    }
    // The page hears of each renewal (download.ts bounds the registration's life by the same lifetime).
    expect(events.filter((e) => e.type === 'alive').length).toBeGreaterThanOrEqual(10);
    expect(reviveError(((await end) as { error: unknown }).error)).toMatchObject({
      code: 'INVALID_STATE',
      message: expect.stringMatching(/lifetime/),
    });
    // Left alone, it ended one lifetime after its last request (timers may fire a little late).
    expect(Date.now() - lastRequest).toBeGreaterThanOrEqual(ttlMs - 20);
    expect(Date.now() - born).toBeGreaterThan(3 * ttlMs);
    expect((await ranged(w, url, 'bytes=0-9')).status).toBe(404);
    const refused = await w.register({ seekable: true, paced: true });
    expect(reviveError((refused.reply as { error: unknown }).error)).toMatchObject({ code: 'INVALID_INPUT' });
  });
});

describe('registrations', () => {
  it('refuses what it cannot serve, with INVALID_INPUT', async () => {
    const w = worker();
    const bad: Array<Partial<RegisterRequest>> = [
      { source: { kind: 'url', url: 'javascript:alert(1)' } },
      { source: { kind: 'url', url: 'not a url' } },
      { source: { kind: 'blob', blob: 'x' as never } },
      { source: { kind: 'carrier-pigeon' } as never },
      // The one-chunk-per-round-trip relay of earlier pages: another protocol, refused rather than hung on.
      { source: { kind: 'port', port: new MessageChannel().port1 } as never },
      { source: { kind: 'relay', port: 'not a port' } as never },
      { source: undefined as never },
      { contentType: 'text/html\r\nset-cookie: a=b' },
      { disposition: 'open' as never },
      { size: -1 },
      { usk: 5 as never },
      { usk: [] as never },
      { vk: [{ id: 'a' }] as never },
    ];
    for (const request of bad) {
      const { reply } = await w.register(request);
      expect(reply).toMatchObject({ type: 'registered', ok: false });
      expect(reviveError((reply as { error: unknown }).error)).toMatchObject({ code: 'INVALID_INPUT' });
    }
  });

  it('expire unused, and say so', async () => {
    const w = worker();
    const { reply, end } = await w.register({ ttlMs: 30 });
    expect(reviveError(((await end) as { error: unknown }).error)).toMatchObject({
      code: 'INVALID_STATE',
      message: expect.stringMatching(/expired/),
    });
    expect((await w.get(registeredUrl(reply)).response).status).toBe(404);
  });

  it('can be revoked', async () => {
    const w = worker();
    const { reply, end } = await w.register({});
    w.revoke((reply as { id: string }).id);
    expect(reviveError(((await end) as { error: unknown }).error)).toMatchObject({
      code: 'INVALID_STATE',
      message: expect.stringMatching(/revoked/),
    });
    expect((await w.get(registeredUrl(reply)).response).status).toBe(404);
  });

  it("revoked, a relayed source is cancelled on the page's side without having been read", async () => {
    const w = worker();
    let reads = 0;
    let cancelled = false;
    const source = new ReadableStream<Uint8Array>(
      {
        pull: (c) => void (reads++, c.enqueue(new Uint8Array(1000))),
        cancel: () => void (cancelled = true),
      },
      { highWaterMark: 0 },
    );
    const { reply } = await w.register({ source: { kind: 'relay', port: readableToPort(source) } });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(reads).toBe(0); // nothing is read before the download is fetched
    w.revoke((reply as { id: string }).id);
    await expect.poll(() => cancelled).toBe(true);
  });

  it('are capped', async () => {
    const w = worker({ maxRegistrations: 2 });
    await w.register({});
    await w.register({});
    const { reply } = await w.register({});
    expect(reviveError((reply as { error: unknown }).error)).toMatchObject({ code: 'INVALID_STATE' });
  });

  it('ignores requests outside its path and lets them through', () => {
    const w = worker();
    expect(() => w.get(`${SCOPE}other/thing`)).toThrow(/not handled/);
    expect(() => w.get('https://elsewhere.example/sub/pg-download/x/y')).toThrow(/not handled/);
    expect(() => w.get(`${SCOPE}pg-download/x/y`, 'POST')).toThrow(/not handled/);
  });
});

describe('file names', () => {
  it('are reduced to a safe base name', () => {
    expect(safeFilename('../../etc/passwd')).toBe('passwd');
    expect(safeFilename('C:\\Users\\x\\evil.exe')).toBe('evil.exe');
    expect(safeFilename('a\u0000b\nc.txt')).toBe('abc.txt');
    expect(safeFilename('..')).toBe('download');
    expect(safeFilename(undefined)).toBe('download');
    expect(safeFilename('x'.repeat(300))).toHaveLength(255);
  });

  it('are cut at code points, to 255 UTF-8 bytes, the extension kept: 254 characters and an emoji save', () => {
    const long = `${'a'.repeat(254)}\u{1F600}.pdf`;
    const name = safeFilename(long);
    expect(name.endsWith('.pdf')).toBe(true);
    expect(new TextEncoder().encode(name).length).toBeLessThanOrEqual(255);
    expect(name).not.toMatch(/\p{Cs}/u);
    expect(() => contentDisposition('attachment', name)).not.toThrow();
    // Cut right at the pair: the emoji goes whole or not at all.
    const atPair = safeFilename(`${'a'.repeat(250)}\u{1F600}\u{1F600}`);
    expect(atPair).toBe(`${'a'.repeat(250)}\u{1F600}`);
    expect(() => contentDisposition('attachment', safeFilename(`x\uD800y.txt`))).not.toThrow();
    expect(safeFilename('é'.repeat(200))).toBe('é'.repeat(127));
  });

  it('are quoted for Content-Disposition without header injection', () => {
    expect(contentDisposition('inline', 'a"b\\c\r\n.txt')).toBe(
      `inline; filename="a_b_c__.txt"; filename*=UTF-8''a%22b%5Cc%0D%0A.txt`,
    );
    expect(contentDisposition('attachment', "it's (1).txt")).toBe(
      `attachment; filename="it's (1).txt"; filename*=UTF-8''it%27s%20%281%29.txt`,
    );
  });
});

/**
 * A page's crypto worker that the test can silence: the real serveDecrypter behind a bridge that
 * forwards every message both ways (the job's reply port and its plaintext relay too) until
 * `silence()`, as a closed tab's worker stops. `silentAfterChunks` silences it by itself once that
 * many plaintext chunks went through, so a test that needs the service worker to take over mid-file
 * does not race the page to the file's end. `jobs` counts the jobs it was given.
 */
function pageDecrypter({ silentAfterChunks = Infinity }: { silentAfterChunks?: number } = {}) {
  let silent = false;
  let chunks = 0;
  const jobs: Array<{ reopen?: number }> = [];
  const bridge = (from: MessagePort, to: MessagePort) => {
    from.onmessage = ({ data, ports }: MessageEvent) => {
      if (silent) return;
      const message = data as { type?: string; t?: string; plain?: MessagePort; chunk?: Uint8Array; reopen?: number };
      const transfer: Transferable[] = [];
      let out: unknown = message;
      if (message?.type === 'open') jobs.push({ ...(message.reopen !== undefined ? { reopen: message.reopen } : {}) });
      if (ports[0] !== undefined) transfer.push(linked(ports[0]));
      if (message?.type === 'opened' && message.plain !== undefined) {
        const plain = linked(message.plain);
        out = { ...message, plain };
        transfer.push(plain);
      }
      if (message?.t === 'bytes' && message.chunk !== undefined) transfer.push(message.chunk.buffer as ArrayBuffer);
      to.postMessage(out, transfer);
      if (message?.t === 'bytes' && ++chunks >= silentAfterChunks) silent = true;
    };
  };
  /** A port whose messages go both ways to and from `port`, through the bridge. */
  const linked = (port: MessagePort): MessagePort => {
    const { port1, port2 } = new MessageChannel();
    bridge(port, port1);
    bridge(port1, port);
    return port2;
  };
  const served = new MessageChannel();
  serveDecrypter(served.port1);
  return { port: linked(served.port2), jobs, silence: () => void (silent = true) };
}

describe("offloaded to the page's crypto worker", () => {
  const offloading = { offloadSilenceMs: 300 };

  it('decrypts there: the same bytes and verdict, streamed, held or read twice (the second reading only decrypts)', async () => {
    for (const [options, verifyFirst, expected] of [
      [{}, false, [{}]],
      [{}, true, [{}]],
      [{ holdLimitBytes: 100_000 }, true, [{}, { reopen: 1 }]],
    ] as const) {
      const d = pageDecrypter();
      const w = worker({ ...offloading, ...options });
      const { reply, end } = await w.register({ decrypter: d.port, verifyFirst });
      const res = await w.get(registeredUrl(reply)).response;
      expect(res.headers.get('content-length')).toBe(String(plain.length));
      expectSameBytes(await bytesOf(res), plain);
      expect(await end).toEqual({
        type: 'done',
        bytes: plain.length,
        result: { public: sender, contentSigner: 'public', bound: true },
      });
      expect(d.jobs).toEqual(expected);
    }
  });

  it('a URL source too, fetched by the crypto worker', async () => {
    const d = pageDecrypter();
    const w = worker(offloading);
    const { reply } = await w.register({ source: { kind: 'url', url: `${serverUrl}/ct` }, decrypter: d.port });
    expectSameBytes(await bytesOf(await w.get(registeredUrl(reply)).response), plain);
    expect(d.jobs).toHaveLength(1);
  });

  it('a tampered segment errors the body (streaming) or is refused before any byte (verify first), with TAMPERED', async () => {
    const bad = ciphertext.slice();
    bad[ciphertext.length - DEFAULT_SEGMENT_SIZE - 500]! ^= 1;
    for (const verifyFirst of [false, true]) {
      const d = pageDecrypter();
      const w = worker(offloading);
      const { reply, end } = await w.register({
        source: { kind: 'blob', blob: new Blob([bad as BlobPart]) },
        decrypter: d.port,
        verifyFirst,
      });
      const res = await w.get(registeredUrl(reply)).response;
      if (verifyFirst) expect([res.status, res.headers.get('x-postguard-error')]).toEqual([422, 'TAMPERED']);
      else await expect(bytesOf(res)).rejects.toMatchObject({ code: 'TAMPERED' });
      expect(reviveError(((await end) as { error: unknown }).error)).toMatchObject({ code: 'TAMPERED' });
      expect(d.jobs).toHaveLength(1);
    }
  });

  it('a crypto worker that never answers (stalled, or of another version): the service worker decrypts itself', async () => {
    const { port2: nobody } = new MessageChannel();
    const w = worker(offloading);
    const { reply, end } = await w.register({ decrypter: nobody, verifyFirst: false });
    const started = Date.now();
    expectSameBytes(await bytesOf(await w.get(registeredUrl(reply)).response), plain);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(await end).toMatchObject({ type: 'done', bytes: plain.length });
  });

  it('a page that goes away mid-file: the service worker takes over where it was, same bytes, verified', async () => {
    const large = await sealLarge(16);
    const expected = new Uint8Array(16 * DEFAULT_SEGMENT_SIZE);
    // The crypto worker's jobs (verify first: its first reading verified it all, its second was cut
    // off), then one reading here, taking over (the Blob posted to the crypto worker is a copy,
    // whose readings this one does not count).
    for (const [verifyFirst, jobs] of [
      [false, 1],
      [true, 2],
    ] as const) {
      let read = 0;
      class CountedBlob extends Blob {
        override stream() {
          read++;
          return super.stream();
        }
      }
      const d = pageDecrypter();
      const w = worker({ ...offloading, holdLimitBytes: 100_000 });
      const { reply, end } = await w.register({
        source: { kind: 'blob', blob: new CountedBlob([large as BlobPart]) },
        decrypter: d.port,
        verifyFirst,
      });
      const res = await w.get(registeredUrl(reply)).response;
      const reader = res.body!.getReader();
      const first = await reader.read();
      d.silence();
      const chunks = [first.value!];
      for (let r = await reader.read(); !r.done; r = await reader.read()) chunks.push(r.value);
      expectSameBytes(new Uint8Array(await new Blob(chunks as BlobPart[]).arrayBuffer()), expected);
      expect(await end).toMatchObject({ type: 'done', bytes: expected.length, result: { bound: true } });
      expect([read, d.jobs.length]).toEqual([1, jobs]);
    }
  });

  it('a URL that changed before the service worker took over is refused, not spliced', async () => {
    const large = await sealLarge(16);
    const other = await sealLarge(16);
    let served = 0;
    const changing = createServer((_, res) => {
      const body = served++ === 0 ? large : other;
      res.writeHead(200, { 'content-length': body.length }).end(body);
    });
    await new Promise<void>((resolve) => changing.listen(0, '127.0.0.1', resolve));
    try {
      const d = pageDecrypter({ silentAfterChunks: 3 });
      const w = worker(offloading);
      const url = `http://127.0.0.1:${(changing.address() as { port: number }).port}/ct`;
      const { reply, end } = await w.register({ source: { kind: 'url', url }, decrypter: d.port, verifyFirst: false });
      const reader = (await w.get(registeredUrl(reply)).response).body!.getReader();
      await reader.read();
      await expect(
        (async () => {
          for (let r = await reader.read(); !r.done; r = await reader.read());
        })(),
      ).rejects.toMatchObject({ code: 'TAMPERED' });
      expect(reviveError(((await end) as { error: unknown }).error)).toMatchObject({ code: 'TAMPERED' });
      expect(served).toBe(2);
    } finally {
      await new Promise((resolve) => changing.close(resolve));
    }
  });
});

describe('as a route of an app’s own router (createDecrypterRoute)', () => {
  it('matches only its own GETs and HEADs, answers them through the handler, and takes registrations by onMessage', async () => {
    const scope = { registration: { scope: SCOPE }, fetch: globalThis.fetch } as unknown as ServiceWorkerGlobalScope;
    const route = createDecrypterRoute(scope, { progressIntervalMs: 0 });
    const match = (url: string, method = 'GET') =>
      route.match({ url: new URL(url), request: new Request(url, { method }) });
    expect(match(`${SCOPE}pg-download/abc/x.bin`)).toBe(true);
    expect(match(`${SCOPE}pg-download/abc/x.bin`, 'HEAD')).toBe(true);
    expect(match(`${SCOPE}pg-download/abc/x.bin`, 'POST')).toBe(false);
    expect(match(`${SCOPE}app.js`)).toBe(false);
    expect(match('https://elsewhere.example/sub/pg-download/abc/x.bin')).toBe(false);

    // A router hands the message events on; the registration answers on its port.
    const { port1, port2 } = new MessageChannel();
    const reply = new Promise<DownloadEvent>(
      (resolve) => (port1.onmessage = ({ data }) => resolve(data as DownloadEvent)),
    );
    route.onMessage(
      Object.assign(new Event('message'), {
        data: {
          type: MESSAGE_REGISTER,
          request: {
            recipientId: ALICE,
            usk,
            vk,
            filename: 'report.bin',
            source: { kind: 'blob', blob: new Blob([ciphertext as BlobPart]) },
          },
        },
        ports: [port2],
        waitUntil() {},
      }) as unknown as ExtendableMessageEvent,
    );
    const url = registeredUrl(await reply);
    port1.close();
    expect(match(url)).toBe(true);
    // workbox calls the handler with the event, which is kept alive while the body streams.
    const kept: Promise<unknown>[] = [];
    const event = { waitUntil: (p: Promise<unknown>) => void kept.push(p) } as unknown as ExtendableEvent;
    const response = await route.handler({ request: new Request(url), event });
    expect(response.status).toBe(200);
    expectSameBytes(await bytesOf(response), plain);
    expect(kept).toHaveLength(1);
    await kept[0];
    // Single use, as when installed.
    expect((await route.handler({ request: new Request(url) })).status).toBe(404);
  });
});
