import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readdir } from 'node:fs/promises';
import Fastify from 'fastify';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { StreamUnsealer } from '../lib/index.js';
import { extractUsk } from '../lib/keys.js';
import { startStorage, type RunningStorage } from '../devtools/storage/testing.js';
import { loadPgWasm } from '../test/pgwasm.js';
import { chunkedSource, collector, failingSource } from '../test/streams.js';
import { PostGuard, ClientError, ClientErrorCode, type FetchLike, type PostGuardConfig } from './index.js';
import { resolveConfig } from './config.js';
import { StorageClient } from './storage.js';
import { readZip, startFakePkg, type FakePkg } from './testing.js';

/**
 * The SDK end to end over loopback HTTP: a PKG (the fake in ./testing.ts; the real PKG has its own
 * test, pkg-real.test.ts), the storage stand-in, then download, decrypt with postguard-ts and with
 * @e4a/pg-wasm, unzip (readZip in ./testing.ts: a central-directory reader over node:zlib), compare.
 */

const EMAIL = 'pbdf.sidn-pbdf.email.email';
const DOMAIN = 'pbdf.sidn-pbdf.email.domain';
const CHUNK = 64 * 1024;

let pkg: FakePkg;
let storage: RunningStorage;

beforeAll(async () => {
  pkg = await startFakePkg();
  storage = await startStorage({ verifyingKey: pkg.keys.vk, chunkSize: CHUNK });
});
afterAll(async () => {
  await storage.close();
  await pkg.close();
});
beforeEach(async () => {
  await fetch(`${storage.url}/standin/outbox`, { method: 'DELETE' });
  await fetch(`${storage.url}/standin/faults`, { method: 'DELETE' });
});

interface Call {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: unknown;
}

/** A client whose requests are recorded (then sent for real). */
function client(
  config: Partial<PostGuardConfig> = {},
  intercept?: (url: string, init: RequestInit) => Promise<Response> | undefined,
) {
  const calls: Call[] = [];
  const spy: FetchLike = (url, init) => {
    const headers = Object.fromEntries(new Headers(init.headers).entries());
    calls.push({
      method: init.method ?? 'GET',
      url,
      headers,
      body: typeof init.body === 'string' ? JSON.parse(init.body) : init.body,
    });
    return intercept?.(url, init) ?? fetch(url, init);
  };
  const pg = new PostGuard({
    pkgUrl: pkg.url,
    storageUrl: storage.url,
    allowInsecureUrls: true,
    uploadChunkSize: CHUNK,
    retry: { initialDelayMs: 1, maxDelayMs: 5 },
    fetch: spy,
    ...config,
  });
  return { pg, calls };
}

const pattern = (n: number, seed: number) => new Uint8Array(n).map((_, i) => (i * 31 + seed * 7 + (i >> 9)) & 0xff);
const TEXT = new TextEncoder().encode('Dear Bob, the report is attached.\n');
const BLOB_BYTES = pattern(200_000, 1);
const STREAM_BYTES = pattern(300_001, 2);

function files() {
  return [
    { name: 'letters/note.txt', content: TEXT },
    { name: 'C:\\scans\\scan.bin', content: new Blob([BLOB_BYTES]) },
    { name: 'data.bin', content: chunkedSource(STREAM_BYTES, 10_000) },
  ];
}

const EXPECTED = new Map([
  ['note.txt', TEXT],
  ['scan.bin', BLOB_BYTES],
  ['data.bin', STREAM_BYTES],
]);

async function download(uuid: string): Promise<Uint8Array> {
  const response = await fetch(`${storage.url}/filedownload/${uuid}`);
  expect(response.status).toBe(200);
  return new Uint8Array(await response.arrayBuffer());
}

/** The USK for a recipient, at the timestamp its header entry carries. */
function uskFor(header: Map<string, unknown>, id: string, con: Array<{ t: string; v: string }>) {
  const entry = header.get(id) as { ts: number } | undefined;
  expect(entry, `header lists ${id}`).toBeDefined();
  return extractUsk(pkg.keys.msk, { ts: entry!.ts, con });
}

async function openWithPostguardTs(ciphertext: Uint8Array, id: string, con: Array<{ t: string; v: string }>) {
  const unsealer = await StreamUnsealer.new(chunkedSource(ciphertext, 50_000), pkg.keys.vk);
  const out = collector();
  const verified = await unsealer.unseal(id, uskFor(unsealer.inspect_header(), id, con), out.writable);
  return { plaintext: out.bytes(), verified };
}

async function openWithPgWasm(ciphertext: Uint8Array, id: string, con: Array<{ t: string; v: string }>) {
  const pgw = await loadPgWasm();
  const unsealer = await pgw.StreamUnsealer.new(chunkedSource(ciphertext, 50_000), pkg.keys.vk);
  const out = collector();
  const verified = await unsealer.unseal(id, uskFor(unsealer.inspect_header(), id, con), out.writable);
  return { plaintext: out.bytes(), verified };
}

async function rejection(promise: Promise<unknown>): Promise<ClientError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ClientError);
  return error as ClientError;
}

const storageCalls = (calls: Call[]) => calls.filter((c) => c.url.startsWith(storage.url));
/** The calls that begin or carry an upload (GET /limits, read before the keys, begins nothing). */
const uploadCalls = (calls: Call[]) =>
  storageCalls(calls).filter((c) => c.url.startsWith(`${storage.url}/fileupload/`));

describe('upload()', () => {
  it('uploads a ZIP of the files that both libraries decrypt, for an e-mail and a domain recipient', async () => {
    const { pg, calls } = client();
    const sealed = pg.encrypt({
      files: files(),
      recipients: [pg.recipient.email('bob@example.com'), pg.recipient.emailDomain('carol@example.net')],
      sign: pg.sign.apiKey(pkg.apiKey),
    });
    const progress: number[] = [];
    const { uuid } = await sealed.upload({ onProgress: (n) => progress.push(n) });
    expect(uuid).toMatch(/^[0-9a-f-]{36}$/);

    const ciphertext = await download(uuid);
    expect(progress.at(-1)).toBe(ciphertext.length);
    const bob = [{ t: EMAIL, v: 'bob@example.com' }];
    const carol = [{ t: DOMAIN, v: 'example.net' }];
    for (const open of [openWithPostguardTs, openWithPgWasm]) {
      for (const [id, con] of [
        ['bob@example.com', bob],
        ['carol@example.net', carol],
      ] as const) {
        const { plaintext, verified } = await open(ciphertext, id, con);
        expect(readZip(plaintext), `${open.name} ${id}`).toEqual(EXPECTED);
        expect(JSON.stringify(verified)).toContain(pkg.sender);
      }
    }

    // The PKG saw one sign/key request shaped as the .NET SDK sends it.
    expect(pkg.signKeyRequests.at(-1)).toEqual({
      authorization: `Bearer ${pkg.apiKey}`,
      body: { pubSignId: [{ t: EMAIL }] },
    });

    // The storage protocol as Cryptify implements it. An API key's tier is decided at init, so
    // nothing is asked of the storage service before the keys (no GET /limits).
    expect(storageCalls(calls)[0]).toMatchObject({ method: 'POST', url: `${storage.url}/fileupload/init` });
    const sent = uploadCalls(calls);
    expect(sent[0]).toMatchObject({
      method: 'POST',
      url: `${storage.url}/fileupload/init`,
      headers: { authorization: `Bearer ${pkg.apiKey}`, 'content-type': 'application/json' },
      body: {
        recipient: 'bob@example.com, carol@example.net',
        mailContent: '',
        mailLang: 'EN',
        confirm: false,
        notifyRecipients: false,
      },
    });
    const chunks = sent.slice(1, -1);
    expect(chunks.length).toBe(Math.ceil(ciphertext.length / CHUNK));
    let offset = 0;
    for (const chunk of chunks) {
      expect(chunk.method).toBe('PUT');
      expect(chunk.headers['authorization']).toBeUndefined();
      const end = Math.min(ciphertext.length, offset + CHUNK);
      expect(chunk.headers['content-range']).toBe(`bytes ${offset}-${end}/*`);
      // The chunk goes out as it is (a stream of it, its length declared), not as a body fetch copies.
      expect(chunk.headers['content-length']).toBe(String(end - offset));
      expect(chunk.body).toBeInstanceOf(ReadableStream);
      offset = end;
    }
    expect(sent.at(-1)).toMatchObject({
      method: 'POST',
      url: `${storage.url}/fileupload/finalize/${uuid}`,
      headers: { 'content-range': `bytes */${ciphertext.length}` },
    });
    expect(sent.every((c) => /^node,[^,]+,postguard-ts,\d/.test(c.headers['x-postguard-client-version'] ?? ''))).toBe(
      true,
    );
    // Silent by default.
    expect(await storage.outbox()).toEqual([]);
  });

  it('cryptifySource goes to the storage service with every request, never to the PKG (pg-js 2.6)', async () => {
    const { pg, calls } = client({ cryptifySource: 'postguard-ts-test' });
    await pg
      .encrypt({
        files: [{ name: 'a.txt', content: TEXT }],
        recipients: [pg.recipient.email('bob@example.com')],
        sign: pg.sign.apiKey(pkg.apiKey),
      })
      .upload();
    const toStorage = storageCalls(calls);
    const toPkg = calls.filter((c) => c.url.startsWith(pkg.url));
    expect(new Set(toStorage.map((c) => c.url.replace(storage.url, '').split('/')[1]))).toEqual(
      new Set(['fileupload']),
    );
    expect(toStorage.every((c) => c.headers['x-cryptify-source'] === 'postguard-ts-test')).toBe(true);
    expect(toPkg.length).toBeGreaterThan(0);
    expect(toPkg.some((c) => 'x-cryptify-source' in c.headers)).toBe(false);
  });

  it('passes the notification options on; the storage service mails recipients and sender', async () => {
    const { pg } = client();
    const { uuid } = await pg
      .encrypt({
        files: [{ name: 'a.txt', content: TEXT }],
        recipients: [pg.recipient.email('bob@example.com')],
        sign: pg.sign.apiKey(pkg.apiKey),
      })
      .upload({ notify: { recipients: true, sender: true, message: 'Zie bijlage', language: 'NL' } });
    expect((await storage.outbox()).map((m) => [m.kind, m.to, m.replyTo, m.lang, m.message, m.uuid])).toEqual([
      ['recipient', 'bob@example.com', pkg.sender, 'NL', 'Zie bijlage', uuid],
      ['confirmation', pkg.sender, null, 'NL', 'Zie bijlage', uuid],
    ]);
  });

  it("answers the storage service's challenge with a proof of the sender's key (pg-js 2.5)", async () => {
    const { pg } = client();
    await pg
      .encrypt({
        files: [{ name: 'a.txt', content: TEXT }],
        recipients: [pg.recipient.email('bob@example.com')],
        sign: pg.sign.apiKey(pkg.apiKey),
      })
      .upload({ notify: { recipients: true } });
    expect((await storage.outbox()).map((m) => [m.to, m.senderVerified, m.senderProven])).toEqual([
      ['bob@example.com', true, true],
    ]);
  });

  it('checks the upload options and needs an address per recipient, before anything is sent', async () => {
    const { pg, calls } = client();
    const make = (recipient = pg.recipient.email('bob@example.com')) =>
      pg.encrypt({ files: [{ name: 'a', content: TEXT }], recipients: [recipient], sign: pg.sign.apiKey(pkg.apiKey) });
    for (const notify of [{ language: 'DE' }, { recipients: 'yes' }, { message: 5 }, 'all']) {
      expect((await rejection(make().upload({ notify: notify as never }))).code, JSON.stringify(notify)).toBe(
        ClientErrorCode.INVALID_INPUT,
      );
    }
    expect((await rejection(make(pg.recipient.emailDomain('example.com')).upload())).message).toMatch(
      /needs an e-mail address/,
    );
    // The bare-domain recipient is fine for toBytes().
    await make(pg.recipient.emailDomain('example.com')).toBytes();
    expect(storageCalls(calls)).toEqual([]);
  });
});

it('a chunk PUT on the wire: Content-Length and the exact bytes, not chunked; a retry sends them again', async () => {
  const seen: { length: string | undefined; encoding: string | undefined; body: Buffer }[] = [];
  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (d: Buffer) => parts.push(d));
    req.on('end', () => {
      seen.push({
        length: req.headers['content-length'],
        encoding: req.headers['transfer-encoding'],
        body: Buffer.concat(parts),
      });
      // The first attempt fails as a transient error would; the second is stored.
      res.writeHead(seen.length === 1 ? 503 : 200, { cryptifytoken: 'next-token' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const { port } = server.address() as AddressInfo;
    const storageClient = new StorageClient(
      resolveConfig({
        pkgUrl: pkg.url,
        storageUrl: `http://127.0.0.1:${port}`,
        allowInsecureUrls: true,
        retry: { initialDelayMs: 1, maxDelayMs: 1 },
      }),
    );
    const chunk = new Uint8Array(300_001).map((_, i) => (i * 7) & 0xff);
    const session = { uuid: '00000000-0000-4000-8000-000000000000', token: 'first-token' };
    expect(await storageClient.putChunk(session, 0, chunk, undefined)).toBe('next-token');
    expect(seen).toHaveLength(2);
    for (const request of seen) {
      expect(request.length).toBe('300001');
      expect(request.encoding).toBeUndefined();
      // Buffer#equals: toEqual walks 300 kB element by element (seconds).
      expect(request.body.equals(chunk)).toBe(true);
    }
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
});

describe('toBytes()', () => {
  it('only seals: PKG calls, no storage calls; the MPK is revalidated by ETag, the signing key fetched once per message', async () => {
    const { pg, calls } = client();
    const before = { ...pkg.counts };
    const sealed = pg.encrypt({
      files: files().slice(0, 2),
      recipients: [pg.recipient.email('bob@example.com')],
      sign: pg.sign.apiKey(pkg.apiKey),
    });
    const first = await sealed.toBytes();
    const second = await sealed.toBytes();
    expect(storageCalls(calls)).toEqual([]);
    expect(await readdir(storage.dataDir)).not.toContain('x');
    expect(pkg.counts.parameters200 - before.parameters200).toBe(1);
    expect(pkg.counts.parameters304 - before.parameters304).toBe(1);
    expect(pkg.counts.signKey - before.signKey).toBe(1);
    expect(calls.filter((c) => c.url.endsWith('/v2/parameters')).map((c) => c.headers['if-none-match'])).toEqual([
      undefined,
      pkg.etag,
    ]);
    // Fresh randomness each time; both decrypt to the same files.
    expect(first).not.toEqual(second);
    for (const ciphertext of [first, second]) {
      const { plaintext } = await openWithPgWasm(ciphertext, 'bob@example.com', [{ t: EMAIL, v: 'bob@example.com' }]);
      expect(readZip(plaintext)).toEqual(new Map([...EXPECTED].slice(0, 2)));
    }
  });

  it('reads stream inputs once: a second run is INVALID_STATE, found before anything is sent', async () => {
    const { pg, calls } = client();
    const sealed = pg.encrypt({
      files: [{ name: 's', content: chunkedSource(TEXT) }],
      recipients: [pg.recipient.email('bob@example.com')],
      sign: pg.sign.apiKey(pkg.apiKey),
    });
    await sealed.toBytes();
    const sent = calls.length;
    expect((await rejection(sealed.toBytes())).code).toBe(ClientErrorCode.INVALID_STATE);
    expect((await rejection(sealed.upload())).code).toBe(ClientErrorCode.INVALID_STATE);
    expect(calls.length).toBe(sent);
    // Byte inputs can be sealed again.
    const again = pg.encrypt({
      files: [{ name: 'b', content: TEXT }],
      recipients: [pg.recipient.email('bob@example.com')],
      sign: pg.sign.apiKey(pkg.apiKey),
    });
    await again.toBytes();
    await again.upload();
  });
});

describe('PKG failures', () => {
  it('a rejected API key is API_KEY_REJECTED, and no upload begins at the storage service', async () => {
    const { pg, calls } = client();
    const sealed = pg.encrypt({
      files: files(),
      recipients: [pg.recipient.email('bob@example.com')],
      sign: pg.sign.apiKey('PG-not-this-one'),
    });
    for (const run of [() => sealed.upload(), () => sealed.toBytes()]) {
      const e = await rejection(run());
      expect(e.code).toBe(ClientErrorCode.API_KEY_REJECTED);
      expect(e.status).toBe(401);
      expect(e.message).not.toContain('PG-not-this-one');
    }
    expect(uploadCalls(calls)).toEqual([]);
  });

  it('an unreachable, failing or silent PKG is PKG_UNAVAILABLE', async () => {
    const down = Fastify()
      .get('/*', async (_r, reply) => reply.code(503).send('down'))
      .post('/*', async (_r, reply) => reply.code(502).send());
    const slow = Fastify();
    slow.all('/*', () => new Promise(() => undefined));
    await down.listen({ port: 0, host: '127.0.0.1' });
    await slow.listen({ port: 0, host: '127.0.0.1' });
    const port = (app: typeof down) => (app.server.address() as { port: number }).port;
    try {
      for (const [pkgUrl, status] of [
        ['http://127.0.0.1:9', undefined],
        [`http://127.0.0.1:${port(down)}`, 503],
        [`http://127.0.0.1:${port(slow)}`, undefined],
      ] as const) {
        const { pg, calls } = client({ pkgUrl, timeouts: { pkgMs: 300 } });
        const e = await rejection(
          pg
            .encrypt({
              files: [{ name: 'a', content: TEXT }],
              recipients: [pg.recipient.email('bob@example.com')],
              sign: pg.sign.apiKey(pkg.apiKey),
            })
            .upload(),
        );
        expect(e.code, pkgUrl).toBe(ClientErrorCode.PKG_UNAVAILABLE);
        if (status !== undefined) expect([502, 503]).toContain(e.status);
        expect(uploadCalls(calls)).toEqual([]);
      }
    } finally {
      slow.server.closeAllConnections();
      await Promise.all([down.close(), slow.close()]);
    }
  });

  it('keys the PKG answers with that do not fit are PKG_BAD_RESPONSE', async () => {
    const { pg } = client({}, (url) => {
      if (url.endsWith('/v2/irma/sign/key')) {
        return Promise.resolve(
          Response.json({
            status: 'DONE',
            proofStatus: 'VALID',
            pubSignKey: { key: 'AAAA', policy: { ts: 1, con: [] } },
          }),
        );
      }
      if (url.endsWith('/v2/parameters')) return Promise.resolve(Response.json({ formatVersion: 0 }));
      return undefined;
    });
    const e = await rejection(
      pg
        .encrypt({
          files: [{ name: 'a', content: TEXT }],
          recipients: [pg.recipient.email('b@x.org')],
          sign: pg.sign.apiKey(pkg.apiKey),
        })
        .toBytes(),
    );
    expect(e.code).toBe(ClientErrorCode.PKG_BAD_RESPONSE);
  });
});

describe('storage failures', () => {
  it('an endless answer is read only up to its cap: STORAGE_BAD_RESPONSE, and the body is cancelled', async () => {
    let cancelled = false;
    let sent = 0;
    const endless = new ReadableStream<Uint8Array>({
      pull(controller) {
        sent += 65_536;
        controller.enqueue(new TextEncoder().encode(' '.repeat(65_536)));
      },
      cancel: () => void (cancelled = true),
    });
    const { pg } = client({}, (url) =>
      url.endsWith('/fileupload/init')
        ? Promise.resolve(new Response(endless, { headers: { cryptifytoken: 'a'.repeat(64) } }))
        : undefined,
    );
    const e = await rejection(
      pg
        .encrypt({
          files: [{ name: 'a', content: TEXT }],
          recipients: [pg.recipient.email('b@x.org')],
          sign: pg.sign.apiKey(pkg.apiKey),
        })
        .upload(),
    );
    expect(e.code).toBe(ClientErrorCode.STORAGE_BAD_RESPONSE);
    expect(cancelled).toBe(true);
    expect(sent).toBeLessThan(1024 * 1024);
  });

  const sealedFor = (pg: PostGuard) =>
    pg.encrypt({
      files: files(),
      recipients: [pg.recipient.email('bob@example.com')],
      sign: pg.sign.apiKey(pkg.apiKey),
    });

  async function expectIntact(uuid: string) {
    const ciphertext = await download(uuid);
    const { plaintext } = await openWithPostguardTs(ciphertext, 'bob@example.com', [
      { t: EMAIL, v: 'bob@example.com' },
    ]);
    expect(readZip(plaintext)).toEqual(EXPECTED);
    expect((await storage.upload(uuid))?.session).toMatchObject({ uploaded: ciphertext.length, finalized: 1 });
  }

  it('a chunk that fails once with 5xx is retried and the upload completes', async () => {
    const { pg } = client();
    await storage.failChunks({ times: 1, status: 500 });
    const { uuid } = await sealedFor(pg).upload();
    expect(await storage.faultsTriggered()).toBe(1);
    await expectIntact(uuid);
  });

  it('a chunk whose answer was lost (stored, connection dropped) is sent again and recognised, not stored twice', async () => {
    const { pg } = client();
    const before = await storage.faultsTriggered();
    await storage.failChunks({ times: 2, reset: true, afterCommit: true });
    const { uuid } = await sealedFor(pg).upload();
    expect((await storage.faultsTriggered()) - before).toBe(2);
    await expectIntact(uuid);
  });

  it('a chunk that keeps failing ends in STORAGE_UNAVAILABLE after the bounded retries; nothing is finalized', async () => {
    const { pg, calls } = client({ retry: { maxAttempts: 3, initialDelayMs: 1, maxDelayMs: 2 } });
    const before = await storage.faultsTriggered();
    await storage.failChunks({ always: true, status: 503 });
    const e = await rejection(sealedFor(pg).upload({ notify: { recipients: true } }));
    expect(e.code).toBe(ClientErrorCode.STORAGE_UNAVAILABLE);
    expect(e.status).toBe(503);
    expect(e.uploadedBytes).toBe(0);
    expect((await storage.faultsTriggered()) - before).toBe(3);
    expect(storageCalls(calls).some((c) => c.url.includes('/finalize/'))).toBe(false);
    expect(await storage.upload(e.uuid!)).toEqual({ session: { uploaded: 0, finalized: 0 }, fileBytes: 0 });
    expect(await storage.outbox()).toEqual([]);
  });

  it('fails mid-upload: the error says how far it got; the partial file stays, unfinalized', async () => {
    let puts = 0;
    const { pg } = client({ retry: { maxAttempts: 2, initialDelayMs: 1, maxDelayMs: 1 } }, (url, init) => {
      if (init.method === 'PUT' && ++puts === 3) void storage.failChunks({ always: true, reset: true });
      return undefined;
    });
    const e = await rejection(sealedFor(pg).upload());
    expect(e.code).toBe(ClientErrorCode.STORAGE_UNAVAILABLE);
    expect(e.uploadedBytes).toBeGreaterThanOrEqual(CHUNK);
    expect(await storage.upload(e.uuid!)).toMatchObject({
      session: { uploaded: e.uploadedBytes, finalized: 0 },
      fileBytes: e.uploadedBytes,
    });
  });

  it('a 4xx is not retried: STORAGE_REJECTED, UPLOAD_EXPIRED (404), UPLOAD_TOO_LARGE (413)', async () => {
    for (const [status, code] of [
      [400, ClientErrorCode.STORAGE_REJECTED],
      [404, ClientErrorCode.UPLOAD_EXPIRED],
      [413, ClientErrorCode.UPLOAD_TOO_LARGE],
    ] as const) {
      const { pg } = client();
      const before = await storage.faultsTriggered();
      await storage.failChunks({ times: 2, status });
      const e = await rejection(sealedFor(pg).upload());
      expect(e.code, String(status)).toBe(code);
      expect((await storage.faultsTriggered()) - before).toBe(1);
      expect((await storage.upload(e.uuid!))?.session?.finalized).toBe(0);
      await fetch(`${storage.url}/standin/faults`, { method: 'DELETE' });
    }
  });

  it('a real per-upload limit is UPLOAD_TOO_LARGE with the upload id; the API key sent at init selects the tier', async () => {
    const tiers = { chunkSize: CHUNK, perUploadLimit: 100_000, apiKeyPerUploadLimit: 200_000 };
    const small = await startStorage({ pkgUrl: pkg.url, ...tiers });
    // Its PKG is down: the key cannot be validated, and Cryptify answers 503 where the default cap bites.
    const degraded = await startStorage({ pkgUrl: 'http://127.0.0.1:9', verifyingKey: pkg.keys.vk, ...tiers });
    try {
      const e = await rejection(sealedFor(client({ storageUrl: small.url }).pg).upload());
      expect(e.code).toBe(ClientErrorCode.UPLOAD_TOO_LARGE);
      expect(e.status).toBe(413);
      expect((await small.upload(e.uuid!))?.session).toEqual({ uploaded: 3 * CHUNK, finalized: 0 });

      const d = await rejection(
        sealedFor(client({ storageUrl: degraded.url, retry: { maxAttempts: 2, initialDelayMs: 1 } }).pg).upload(),
      );
      expect(d.code).toBe(ClientErrorCode.STORAGE_UNAVAILABLE);
      expect(d.status).toBe(503);
      expect((await degraded.upload(d.uuid!))?.session).toEqual({ uploaded: CHUNK, finalized: 0 });
    } finally {
      await small.close();
      await degraded.close();
    }
  });

  it('an unanswered finalize is FINALIZE_UNCONFIRMED and is not repeated', async () => {
    const { pg, calls } = client({}, (url) =>
      url.includes('/finalize/') ? Promise.reject(new TypeError('fetch failed')) : undefined,
    );
    const e = await rejection(sealedFor(pg).upload());
    expect(e.code).toBe(ClientErrorCode.FINALIZE_UNCONFIRMED);
    expect(calls.filter((c) => c.url.includes('/finalize/'))).toHaveLength(1);
    expect((await storage.upload(e.uuid!))?.session?.finalized).toBe(0);
  });

  it('an unreachable storage service at init is STORAGE_UNAVAILABLE', async () => {
    const { pg } = client({ storageUrl: 'http://127.0.0.1:9' });
    expect((await rejection(sealedFor(pg).upload())).code).toBe(ClientErrorCode.STORAGE_UNAVAILABLE);
  });
});

describe('inputs and cancellation', () => {
  it('a file stream that errors is INPUT_FAILED; the upload is not finalized', async () => {
    const { pg } = client();
    const e = await rejection(
      pg
        .encrypt({
          files: [{ name: 'broken', content: failingSource(pattern(200_000, 3), new Error('disk on fire')) }],
          recipients: [pg.recipient.email('bob@example.com')],
          sign: pg.sign.apiKey(pkg.apiKey),
        })
        .upload(),
    );
    expect(e.code).toBe(ClientErrorCode.INPUT_FAILED);
    expect(e.message).toMatch(/disk on fire/);
    expect((await storage.upload(e.uuid!))?.session?.finalized).toBe(0);
  });

  it('an abort mid-upload is ABORTED; the upload is not finalized', async () => {
    const { pg } = client();
    const controller = new AbortController();
    const e = await rejection(
      pg
        .encrypt({
          files: files(),
          recipients: [pg.recipient.email('bob@example.com')],
          sign: pg.sign.apiKey(pkg.apiKey),
        })
        .upload({ signal: controller.signal, onProgress: () => controller.abort() }),
    );
    expect(e.code).toBe(ClientErrorCode.ABORTED);
    expect(e.uploadedBytes).toBe(CHUNK);
    expect((await storage.upload(e.uuid!))?.session).toEqual({ uploaded: CHUNK, finalized: 0 });
  });

  it('an already aborted signal stops toBytes before any request', async () => {
    const { pg, calls } = client();
    const e = await rejection(
      pg
        .encrypt({ files: files(), recipients: [pg.recipient.email('b@x.org')], sign: pg.sign.apiKey(pkg.apiKey) })
        .toBytes({ signal: AbortSignal.abort() }),
    );
    expect(e.code).toBe(ClientErrorCode.ABORTED);
    expect(calls).toEqual([]);
  });
});

it('hashes stay stable (guards the fixture itself)', () => {
  expect(createHash('sha256').update(STREAM_BYTES).digest('hex')).toHaveLength(64);
});
