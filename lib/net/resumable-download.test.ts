import fc from 'fast-check';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectSameBytes } from '../../test/bytes.js';
import { resumableDownload, type ResumableDownloadOptions } from './resumable-download.js';

/**
 * resumableDownload against a real HTTP server on loopback that cuts, stalls and misanswers on
 * purpose. `crossOrigin` answers omit Content-Range (and ETag), as a cross-origin page sees
 * Cryptify's: only the status and Content-Length are readable.
 */

const SIZE = 1024 * 1024 + 333;
const HALF = Math.floor(SIZE / 2);
const file = Uint8Array.from({ length: SIZE }, (_, i) => (i * 131 + (i >> 9)) & 255);

/** How the server answers one request (the n-th to its path, from 0). */
interface Answer {
  /** Cut the connection after this many body bytes of this answer. */
  cut?: number;
  /** Send this many body bytes, then nothing more, ever. */
  stall?: number;
  /** Never send the headers at all. */
  silent?: boolean;
  /** Send one body byte every this many ms (a server that drips). */
  drip?: number;
  /** Answer the whole file with a 200, whatever Range asked. */
  ignoreRange?: boolean;
  /** Leave Content-Range out of a 206 (what a cross-origin reader sees). */
  crossOrigin?: boolean;
  /** Serve these bytes instead of the file (a file that changed). */
  bytes?: Uint8Array;
  /** Answer this status, with no body. */
  status?: number;
  /** Chunked, without Content-Length. */
  noLength?: boolean;
  /** A Content-Range other than the true one. */
  contentRange?: string;
  etag?: string;
}

type Script = (n: number, req: IncomingMessage) => Answer;

const scripts = new Map<string, { script: Script; ranges: string[]; closed: number }>();
let server: Server;
let base = '';
let pathCount = 0;

function serve(script: Script) {
  const entry = { script, ranges: [] as string[], closed: 0 };
  const name = `f${pathCount++}`;
  scripts.set(name, entry);
  return { url: `${base}/${name}`, entry };
}

function handle(req: IncomingMessage, res: ServerResponse) {
  const entry = scripts.get((req.url ?? '').slice(1));
  if (entry === undefined) return void res.writeHead(404).end();
  const n = entry.ranges.length;
  entry.ranges.push(req.headers.range ?? '');
  req.on('close', () => entry.closed++);
  const a = entry.script(n, req);
  if (a.silent) return;
  if (a.status !== undefined) return void res.writeHead(a.status, { 'content-length': 0 }).end();
  const bytes = a.bytes ?? file;
  const match = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
  const ranged = match !== null && a.ignoreRange !== true;
  const start = ranged ? Number(match[1]) : 0;
  if (start >= bytes.length)
    return void res.writeHead(416, { 'content-range': `bytes */${bytes.length}`, 'content-length': 0 }).end();
  const body = bytes.subarray(start);
  const headers: Record<string, string | number> = {};
  if (a.noLength !== true) headers['content-length'] = body.length;
  if (a.etag !== undefined) headers.etag = a.etag;
  if (ranged && a.crossOrigin !== true)
    headers['content-range'] = a.contentRange ?? `bytes ${start}-${bytes.length - 1}/${bytes.length}`;
  res.writeHead(ranged ? 206 : 200, headers);
  if (a.cut !== undefined) res.write(body.subarray(0, a.cut), () => res.destroy());
  else if (a.stall !== undefined) res.write(body.subarray(0, a.stall));
  else if (a.drip !== undefined) {
    let at = 0;
    const timer = setInterval(() => {
      if (res.destroyed || at >= body.length) return void clearInterval(timer);
      res.write(body.subarray(at, ++at));
    }, a.drip);
    res.on('close', () => clearInterval(timer));
  } else res.end(body);
}

beforeAll(async () => {
  server = createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

/** Short waits between attempts: the tests are about what is resumed, not how patiently. */
const quick: ResumableDownloadOptions = { backoff: { initialMs: 5, maxMs: 20 }, stallMs: 5_000 };

async function drain(readable: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  const reader = readable.getReader();
  for (let next = await reader.read(); !next.done; next = await reader.read()) parts.push(next.value);
  return new Uint8Array(Buffer.concat(parts));
}

/** The file through resumableDownload, with the offsets it resumed from. */
async function download(url: string, options: ResumableDownloadOptions = {}) {
  const resumes: [number, number][] = [];
  const d = await resumableDownload(url, { ...quick, onResume: (o, a) => resumes.push([o, a]), ...options });
  return { ...d, bytes: drain(d.readable), resumes };
}

describe('resumableDownload', () => {
  it.each([false, true])(
    'a connection cut after 1 byte, mid-chunk, at 50 % and again is resumed at the delivered byte, the bytes exact (crossOrigin %s)',
    async (crossOrigin) => {
      const cuts = [1, 70_001, HALF - 70_002, 12_345];
      const { url, entry } = serve((n) => ({ cut: cuts[n], crossOrigin }));
      const d = await download(url);
      expect(d.size).toBe(SIZE);
      expectSameBytes(await d.bytes, file);
      const offsets = cuts.map((_, i) => cuts.slice(0, i + 1).reduce((a, b) => a + b, 0));
      expect(d.resumes).toEqual(offsets.map((o) => [o, 1]));
      expect(entry.ranges).toEqual(['', ...offsets.map((o) => `bytes=${o}-`)]);
    },
  );

  it('a 200 to a Range request: its first N bytes are skipped', async () => {
    const { url, entry } = serve((n) => ({
      cut: n === 0 ? HALF : n === 1 ? HALF + 1000 : undefined,
      ignoreRange: true,
    }));
    const d = await download(url);
    expectSameBytes(await d.bytes, file);
    expect(d.resumes).toEqual([
      [HALF, 1],
      [HALF + 1000, 1],
    ]);
    expect(entry.ranges.length).toBe(3);
  });

  it('a server that drips a byte at a time, on every resume too, ends at the idle timeout: SOURCE_FAILED, not for ever', async () => {
    // One byte every 60 ms keeps any per-read timer of 200 ms happy; 16 KiB per 200 ms it never meets.
    const dripping = serve(() => ({ drip: 60 }));
    const started = Date.now();
    const d = await download(dripping.url, { stallMs: 200, maxResumes: 2 });
    await expect(d.bytes).rejects.toMatchObject({ code: 'SOURCE_FAILED', message: /less than 16384 bytes/ });
    // Three legs of about 200 ms each (and short backoffs), not the 17 hours the file would take.
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(dripping.entry.ranges.length).toBe(3);
  });

  it('a body that stalls is resumed after stallMs; a resume that stalls too does not hang', async () => {
    const stalled = serve((n) => (n === 0 ? { stall: 100_000 } : {}));
    const d = await download(stalled.url, { stallMs: 300 });
    expectSameBytes(await d.bytes, file);
    expect(d.resumes).toEqual([[100_000, 1]]);

    const started = Date.now();
    const hanging = serve((n) => (n === 0 ? { stall: 100_000 } : n % 2 === 1 ? { silent: true } : { stall: 0 }));
    const h = await download(hanging.url, { stallMs: 200, maxResumes: 3 });
    await expect(h.bytes).rejects.toMatchObject({ code: 'SOURCE_FAILED' });
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(hanging.entry.ranges).toEqual(['', 'bytes=100000-', 'bytes=100000-', 'bytes=100000-']);
  });

  it('progress starts the count of attempts afresh; attempts in a row that bring nothing fail with TRUNCATED', async () => {
    // Ten drops, each after some progress: more than maxResumes, and fine.
    const many = serve((n) => ({ cut: n < 10 ? 50_000 : undefined, crossOrigin: true }));
    const d = await download(many.url, { maxResumes: 2 });
    expectSameBytes(await d.bytes, file);
    expect(d.resumes.length).toBe(10);

    // Every resume is cut before its first byte.
    const dead = serve((n) => ({ cut: n === 0 ? 1000 : 0 }));
    const x = await download(dead.url, { maxResumes: 3 });
    const error = await x.bytes.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toMatchObject({ code: 'TRUNCATED' });
    expect((error as Error).message).toContain(`after 1000 of its ${SIZE} bytes`);
    expect(x.resumes).toEqual([
      [1000, 1],
      [1000, 2],
      [1000, 3],
    ]);
    expect(dead.entry.ranges.length).toBe(4);
  });

  it('a resume answer that does not continue the same bytes fails with SOURCE_FAILED', async () => {
    const grown = new Uint8Array(SIZE + 1);
    grown.set(file);
    const cases: [string, (n: number) => Answer][] = [
      ['a 206 of another size', (n) => (n === 0 ? { cut: 5000 } : { bytes: grown, crossOrigin: true })],
      ['a 200 of another size', (n) => (n === 0 ? { cut: 5000 } : { bytes: grown, ignoreRange: true })],
      [
        'a readable Content-Range that starts elsewhere',
        (n) => (n === 0 ? { cut: 5000 } : { contentRange: `bytes 4999-${SIZE - 2}/${SIZE}` }),
      ],
      [
        'a readable Content-Range of another total',
        (n) => (n === 0 ? { cut: 5000 } : { contentRange: `bytes 5000-${SIZE - 1}/${SIZE + 7}` }),
      ],
      ['a 416', (n) => (n === 0 ? { cut: 5000 } : { bytes: file.subarray(0, 4000) })],
      ['a 404', (n) => (n === 0 ? { cut: 5000 } : { status: 404 })],
      ['a 403', (n) => (n === 0 ? { cut: 5000 } : { status: 403 })],
      ['another ETag', (n) => ({ cut: n === 0 ? 5000 : undefined, etag: `"v${n}"` })],
    ];
    for (const [what, script] of cases) {
      const { url, entry } = serve(script);
      const d = await download(url);
      await expect(d.bytes, what).rejects.toMatchObject({ code: 'SOURCE_FAILED' });
      expect(entry.ranges, what).toEqual(['', 'bytes=5000-']);
    }
  });

  it('a busy server (503) on a resume is asked again', async () => {
    const { url, entry } = serve((n) => (n === 0 ? { cut: 9000 } : n === 1 ? { status: 503 } : {}));
    const d = await download(url);
    expectSameBytes(await d.bytes, file);
    expect(d.resumes).toEqual([
      [9000, 1],
      [9000, 2],
    ]);
    expect(entry.ranges.length).toBe(3);
  });

  it('the first answer decides: a 404 or a 500 rejects with SOURCE_FAILED, a 404 saying the file is not there', async () => {
    await expect(resumableDownload(`${base}/nothing-here`)).rejects.toMatchObject({
      code: 'SOURCE_FAILED',
      message: expect.stringContaining('not there (HTTP 404)'),
    });
    const { url } = serve(() => ({ status: 500 }));
    await expect(resumableDownload(url)).rejects.toMatchObject({
      code: 'SOURCE_FAILED',
      message: expect.stringContaining('500'),
    });
    const silent = serve(() => ({ silent: true }));
    await expect(resumableDownload(silent.url, { stallMs: 200 })).rejects.toMatchObject({ code: 'SOURCE_FAILED' });
  });

  it('without Content-Length nothing says where to resume: a drop is SOURCE_FAILED, no second request', async () => {
    const { url, entry } = serve((n) => ({ noLength: true, cut: n === 0 ? 70_000 : undefined }));
    const d = await download(url);
    expect(d.size).toBeUndefined();
    await expect(d.bytes).rejects.toMatchObject({ code: 'SOURCE_FAILED' });
    expect(entry.ranges).toEqual(['']);
    const whole = serve(() => ({ noLength: true }));
    expectSameBytes(await (await download(whole.url)).bytes, file);
  });

  it('cancel aborts the request; the signal ends a download waiting to resume with CANCELLED', async () => {
    const { url, entry } = serve(() => ({ stall: 1000 }));
    const d = await resumableDownload(url, quick);
    const reader = d.readable.getReader();
    expect((await reader.read()).value?.length).toBe(1000);
    await reader.cancel();
    await expect.poll(() => entry.closed).toBe(1);

    const abort = new AbortController();
    const slow = serve(() => ({ cut: 10 }));
    const w = await resumableDownload(slow.url, {
      backoff: { initialMs: 60_000, maxMs: 60_000 },
      signal: abort.signal,
      onResume: () => undefined,
    });
    const pending = drain(w.readable);
    setTimeout(() => abort.abort(new Error('the user closed the tab')), 100);
    const started = Date.now();
    await expect(pending).rejects.toMatchObject({ code: 'CANCELLED' });
    expect(Date.now() - started).toBeLessThan(2_000);
    await expect(resumableDownload(url, { signal: abort.signal })).rejects.toMatchObject({ code: 'CANCELLED' });
  });

  it('bad options are INVALID_INPUT', async () => {
    const url = `${base}/whatever`;
    for (const bad of [
      { stallMs: 0 },
      { stallMs: Number.NaN },
      { maxResumes: -1 },
      { maxResumes: 1.5 },
      { backoff: { initialMs: -1 } },
      { headers: { range: 'bytes=0-' } },
      { onResume: 3 },
    ])
      await expect(resumableDownload(url, bad as never)).rejects.toMatchObject({ code: 'INVALID_INPUT' });
  });

  it('property: wherever the connection is cut, and however often, the bytes equal the file', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 0, max: SIZE - 1 }), { minLength: 1, maxLength: 4 }),
        fc.boolean(),
        fc.boolean(),
        async (cuts, crossOrigin, ignoreRange) => {
          const { url } = serve((n) => ({ cut: cuts[n], crossOrigin, ignoreRange }));
          const d = await download(url, { backoff: { initialMs: 0 }, maxResumes: cuts.length + 1 });
          expectSameBytes(await d.bytes, file);
        },
      ),
      { numRuns: 25 },
    );
  });
});
