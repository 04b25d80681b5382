import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStorage, type RunningStorage } from '../devtools/storage/testing.js';
import { startFakePkg, type FakePkg } from '../client/testing.js';
import { PostGuard, fileKeeper, type FetchLike } from './index.js';

/**
 * A batch keyed by the caller (`upload({ key })`) is sent once, however often its script runs
 * after a crash. A crash is played by a fetch that stops answering at one request for good: the
 * process is frozen there, nothing of it runs again (no catch, no cleanup), and what it left in
 * its folder is what a kill -9 leaves. Then the script runs again, as the SDK README's resume
 * example does (resume what is pending, then upload), over the same folder, and the storage
 * stand-in's outbox counts the mails.
 */

const CHUNK = 64 * 1024;
let pkg: FakePkg;
let storage: RunningStorage;

beforeAll(async () => {
  pkg = await startFakePkg();
  storage = await startStorage({ verifyingKey: pkg.keys.vk, chunkSize: CHUNK, strict: true });
});
afterAll(async () => {
  await storage.close();
  await pkg.close();
});

const bytes = (n: number, seed: number) => new Uint8Array(n).map((_, i) => (i * 31 + seed) & 255);
const FILES = [
  { name: 'statement.pdf', content: bytes(300_000, 1) },
  { name: 'letter.txt', content: bytes(2_000, 2) },
];

/** Where the process dies: the request that never answers, and whether it reached the service first. */
interface Crash {
  at: (method: string, path: string) => boolean;
  /** The request is sent and answered; the process dies before it hears the answer. */
  afterSending?: boolean;
}

const never = new Promise<never>(() => undefined);

/** A fetch whose process dies at `crash`: resolves `died` when it does. */
function dyingFetch(crash: Crash | undefined): { fetch: FetchLike; died: Promise<void> } {
  let die!: () => void;
  const died = new Promise<void>((resolve) => (die = resolve));
  let dead = false;
  return {
    died,
    fetch: async (url, init) => {
      if (dead) return never;
      const path = new URL(url).pathname;
      if (crash === undefined || !crash.at(init.method ?? 'GET', path)) return fetch(url, init);
      dead = true;
      if (crash.afterSending === true) {
        const answer = await fetch(url, init);
        await answer.arrayBuffer();
      }
      die();
      return never;
    },
  };
}

/** One run of the batch script: resume what is pending, then send the batch under its key. */
function runScript(dir: string, recipient: string, crash?: Crash): { done: Promise<string>; died: Promise<void> } {
  const { fetch, died } = dyingFetch(crash);
  const pg = new PostGuard({
    pkgUrl: pkg.url,
    cryptifyUrl: storage.url,
    allowInsecureUrls: true,
    uploadChunkSize: CHUNK,
    retry: { maxAttempts: 2, initialDelayMs: 1, maxDelayMs: 5 },
    keeper: fileKeeper(dir),
    fetch,
  });
  const done = (async () => {
    for (const pending of await pg.resumeUploads()) await pending.resume();
    const { uuid } = await pg
      .encrypt({ files: FILES, recipients: [pg.recipient.email(recipient)], sign: pg.sign.apiKey(pkg.apiKey) })
      .upload({ key: `statements-2026-11/${recipient}`, notify: { recipients: true, message: 'Your statement' } });
    return uuid;
  })();
  return { done, died };
}

const mailsTo = async (recipient: string) => (await storage.outbox()).filter((m) => m.to === recipient);

/** Resolves once the folder holds a resumable upload (its committed bytes, its record no longer marked sealing). */
async function kept(dir: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const names = await readdir(dir).catch(() => [] as string[]);
    const record = names.find((n) => n.endsWith('.json'));
    const sealing =
      record === undefined || (await readFile(join(dir, record), 'utf8').catch(() => '')).includes('"sealing"');
    if (names.some((n) => n.endsWith('.pgenc')) && !sealing) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`nothing resumable was kept in ${dir}`);
}

const isChunk = (method: string, path: string) => method === 'PUT' && path.startsWith('/fileupload/');
const crashes: Array<[string, () => Crash, boolean]> = [
  ['before the upload started (at init)', () => ({ at: (m, p) => m === 'POST' && p === '/fileupload/init' }), false],
  [
    'mid-upload (at the third chunk)',
    () => {
      let chunks = 0;
      return { at: (m, p) => isChunk(m, p) && ++chunks === 3 };
    },
    true,
  ],
  [
    'after finalize, before the record was cleared',
    () => ({ at: (m, p) => m === 'POST' && p.startsWith('/fileupload/finalize/'), afterSending: true }),
    true,
  ],
];

describe('a keyed batch run again after a crash sends each mail once', () => {
  it.each(crashes)('crash %s, then two reruns: one mail', async (point, crash, leavesUpload) => {
    const dir = await mkdtemp(join(tmpdir(), 'pg-rerun-'));
    const recipient = `citizen-${point.split(' ')[0]}-${Date.now()}@example.com`;
    try {
      const crashed = runScript(dir, recipient, crash());
      void crashed.done.catch(() => undefined);
      await crashed.died;
      // What the crash left: a resumable upload (mid-upload, after finalize) or nothing to resume.
      if (leavesUpload) await kept(dir);
      const mailsAtCrash = (await mailsTo(recipient)).length;
      expect(mailsAtCrash).toBe(point.startsWith('after finalize') ? 1 : 0);

      const first = await runScript(dir, recipient).done;
      const again = await runScript(dir, recipient).done;
      expect(again).toBe(first);
      const mails = await mailsTo(recipient);
      expect(mails.map((m) => m.uuid)).toEqual([first]);
      // Nothing left to resume; the sent mark stays.
      expect((await readdir(dir)).filter((n) => !n.endsWith('.sent'))).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('without a key, the same rerun sends the batch again (the control)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pg-rerun-'));
    const recipient = `control-${Date.now()}@example.com`;
    try {
      const pg = new PostGuard({
        pkgUrl: pkg.url,
        cryptifyUrl: storage.url,
        allowInsecureUrls: true,
        uploadChunkSize: CHUNK,
        keeper: fileKeeper(dir),
      });
      const send = () =>
        pg
          .encrypt({ files: FILES, recipients: [pg.recipient.email(recipient)], sign: pg.sign.apiKey(pkg.apiKey) })
          .upload({ notify: { recipients: true } });
      await send();
      await send();
      expect(await mailsTo(recipient)).toHaveLength(2);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a key needs a keeper that remembers sent uploads: INVALID_INPUT with the memory keeper, nothing sent', async () => {
    const pg = new PostGuard({ pkgUrl: pkg.url, cryptifyUrl: storage.url, allowInsecureUrls: true });
    const sealed = pg.encrypt({
      files: FILES,
      recipients: [pg.recipient.email('nobody@example.com')],
      sign: pg.sign.apiKey(pkg.apiKey),
    });
    await expect(sealed.upload({ key: 'batch-1' })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    await expect(sealed.upload({ key: '' })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    expect(await mailsTo('nobody@example.com')).toEqual([]);
  });
});
