import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expose } from 'comlink';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seal, sealStream, type Policy, type SealOptions } from '../lib/index.js';
import { extractSigningKey, generatePkgKeys } from '../lib/keys.js';
import { PkgClient, memoryStore, type IdentitySession } from '../lib/pkg/index.js';
import { disclose } from '../devtools/standin/wallet.js';
import { startStandin, type RunningStandin } from '../devtools/standin/testing.js';
import { runCli } from '../server/cli.js';
import { writePkgKeys, type PkgKeyPaths } from '../server/keyfiles.js';
import { keyIdOf, primaryKeys, type KeySet } from '../server/keyset.js';
import { loadKeySet } from '../server/keyset-file.js';
import { startPkg, type RunningPkg } from '../server/testing.js';
import { realClock, runCliProcess, type SessionLine } from '../cli/testing.js';
import { Exit } from '../cli/exit.js';
import { loadPgWasm } from '../test/pgwasm.js';
import { chunkedSource, collector } from '../test/streams.js';
import { cryptoWorkerApi } from '../worker/worker-api.js';
import { PostGuardWorker } from '../worker/client.js';
import { ClientError, PostGuard } from './index.js';

/**
 * Issue 32's "done when" for key rotation, end to end over loopback HTTP with the real PKG, the
 * real stand-in identity server and the real pg-pkg commands: a file sealed under master key A
 * opens after `keys add; keys promote B` with exactly one identity session through the client, the
 * crypto worker's API (over comlink) and pg-cli, and each says it was sealed under A; a new file
 * is sealed under B; after `keys retire A` the old file is refused with NO_MATCHING_KEY (before any
 * session); pg-wasm 0.5.10 still seals and opens against the primary.
 */

const EMAIL = 'pbdf.sidn-pbdf.email.email';
const BOB = 'bob@example.org';
const ALICE = 'alice@example.org';
const PLAIN = new TextEncoder().encode('sealed before the rotation\n');

let dir: string;
let paths: PkgKeyPaths;
let keySetPath: string;
let yivi: RunningStandin;
let pkg: RunningPkg | undefined;
let oldFile: Uint8Array;
let ids: { ibeA: string; ibsA: string; ibeB: string; ibsB: string };
const clock = realClock();

/** pg-pkg keys …, in process; its stdout. */
async function pgPkgKeys(...args: string[]): Promise<string> {
  let out = '';
  let err = '';
  const io = {
    stdout: { write: (s: string) => void (out += s) },
    stderr: { write: (s: string) => void (err += s) },
  };
  const flags = ['--key-set', keySetPath, '--ibe-public-path', paths.ibePublic, '--ibe-secret-path', paths.ibeSecret];
  flags.push('--ibs-public-path', paths.ibsPublic, '--ibs-secret-path', paths.ibsSecret);
  const outcome = await runCli(['keys', ...args, ...flags], {}, io as never);
  expect(outcome, err).toEqual({ exit: 0 });
  return out;
}

/** (Re)starts the PKG on the key set as the files now hold it, as a restarted instance would. */
async function restartPkg(): Promise<KeySet> {
  await pkg?.close();
  const { set } = await loadKeySet(keySetPath, paths);
  pkg = await startPkg({ keys: primaryKeys(set), keySet: set, yivi, clock });
  return set;
}

/** Options to seal for Bob, signed as Alice under the IBS master secret `signingSecret`. */
function forBob(signingSecret: string): SealOptions {
  const ts = Math.floor(Date.now() / 1000) - 5;
  const alice = { ts, con: [{ t: EMAIL, v: ALICE }] };
  const policy: Policy = { ts, con: [{ t: EMAIL, v: BOB }] };
  return { policy: { [BOB]: policy }, pubSignKey: { key: extractSigningKey(signingSecret, alice), policy: alice } };
}

/** A streaming ciphertext for Bob (what the client, the CLI and the service worker open). */
async function sealForBob(mpk: string, signingSecret: string): Promise<Uint8Array> {
  const out = collector();
  await sealStream(mpk, forBob(signingSecret), chunkedSource(PLAIN), out.writable);
  return out.bytes();
}

/** Plays Bob's phone for each session shown, and counts them. */
function bobsPhone() {
  const sessions: Array<Promise<unknown>> = [];
  return {
    sessions,
    onSession: (session: IdentitySession) => void sessions.push(disclose(session.qrText, { [EMAIL]: BOB })),
  };
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'pg-rotation-'));
  const at = (name: string) => join(dir, name);
  paths = {
    ibePublic: at('pkg_ibe.pub'),
    ibeSecret: at('pkg_ibe.sec'),
    ibsPublic: at('pkg_ibs.pub'),
    ibsSecret: at('pkg_ibs.sec'),
  };
  keySetPath = at('pkg_keys.json');
  const a = generatePkgKeys();
  await writePkgKeys(paths, a);
  yivi = await startStandin({ clock, sweepIntervalMs: 0, pairingHint: false });
  // Today's layout: the four files, one key. A file is sealed under it.
  await restartPkg();
  oldFile = await sealForBob(a.mpk, a.sk);
  // The rotation: add B (decrypt-only), then promote it, as two rolled-out steps.
  const added = await pgPkgKeys('add');
  const [ibeB, ibsB] = [...added.matchAll(/key ([0-9a-f]{16}) \(decrypt-only\)/g)].map((m) => m[1]!);
  ids = { ibeA: keyIdOf(a.mpk), ibsA: keyIdOf(a.vk), ibeB: ibeB!, ibsB: ibsB! };
  await pgPkgKeys('promote', '--id', ids.ibeB);
  await pgPkgKeys('promote', '--id', ids.ibsB);
  await restartPkg();
}, 60_000);

afterAll(async () => {
  await pkg?.close();
  await yivi?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('after keys add B; keys promote B', () => {
  it('the PKG publishes B as the primary and A as decrypt-only, pg-pkg keys list agrees', async () => {
    const body = (await (await fetch(`${pkg!.url}/v2/parameters`)).json()) as {
      publicKey: string;
      keys: Array<{ id: string; status: string }>;
    };
    expect(keyIdOf(body.publicKey)).toBe(ids.ibeB);
    expect(body.keys.map((k) => [k.id, k.status])).toEqual([
      [ids.ibeA, 'decrypt-only'],
      [ids.ibeB, 'primary'],
    ]);
    const listed = await pgPkgKeys('list');
    expect(listed).toMatch(new RegExp(`ibe\\t${ids.ibeB}\\tprimary`));
    expect(listed).toMatch(new RegExp(`ibs\\t${ids.ibsA}\\tdecrypt-only`));
  });

  it('the client opens the old file with one session, and says it was sealed under A', async () => {
    const phone = bobsPhone();
    const pg = new PostGuard({ pkgUrl: pkg!.url, storageUrl: 'http://127.0.0.1:9', allowInsecureUrls: true });
    const result = await pg.open({ data: oldFile }).decrypt({ onSession: phone.onSession, output: 'bytes' });
    await Promise.all(phone.sessions);
    expect(phone.sessions).toHaveLength(1);
    if (result.output !== 'bytes') throw new Error('unexpected output');
    expect(result.plaintext).toEqual(PLAIN);
    expect(result.keyId).toBe(ids.ibeA);
    expect(result.sender.standing).toBe('verified');
  });

  it("the crypto worker's API opens it with the PKG client's keys from one session", async () => {
    const { port1, port2 } = new MessageChannel();
    expose(cryptoWorkerApi(), port1);
    const worker = new PostGuardWorker({ endpoint: port2 as never });
    try {
      const client = new PkgClient({ url: pkg!.url, store: memoryStore(), EventSource: null, pollIntervalMs: 50 });
      const vks = await client.verificationKeys();
      const unsealer = await worker.StreamUnsealer.new(chunkedSource(oldFile, 4096), vks);
      const phone = bobsPhone();
      const keys = await client.decryptionKey({
        recipientId: BOB,
        policy: (await unsealer.inspect_header()).get(BOB)!,
        onSession: phone.onSession,
      });
      await Promise.all(phone.sessions);
      expect(phone.sessions).toHaveLength(1);
      expect(keys.usks?.map((k) => k.id)).toEqual([ids.ibeB, ids.ibeA]); // the primary's first
      // The primary's key alone is a wrong key for this file: typed, at once, and the source is left unread.
      await expect(unsealer.unseal(BOB, keys.usk, collector().writable)).rejects.toMatchObject({ code: 'WRONG_KEY' });
      const out = collector();
      const verified = await unsealer.unseal(BOB, keys.usks!, out.writable);
      expect(out.bytes()).toEqual(PLAIN);
      expect(verified.keyIds).toEqual({ userKey: ids.ibeA, verifyingKey: ids.ibsA });
      unsealer.free();
    } finally {
      port1.close();
      port2.close();
    }
  });

  it('pg-cli dec opens it with one session and names key A', async () => {
    const file = join(dir, 'old.txt.enc');
    await writeFile(file, oldFile);
    const wallet = (session: SessionLine) => disclose(session.qr, { [EMAIL]: BOB });
    const result = await runCliProcess(['dec', '--pkg', pkg!.url, file], { wallet });
    expect(result.stderr).not.toMatch(/error/);
    expect(result.code).toBe(Exit.OK);
    expect(result.sessions.map((s) => s.purpose)).toEqual(['decrypt']);
    expect(result.stdout).toContain(`Sealed under PKG key ${ids.ibeA}`);
  }, 30_000);

  it('a new file is sealed under B, and pg-wasm 0.5.10 seals and opens against the primary', async () => {
    const client = new PkgClient({ url: pkg!.url, store: memoryStore(), EventSource: null, pollIntervalMs: 50 });
    const mpk = await client.masterPublicKey();
    const vk = await client.verificationKey();
    expect(keyIdOf(mpk)).toBe(ids.ibeB);
    const { set } = await loadKeySet(keySetPath, paths);
    const b = primaryKeys(set);
    const ours = await seal(mpk, forBob(b.sk), PLAIN);
    const pgwasm = await loadPgWasm();
    const ts = Math.floor(Date.now() / 1000) - 5;
    const theirs = await pgwasm.seal(mpk, forBob(b.sk), PLAIN);
    // One session, one response: `key` is the primary's (what pg-js and pg-wasm use), `keys` all of them.
    const phone = bobsPhone();
    const keys = await client.decryptionKey({
      recipientId: BOB,
      policy: { ts, con: [{ t: EMAIL, v: '' }] },
      onSession: phone.onSession,
    });
    await Promise.all(phone.sessions);
    const [plainTheirs] = await (await pgwasm.Unsealer.new(theirs, vk)).unseal(BOB, keys.usk);
    expect(plainTheirs).toEqual(PLAIN);
    const [plainOurs] = await (await pgwasm.Unsealer.new(ours, vk)).unseal(BOB, keys.usk);
    expect(plainOurs).toEqual(PLAIN);
    const pg = new PostGuard({ pkgUrl: pkg!.url, storageUrl: 'http://127.0.0.1:9', allowInsecureUrls: true });
    const again = bobsPhone();
    const streamed = await sealForBob(mpk, b.sk);
    const opened = await pg.open({ data: streamed }).decrypt({ onSession: again.onSession, output: 'bytes' });
    expect(opened.keyId).toBe(ids.ibeB);
  }, 30_000);
});

describe('after keys retire A', () => {
  beforeAll(async () => {
    await pgPkgKeys('retire', '--id', ids.ibeA);
    await pgPkgKeys('retire', '--id', ids.ibsA);
    await restartPkg();
  }, 30_000);

  it('the old file is refused with NO_MATCHING_KEY by the client and pg-cli, before any session', async () => {
    const phone = bobsPhone();
    const pg = new PostGuard({ pkgUrl: pkg!.url, storageUrl: 'http://127.0.0.1:9', allowInsecureUrls: true });
    const error = await pg
      .open({ data: oldFile })
      .decrypt({ onSession: phone.onSession, output: 'bytes' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ClientError);
    expect((error as ClientError).cause ?? error).toMatchObject({ code: 'NO_MATCHING_KEY' });
    expect(phone.sessions).toHaveLength(0);

    const file = join(dir, 'old-after-retire.txt.enc');
    await writeFile(file, oldFile);
    const result = await runCliProcess(['dec', '--pkg', pkg!.url, file], {
      wallet: (session) => disclose(session.qr, { [EMAIL]: BOB }),
    });
    expect(result.code).toBe(Exit.WRONG_KEY);
    expect(result.sessions).toHaveLength(0);
    expect(result.stderr).toMatch(/retired/);
  }, 30_000);

  it('the user key response carries no key for A any more', async () => {
    const client = new PkgClient({ url: pkg!.url, store: memoryStore(), EventSource: null, pollIntervalMs: 50 });
    const phone = bobsPhone();
    const keys = await client.decryptionKey({
      recipientId: BOB,
      policy: { ts: Math.floor(Date.now() / 1000) - 5, con: [{ t: EMAIL, v: '' }] },
      onSession: phone.onSession,
    });
    await Promise.all(phone.sessions);
    expect(keys.usks?.map((k) => k.id)).toEqual([ids.ibeB]);
  });
});
