import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { abortLater, settled } from '../test/settled.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStorage, type RunningStorage } from '../devtools/storage/testing.js';
import { PostGuard, type PostGuardOptions } from './index.js';
import { FAKE_JWT_PREFIX, startFakePkg, type FakePkg } from './testing.js';

/**
 * Every wait of the receiving side has a way out, against a real loopback server that misbehaves
 * on purpose: one that never answers, one that stops in the middle of the header, one that drips a
 * byte at a time (after a fast start, so that the header gets through and the body does not).
 * Each is reached by URL (`open({url})`) and by upload id (`open({uuid})`, the storage URL pointing
 * at the same server under a prefix).
 */

const BOB = 'bob@example.com';
const CHUNK = 64 * 1024;

let pkg: FakePkg;
let storage: RunningStorage;
let hostile: Server;
let base = '';
let uuid = '';
let ciphertext: Uint8Array;

/** The first bytes a mode sends at once: past the header, well short of segment 0's end. */
const FAST = 32 * 1024;
/** How long a drip waits between its bytes: any per-read timer of the tests is longer. */
const DRIP_MS = 50;

type Mode = 'silent' | 'midheader' | 'drip' | 'dripafter' | 'whole';

/** Requests that reached the server, with the app's header if they carried it. */
const seen: string[] = [];

function answer(req: IncomingMessage, res: ServerResponse): void {
  seen.push(`${req.headers.host} ${req.url} ${req.headers['x-app-secret'] ?? ''}`);
  const [, first, ...rest] = (req.url ?? '').split('/');
  // /away/…: a redirect to the same server under another origin (localhost, not 127.0.0.1);
  // /near/…: a redirect within the origin.
  if (first === 'away' || first === 'near') {
    const host = first === 'away' ? base.replace('127.0.0.1', 'localhost') : base;
    return void res.writeHead(302, { location: `${host}/${rest.join('/')}` }).end();
  }
  const mode = first as Mode;
  if (mode === 'silent') return; // headers never come
  const match = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
  const start = match === null ? 0 : Number(match[1]);
  const end = match === null || match[2] === '' ? ciphertext.length : Number(match[2]) + 1;
  const body = ciphertext.subarray(start, end);
  res.writeHead(match === null ? 200 : 206, {
    'content-length': body.length,
    'accept-ranges': 'bytes',
    ...(match === null ? {} : { 'content-range': `bytes ${start}-${end - 1}/${ciphertext.length}` }),
  });
  if (req.method === 'HEAD') return void res.end();
  if (mode === 'midheader') return void res.write(body.subarray(0, 40)); // then nothing, ever
  if (mode === 'whole') return void res.end(body);
  const fast = mode === 'dripafter' ? Math.max(0, FAST - start) : 0;
  res.write(body.subarray(0, fast));
  let at = fast;
  const timer = setInterval(() => {
    if (at >= body.length) {
      clearInterval(timer);
      return void res.end();
    }
    res.write(body.subarray(at, ++at));
  }, DRIP_MS);
  res.on('close', () => clearInterval(timer));
}

beforeAll(async () => {
  pkg = await startFakePkg();
  storage = await startStorage({ verifyingKey: pkg.keys.vk, chunkSize: CHUNK, strict: true });
  const pg = client();
  const data = new Uint8Array(600_000).map((_, i) => (i * 7) & 255);
  ({ uuid } = await pg
    .encrypt({
      files: [{ name: 'a.bin', content: data }],
      recipients: [pg.recipient.email(BOB)],
      sign: pg.sign.apiKey(pkg.apiKey),
    })
    .upload());
  ciphertext = new Uint8Array(await (await fetch(`${storage.url}/filedownload/${uuid}`)).arrayBuffer());
  hostile = createServer(answer);
  await new Promise<void>((resolve) => hostile.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(hostile.address() as AddressInfo).port}`;
});

afterAll(async () => {
  hostile.closeAllConnections();
  await new Promise((resolve) => hostile.close(resolve));
  await storage.close();
  await pkg.close();
});

function client(options: Partial<PostGuardOptions> = {}, storageUrl?: string): PostGuard {
  return new PostGuard({
    pkgUrl: pkg.url,
    cryptifyUrl: storageUrl ?? storage.url,
    allowInsecureUrls: true,
    uploadChunkSize: CHUNK,
    retry: { initialDelayMs: 1, maxDelayMs: 5 },
    ...options,
  });
}

const session = async () => `${FAKE_JWT_PREFIX}${BOB}`;

/** The same misbehaving file by URL and by upload id. */
function opened(mode: Mode, by: 'url' | 'uuid', options: Partial<PostGuardOptions> = {}, signal?: AbortSignal) {
  if (by === 'url') return client(options).open({ url: `${base}/${mode}/file`, ...(signal ? { signal } : {}) });
  return client(options, `${base}/${mode}`).open({ uuid, ...(signal ? { signal } : {}) });
}

describe.each(['url', 'uuid'] as const)('open({%s}) against a server that misbehaves', (by) => {
  it.each(['silent', 'midheader', 'drip'] as const)(
    'decrypt({ signal }) aborted during the header read (%s) settles within a second with ABORTED',
    async (mode) => {
      const { signal, abortedAt } = abortLater(300);
      const { error, ms } = await settled(opened(mode, by).decrypt({ session, output: 'bytes', signal }), abortedAt);
      expect(error).toMatchObject({ name: 'ClientError', code: 'ABORTED' });
      expect(ms).toBeLessThan(1000);
    },
  );

  it("inspect({ signal }) and open()'s signal end the header read the same way", async () => {
    const stop = new AbortController();
    setTimeout(() => stop.abort(), 200);
    const started = Date.now();
    await expect(opened('midheader', by).inspect({ signal: stop.signal })).rejects.toMatchObject({ code: 'ABORTED' });
    const viaOpen = AbortSignal.timeout(200);
    await expect(opened('silent', by, {}, viaOpen).inspect()).rejects.toMatchObject({ code: 'ABORTED' });
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it.each(['silent', 'midheader', 'drip'] as const)(
    'with no signal, the idle timeout ends it (%s): DOWNLOAD_FAILED, in seconds',
    async (mode) => {
      const started = Date.now();
      const { error, ms } = await settled(
        opened(mode, by, { timeouts: { idleMs: 300 } }).decrypt({ session, output: 'bytes' }),
        () => started,
      );
      expect(error).toMatchObject({ name: 'ClientError', code: 'DOWNLOAD_FAILED' });
      expect(ms).toBeLessThan(5000);
    },
  );

  it("a body that drips after the header: the 'stream' output errors with a ClientError, 'entries' with one too", async () => {
    const result = await opened('dripafter', by, { timeouts: { idleMs: 300 } }).decrypt({ session, output: 'stream' });
    const reader = result.readable.getReader();
    const error = await (async () => {
      for (;;) if ((await reader.read()).done) return undefined;
    })().catch((e: unknown) => e);
    expect(error).toMatchObject({ name: 'ClientError', code: 'DOWNLOAD_FAILED' });
    await expect(result.sender).rejects.toMatchObject({ name: 'ClientError' });

    const started = Date.now();
    const entries = opened('dripafter', by, { timeouts: { idleMs: 300 } }).decrypt({ session, output: 'entries' });
    await expect(entries).rejects.toMatchObject({ name: 'ClientError', code: 'DOWNLOAD_FAILED' });
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('an overall deadline ends a download that keeps making progress too slowly: TIMED_OUT', async () => {
    const started = Date.now();
    // The idle timer is generous here: the drip after the fast start would satisfy a lax one.
    const { error, ms } = await settled(
      opened('dripafter', by, { timeouts: { idleMs: 60_000, transferMs: 700 } }).decrypt({ session, output: 'bytes' }),
      () => started,
    );
    expect(error).toMatchObject({ name: 'ClientError', code: 'TIMED_OUT' });
    expect(ms).toBeLessThan(2000);
  });
});

it('a well-behaved server still opens (the same file straight from the stand-in)', async () => {
  const result = await client().open({ uuid }).decrypt({ session, output: 'bytes' });
  expect(result.plaintext.length).toBeGreaterThan(600_000);
});

describe('redirects', () => {
  it("to another origin: REDIRECT_REFUSED, and the app's headers never reach it (by url and by uuid)", async () => {
    seen.length = 0;
    const headers = { 'x-app-secret': 's3cret' };
    const byUrl = client().open({ url: `${base}/away/whole/file`, headers });
    await expect(byUrl.inspect()).rejects.toMatchObject({ name: 'ClientError', code: 'REDIRECT_REFUSED' });
    const byUuid = client({ headers }, `${base}/away/whole`).open({ uuid });
    await expect(byUuid.decrypt({ session, output: 'bytes' })).rejects.toMatchObject({ code: 'REDIRECT_REFUSED' });
    expect(seen.filter((r) => r.startsWith('localhost'))).toEqual([]);
  });

  it('within the origin: followed', async () => {
    const result = await client()
      .open({ url: `${base}/near/whole/file` })
      .decrypt({ session, output: 'bytes' });
    expect(result.plaintext.length).toBeGreaterThan(600_000);
  });
});
