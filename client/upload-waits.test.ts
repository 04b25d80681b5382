import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CUT_HEADER, startHostileServers, type HostileServers } from '../test/hostile-servers.js';
import { abortLater, settled } from '../test/settled.js';
import { fileKeeper } from '../sdk/file-keeper.js';
import { PostGuard, type UploadKeeper } from './index.js';
import { startFakePkg, type FakePkg } from './testing.js';

/**
 * Every wait of the sending side has a way out, against a storage service on loopback that
 * misbehaves on purpose: at the upload's first request (init), or only from its chunk PUTs on (init
 * answered as Cryptify does). Each misbehaviour is a silence, an HTTP header cut in the middle, or
 * an answer whose body drips a byte every N ms (a PUT's answer body is not read: its drip does not
 * stall an upload). resume() of a kept upload meets the same service at its first request (the
 * upload's status). An abort settles within a second with ABORTED;
 * with no signal, the per-request timeout (`timeouts.storageMs`) ends it with STORAGE_UNAVAILABLE.
 */

const UUID = '00000000-0000-4000-8000-000000000000';
/** Milliseconds between two dripped bytes. */
const DRIP_MS = 20;
const STORAGE_MS = 300;

let pkg: FakePkg;
let servers: HostileServers;
/** Told of each chunk PUT that reaches the server. */
let onPut = () => {};
/** Folders of the kept uploads, removed at the end. */
const dirs: string[] = [];

type Mode = 'silent' | 'drip';

/** /{when}/{mode}/fileupload/…: `when` is 'init' (misbehave at once) or 'put' (init answers). */
function answer(req: IncomingMessage, res: ServerResponse): void {
  const [, when, mode] = (req.url ?? '').split('/') as [string, string, Mode];
  req.resume();
  if (req.method === 'PUT') onPut();
  if (when === 'put' && (req.url ?? '').endsWith('/fileupload/init')) {
    return void res
      .writeHead(200, { 'content-type': 'application/json', cryptifytoken: 'a'.repeat(64) })
      .end(JSON.stringify({ uuid: UUID, recovery_token: 'c'.repeat(64) }));
  }
  if (mode === 'silent') return;
  res.writeHead(200, { 'content-type': 'application/json', cryptifytoken: 'b'.repeat(64) });
  const body = Buffer.from(JSON.stringify({ uuid: UUID, padding: 'x'.repeat(4096) }));
  let at = 0;
  const timer = setInterval(() => (at < body.length ? res.write(body.subarray(at, ++at)) : res.end()), DRIP_MS);
  res.on('close', () => clearInterval(timer));
}

/** Init answered whole (from /put/ on), so the cut comes at the chunk PUTs; else the header is cut. */
function cutAnswer({ path }: { path: string }): string {
  if (!path.startsWith('/put/') || !path.endsWith('/fileupload/init')) return CUT_HEADER;
  const body = JSON.stringify({ uuid: UUID, recovery_token: 'c'.repeat(64) });
  const token = 'a'.repeat(64);
  return `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncryptifytoken: ${token}\r\ncontent-length: ${body.length}\r\n\r\n${body}`;
}

beforeAll(async () => {
  pkg = await startFakePkg();
  servers = await startHostileServers(answer, cutAnswer);
});

afterAll(async () => {
  await servers.close();
  await pkg.close();
  await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
});

const CASES = [
  ['init', 'silent'],
  ['init', 'mid-http-header'],
  ['init', 'drip'],
  ['put', 'silent'],
  ['put', 'mid-http-header'],
] as const;

function client(when: string, mode: string, signal?: AbortSignal, keeper?: UploadKeeper, uploadMs?: number) {
  return new PostGuard({
    pkgUrl: pkg.url,
    cryptifyUrl: `${mode === 'mid-http-header' ? servers.cutBase : servers.httpBase}/${when}/${mode}`,
    allowInsecureUrls: true,
    timeouts: {
      storageMs: signal === undefined && uploadMs === undefined ? STORAGE_MS : 60_000,
      ...(uploadMs === undefined ? {} : { uploadMs }),
    },
    retry: { maxAttempts: 2, initialDelayMs: 1, maxDelayMs: 5 },
    ...(keeper === undefined ? {} : { keeper }),
  });
}

function upload(when: string, mode: string, signal?: AbortSignal, keeper?: UploadKeeper, uploadMs?: number) {
  const pg = client(when, mode, signal, keeper, uploadMs);
  return pg
    .encrypt({
      files: [{ name: 'a.bin', content: new Uint8Array(100_000).fill(7) }],
      recipients: [pg.recipient.email('bob@example.com')],
      sign: pg.sign.apiKey(pkg.apiKey),
    })
    .upload(signal === undefined ? {} : { signal });
}

describe.each(CASES)('upload() against a storage service that misbehaves at %s (%s)', (when, mode) => {
  it('an abort settles within a second: ABORTED', async () => {
    const { signal, abortedAt } = abortLater(300);
    const { error, ms } = await settled(upload(when, mode, signal), abortedAt);
    expect(error).toMatchObject({ name: 'ClientError', code: 'ABORTED' });
    expect(ms).toBeLessThan(1000);
  });

  it('with no signal, the per-request timeout ends it: STORAGE_UNAVAILABLE', async () => {
    const started = Date.now();
    const { error, ms } = await settled(upload(when, mode), () => started);
    expect(error).toMatchObject({ name: 'ClientError', code: 'STORAGE_UNAVAILABLE' });
    // Two attempts of a chunk at most (retry.maxAttempts), each its own timeout.
    expect(ms).toBeLessThan(2 * STORAGE_MS + 2000);
  });
});

describe('the overall deadline (timeouts.uploadMs)', () => {
  const UPLOAD_MS = 400;

  it('ends an upload whose requests each still have time: TIMED_OUT, with the upload it belongs to', async () => {
    const started = Date.now();
    const { error, ms } = await settled(upload('put', 'silent', undefined, undefined, UPLOAD_MS), () => started);
    expect(error).toMatchObject({ name: 'ClientError', code: 'TIMED_OUT', uuid: UUID });
    expect(ms).toBeLessThan(UPLOAD_MS + 1000);
  });

  it('ends a resume the same way, and the upload stays resumable', async () => {
    const keeper = await stoppedUpload();
    const [pending] = await client('put', 'silent', undefined, keeper, UPLOAD_MS).resumeUploads();
    const started = Date.now();
    const { error, ms } = await settled(pending!.resume(), () => started);
    expect(error).toMatchObject({ name: 'ClientError', code: 'TIMED_OUT' });
    expect(ms).toBeLessThan(UPLOAD_MS + 1000);
    expect(await keeper.list()).toHaveLength(1);
  });
});

/** A kept upload that stopped after init (its chunk PUTs never answered), in a keeper of its own. */
async function stoppedUpload(): Promise<UploadKeeper> {
  const dir = await mkdtemp(join(tmpdir(), 'pg-keeper-'));
  dirs.push(dir);
  const keeper = fileKeeper(dir);
  const stop = new AbortController();
  onPut = () => stop.abort(); // the bytes are kept once a chunk is being sent
  await expect(upload('put', 'silent', stop.signal, keeper)).rejects.toMatchObject({ code: 'ABORTED' });
  return keeper;
}

describe.each(['silent', 'mid-http-header', 'drip'] as const)(
  'resume() against a storage service that misbehaves (%s)',
  (mode) => {
    it('an abort settles within a second: ABORTED; with no signal, the timeout ends it: STORAGE_UNAVAILABLE', async () => {
      const keeper = await stoppedUpload();
      const [pending] = await client('init', mode, undefined, keeper).resumeUploads();
      expect(pending).toBeDefined();
      const { signal, abortedAt } = abortLater(300);
      const aborted = await settled(pending!.resume({ signal }), abortedAt);
      expect(aborted.error).toMatchObject({ name: 'ClientError', code: 'ABORTED' });
      expect(aborted.ms).toBeLessThan(1000);

      const started = Date.now();
      const [again] = await client('init', mode, undefined, keeper).resumeUploads();
      const timedOut = await settled(again!.resume(), () => started);
      expect(timedOut.error).toMatchObject({ name: 'ClientError', code: 'STORAGE_UNAVAILABLE' });
      expect(timedOut.ms).toBeLessThan(2 * STORAGE_MS + 2000);
    });
  },
);
