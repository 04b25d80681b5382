import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { generateKemKeys, generateSigningKeys, extractSigningKey } from '../lib/keys.js';
import { seal } from '../lib/seal.js';
import { Exit } from './exit.js';
import { runCliProcess } from './testing.js';

/**
 * `dec` reads and checks the container's framing before it asks the PKG for anything or looks at
 * the output path: a file that is not PostGuard, or is cut inside its header, fails at once. The
 * "PKG" here is a socket that counts connections, so a test can tell that nobody called it.
 */

let dir: string;
let pkg: Server;
let pkgUrl: string;
let connections = 0;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'pg-cli-dec-'));
  pkg = createServer((socket) => {
    connections++;
    socket.destroy();
  });
  await new Promise<void>((resolve) => pkg.listen(0, '127.0.0.1', resolve));
  pkgUrl = `http://127.0.0.1:${(pkg.address() as { port: number }).port}`;
});

beforeEach(() => {
  connections = 0;
});

afterAll(async () => {
  await new Promise((resolve) => pkg.close(resolve));
  await rm(dir, { recursive: true, force: true });
});

async function sealedFile(): Promise<Uint8Array> {
  const kem = generateKemKeys();
  const ibs = generateSigningKeys();
  const signer = { ts: 1, con: [{ t: 'pbdf.sidn-pbdf.email.email', v: 'alice@example.com' }] };
  const bob = { ts: 1, con: [{ t: 'pbdf.sidn-pbdf.email.email', v: 'bob@example.com' }] };
  const options = { policy: { bob }, pubSignKey: { key: extractSigningKey(ibs.sk, signer), policy: signer } };
  return seal(kem.mpk, options, new TextEncoder().encode('hello'));
}

describe('pg-cli dec checks its input first', () => {
  it('garbage: "not a PostGuard file", exit FILE, no network, an existing output untouched', async () => {
    const input = join(dir, 'notes.txt.enc');
    const output = join(dir, 'notes.txt');
    await writeFile(input, 'just some text, not a ciphertext');
    await writeFile(output, 'my own file');
    const result = await runCliProcess(['dec', '--pkg', pkgUrl, input]);
    expect(result.code).toBe(Exit.FILE);
    expect(result.stderr).toBe('pg-cli: error: the input is not a PostGuard encrypted file\n');
    expect(connections).toBe(0);
    expect(await readFile(output, 'utf8')).toBe('my own file');
  });

  it('a file cut inside its header is incomplete (exit DAMAGED), before any network', async () => {
    const sealed = await sealedFile();
    const headerEnd = 10 + new DataView(sealed.buffer, sealed.byteOffset).getUint32(6);
    for (const length of [6, 40, headerEnd - 1, headerEnd + 3]) {
      const input = join(dir, `cut-${length}.enc`);
      await writeFile(input, sealed.subarray(0, length));
      const result = await runCliProcess(['dec', '--pkg', pkgUrl, '-o', join(dir, `cut-${length}`), input]);
      expect(result.code, result.stderr).toBe(Exit.DAMAGED);
      expect(result.stderr).toMatch(/TRUNCATED|incomplete/);
    }
    expect(connections).toBe(0);
  });

  it('an unknown format version is named, before any network', async () => {
    const sealed = Uint8Array.from(await sealedFile());
    sealed[5] = 9;
    const input = join(dir, 'v9.enc');
    await writeFile(input, sealed);
    const result = await runCliProcess(['dec', '--pkg', pkgUrl, '-o', join(dir, 'v9'), input]);
    expect(result.code).not.toBe(Exit.OK);
    expect(result.stderr).toMatch(/version/);
    expect(connections).toBe(0);
  });

  it('a well-formed file gets as far as the PKG (which is asked once)', async () => {
    const input = join(dir, 'good.enc');
    await writeFile(input, await sealedFile());
    const result = await runCliProcess(['dec', '--pkg', pkgUrl, '-o', join(dir, 'good'), input]);
    expect(result.code).not.toBe(Exit.OK);
    expect(connections).toBeGreaterThan(0);
  });
});
