import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seal, sealStream, type Policy, type SealOptions } from '../lib/index.js';
import { splitFrame } from '../lib/frame.js';
import { extractSigningKey, generatePkgKeys } from '../lib/keys.js';
import { startPkg, type RunningPkg } from '../server/testing.js';
import { loadPgWasm, type PgWasm } from '../test/pgwasm.js';
import { chunkedSource, collector, concat } from '../test/streams.js';
import { Exit } from './exit.js';
import { realClock, runCliProcess } from './testing.js';

/**
 * pg-cli inspect, the real bin as a process: what a file says about itself from its framing alone,
 * on files sealed by us and by pg-wasm 0.5.10. Without --pkg it never touches the network: $PKG_URL
 * points at a socket that counts connections. With --pkg it verifies the header signature against
 * a real PKG.
 */

const EMAIL = 'pbdf.sidn-pbdf.email.email';
const DEMO_EMAIL = 'irma-demo.sidn-pbdf.email.email';
const ALICE = 'alice@example.org';
const BOB = 'bob@example.org';
const TS = 1_700_000_000;

let pkg: RunningPkg;
let pg: PgWasm;
let dir: string;
let counter: Server;
let counterUrl: string;
let connections = 0;
const files: Record<string, string> = {};

const sender: Policy = { ts: TS, con: [{ t: EMAIL, v: ALICE }] };
const plain = Uint8Array.from({ length: 300_000 }, (_, i) => (i * 7) & 255);

function optionsFor(sk: string, signer: Policy = sender): SealOptions {
  return {
    policy: { [BOB]: { ts: TS, con: [{ t: EMAIL, v: BOB }] } },
    pubSignKey: { key: extractSigningKey(sk, signer), policy: signer },
  };
}

async function streamed(sealer: typeof sealStream, mpk: string, options: SealOptions): Promise<Uint8Array> {
  const out = collector();
  await sealer(mpk, options, chunkedSource(plain), out.writable);
  return out.bytes();
}

async function file(name: string, bytes: Uint8Array): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, bytes);
  files[name] = path;
  return path;
}

beforeAll(async () => {
  [pkg, pg] = await Promise.all([startPkg({ clock: realClock() }), loadPgWasm()]);
  dir = await mkdtemp(join(tmpdir(), 'pg-cli-inspect-'));
  counter = createServer((socket) => {
    connections++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => counter.listen(0, '127.0.0.1', resolve));
  counterUrl = `http://127.0.0.1:${(counter.address() as { port: number }).port}`;
  const { mpk, sk } = pkg.keys;
  const ours = await streamed(sealStream, mpk, optionsFor(sk));
  await file('ours.enc', ours);
  await file('ours-memory.enc', await seal(mpk, optionsFor(sk), plain.subarray(0, 100)));
  await file('theirs.enc', await streamed(pg.sealStream.bind(pg) as typeof sealStream, mpk, optionsFor(sk)));
  await file('theirs-memory.enc', await pg.seal(mpk, optionsFor(sk), plain.subarray(0, 100)));
  const demo: Policy = { ts: TS, con: [{ t: DEMO_EMAIL, v: ALICE }] };
  await file('demo.enc', await seal(mpk, optionsFor(sk, demo), plain.subarray(0, 10)));
  const other = generatePkgKeys();
  await file('other-pkg.enc', await seal(other.mpk, optionsFor(other.sk), plain.subarray(0, 10)));
  const { framingBytes } = splitFrame(ours);
  await file('garbage-payload.enc', concat([ours.subarray(0, framingBytes), new Uint8Array(5000).fill(0x5a)]));
  await file('cut.enc', ours.subarray(0, framingBytes - 1));
  await file('notes.txt', new TextEncoder().encode('just some text, not a ciphertext\n'));
});

afterAll(async () => {
  await pkg?.close();
  await new Promise((resolve) => counter?.close(resolve));
  await rm(dir, { recursive: true, force: true });
});

/** pg-cli inspect, with $PKG_URL at the counting socket: no connection may reach it. */
async function inspect(...args: string[]) {
  const before = connections;
  const result = await runCliProcess(['inspect', ...args], { noPointerFd: true, env: { PKG_URL: counterUrl } });
  expect(connections - before, 'pg-cli inspect connected to $PKG_URL').toBe(0);
  return result;
}

const recipientLine = `  ${BOB}: ${EMAIL} = (hidden) (sealed 2023-11-14T22:13:20Z)\n`;

describe('pg-cli inspect', () => {
  it('a streaming file of ours: mode, recipients, the claimed sender; no key, no network', async () => {
    const { code, stdout, stderr } = await inspect(files['ours.enc']!);
    expect(code, stderr).toBe(Exit.OK);
    expect(stderr).toBe('');
    expect(stdout).toBe(
      `File: ${files['ours.enc']}\n` +
        'Mode: streaming, segments of 262144 bytes\n' +
        'Header signature: not checked (no PKG key; give --pkg to check it)\n' +
        `Claimed sender: ${EMAIL} = "${ALICE}"\n` +
        '  The file names this sender; it is checked only when the whole file has been decrypted.\n' +
        'Encrypted for:\n' +
        recipientLine,
    );
  });

  it("pg-wasm's files and in-memory files, as --json", async () => {
    for (const name of ['theirs.enc', 'theirs-memory.enc', 'ours-memory.enc']) {
      const { code, stdout, stderr } = await inspect('--json', files[name]!);
      expect(code, stderr).toBe(Exit.OK);
      const json = JSON.parse(stdout);
      expect(json).toEqual({
        file: files[name],
        mode: name.includes('memory')
          ? { type: 'InMemory', size: expect.any(Number) }
          : { type: 'Streaming', segmentSize: 262_144, sizeHint: ['0', null] },
        framingBytes: expect.any(Number),
        headerSignature: 'not-checked',
        sender: 'claimed',
        claimedSender: sender,
        recipients: { [BOB]: { ts: TS, con: [{ t: EMAIL, v: '' }] } },
      });
    }
    const text = await inspect(files['theirs-memory.enc']!);
    expect(text.stdout).toMatch(/^Mode: in-memory, \d+ bytes$/m);
    expect(text.stdout).toContain(`Claimed sender: ${EMAIL} = "${ALICE}"\n`);
  });

  it('demo credentials are marked as such', async () => {
    const { code, stdout } = await inspect(files['demo.enc']!);
    expect(code).toBe(Exit.OK);
    expect(stdout).toContain(`Claimed sender: ${DEMO_EMAIL} (demo credential) = "${ALICE}"\n`);
    expect(stdout).toContain('Note: Demo credentials: anyone can issue these to themselves');
  });

  it('reads only the framing: a payload of garbage still inspects', async () => {
    const { code, stdout, stderr } = await inspect(files['garbage-payload.enc']!);
    expect(code, stderr).toBe(Exit.OK);
    expect(stdout).toContain(`Claimed sender: ${EMAIL} = "${ALICE}"\n`);
  });

  it('--pkg verifies the header signature with the PKG’s key, and the sender stays a claim', async () => {
    const text = await runCliProcess(['inspect', '--pkg', pkg.url, files['theirs.enc']!], { noPointerFd: true });
    expect(text.code, text.stderr).toBe(Exit.OK);
    expect(text.stdout).toContain(`Header signature: verified with the PKG at ${pkg.url}\n`);
    expect(text.stdout).toContain(`Claimed sender: ${EMAIL} = "${ALICE}"\n`);
    const json = await runCliProcess(['inspect', '--json', '-p', pkg.url, files['ours-memory.enc']!], {
      noPointerFd: true,
    });
    expect(json.code, json.stderr).toBe(Exit.OK);
    expect(JSON.parse(json.stdout)).toMatchObject({ headerSignature: 'verified', pkg: pkg.url, sender: 'claimed' });
    // Signed under another PKG: the header does not verify.
    const other = await runCliProcess(['inspect', '--pkg', pkg.url, files['other-pkg.enc']!], { noPointerFd: true });
    expect(other.code).toBe(Exit.DAMAGED);
    expect(other.stderr).toMatch(/^pg-cli: error: the encrypted file is damaged or was changed \(BAD_SIGNATURE\)/);
    expect(other.stdout).toBe('');
  });

  it('refuses what is not a whole PostGuard framing, before any network', async () => {
    const notPg = await runCliProcess(['inspect', '--pkg', counterUrl, files['notes.txt']!], { noPointerFd: true });
    expect(notPg.code).toBe(Exit.FILE);
    expect(notPg.stderr).toBe('pg-cli: error: the input is not a PostGuard encrypted file\n');
    const cut = await runCliProcess(['inspect', '--pkg', counterUrl, files['cut.enc']!], { noPointerFd: true });
    expect(cut.code).toBe(Exit.DAMAGED);
    expect(cut.stderr).toMatch(/incomplete \(TRUNCATED\)/);
    expect(connections).toBe(0);
    const missing = await inspect(join(dir, 'nowhere.enc'));
    expect(missing.code).toBe(Exit.FILE);
    expect(missing.stderr).toMatch(/^pg-cli: error: cannot read .*nowhere\.enc/);
  });

  it('usage: help, one file, no output flags', async () => {
    const help = await inspect('--help');
    expect(help.code).toBe(Exit.OK);
    expect(help.stdout).toMatch(/^Usage: pg-cli inspect \[options\] <file>/);
    expect((await inspect()).code).toBe(Exit.USAGE);
    const flag = await inspect('-o', 'x', files['ours.enc']!);
    expect(flag.code).toBe(Exit.USAGE);
    expect(flag.stderr).toMatch(/^pg-cli: error: inspect: Unknown option '-o'/);
  });
});
