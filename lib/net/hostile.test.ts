import type { IncomingMessage, ServerResponse } from 'node:http';
import { startHostileServers, type HostileServers } from '../../test/hostile-servers.js';
import { abortLater, settled } from '../../test/settled.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRandomAccess } from '../random-access.js';
import { rangedUrlSource } from './ranged-url.js';
import { resumableDownload } from './resumable-download.js';

/**
 * Every library entry that reads from elsewhere, against real loopback servers that misbehave on
 * purpose: one that never answers, one that stops in the middle of its HTTP header, one that stops
 * in the middle of the ciphertext's header, and one that drips a byte every N ms (N in the URL, so
 * the tests keep their idle timeouts short). Each entry ends when its signal aborts (CANCELLED,
 * within a second) and, with no signal, at its idle timeout (SOURCE_FAILED).
 */

const SIZE = 200 * 1024;
const file = Uint8Array.from({ length: SIZE }, (_, i) => (i * 31) & 255);
/** Milliseconds between two dripped bytes. */
const DRIP_MS = 20;
/** The idle timeout of the tests that wait for it. */
const IDLE_MS = 300;

let servers: HostileServers;

function answer(req: IncomingMessage, res: ServerResponse): void {
  const [, mode, drip] = (req.url ?? '').split('/');
  if (mode === 'silent') return; // headers never come
  const match = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
  const start = match === null ? 0 : Number(match[1]);
  const end = match === null || match[2] === '' ? SIZE : Math.min(SIZE, Number(match[2]) + 1);
  const body = file.subarray(start, end);
  res.writeHead(match === null ? 200 : 206, {
    'content-length': body.length,
    ...(match === null ? {} : { 'content-range': `bytes ${start}-${end - 1}/${SIZE}` }),
  });
  if (req.method === 'HEAD') return void res.end();
  if (mode === 'midheader') return void res.write(body.subarray(0, 40)); // then nothing, ever
  let at = 0;
  const timer = setInterval(() => {
    if (at >= body.length) return void res.end();
    res.write(body.subarray(at, ++at));
  }, Number(drip));
  res.on('close', () => clearInterval(timer));
}

// An HTTP header cut in the middle: the status line and half a header name, then silence.
beforeAll(async () => void (servers = await startHostileServers(answer)));
afterAll(() => servers.close());

const MODES = ['silent', 'mid-http-header', 'midheader', 'drip'] as const;
type Mode = (typeof MODES)[number];
const urlOf = (mode: Mode) =>
  mode === 'mid-http-header' ? `${servers.cutBase}/f` : `${servers.httpBase}/${mode}/${DRIP_MS}`;

/** Keys that are never reached: every mode fails before the header is whole. */
const keys = { vk: 'unused', recipientId: 'alice', usk: 'unused' };

/** Each entry as one call that reads until it has what it promises (a download: all its bytes). */
const ENTRIES: Record<string, (url: string, options: { signal?: AbortSignal; stallMs: number }) => Promise<unknown>> = {
  openRandomAccess: (url, options) => openRandomAccess(url, { ...keys, ...options }),
  rangedUrlSource: (url, options) => rangedUrlSource(url, options),
  resumableDownload: async (url, options) => {
    const download = await resumableDownload(url, { ...options, maxResumes: 1, backoff: { initialMs: 0 } });
    return new Response(download.readable).arrayBuffer();
  },
};

describe.each(Object.keys(ENTRIES))('%s against a server that misbehaves', (name) => {
  const entry = ENTRIES[name]!;

  it.each(MODES)('an abort during the header read (%s) settles within a second: CANCELLED', async (mode) => {
    const { signal, abortedAt } = abortLater(150);
    const { error, ms } = await settled(entry(urlOf(mode), { signal, stallMs: 60_000 }), abortedAt);
    expect(error).toMatchObject({ name: 'PostGuardError', code: 'CANCELLED' });
    expect(ms).toBeLessThan(1000);
  });

  it.each(MODES)('with no signal, the idle timeout ends it (%s): SOURCE_FAILED', async (mode) => {
    const started = Date.now();
    const { error, ms } = await settled(entry(urlOf(mode), { stallMs: IDLE_MS }), () => started);
    expect(error).toMatchObject({ name: 'PostGuardError', code: 'SOURCE_FAILED' });
    // A download resumes once (maxResumes 1): two idle windows, and the resume's answer.
    expect(ms).toBeLessThan(4 * IDLE_MS + 1000);
  });
});
