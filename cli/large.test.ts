import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdtemp, open, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { disclose } from '../devtools/standin/wallet.js';
import { startPkg, type RunningPkg } from '../server/testing.js';
import { realClock, runCliProcess } from './testing.js';

/**
 * A 512 MiB file through pg-cli enc and dec as processes: the bytes come back identical and each
 * process's peak resident memory (reported by the hidden --report-max-rss) stays far below the file
 * size, i.e. the CLI streams. The files are made here and removed afterwards.
 */

const EMAIL = 'irma-demo.sidn-pbdf.email.email';
const SIZE = 512 * 1024 * 1024;
const MIB = 1024 * 1024;
/** Node with the tsx loader alone takes ~60-90 MiB; the streaming pipeline adds a few MiB. */
const RSS_LIMIT = 192 * MIB;

let pkg: RunningPkg;
let dir: string;

beforeAll(async () => {
  pkg = await startPkg({ clock: realClock() });
  dir = await mkdtemp(join(tmpdir(), 'pg-cli-large-'));
});

afterAll(async () => {
  await pkg?.close();
  await rm(dir, { recursive: true, force: true });
});

/** Writes `size` bytes that never repeat a MiB (a random block with the block number in front); returns their SHA-256. */
async function makeFile(path: string, size: number): Promise<string> {
  const block = randomBytes(MIB);
  const hash = createHash('sha256');
  const file = await open(path, 'wx');
  try {
    for (let i = 0; i * MIB < size; i++) {
      block.writeUInt32BE(i, 0);
      const part = block.subarray(0, Math.min(MIB, size - i * MIB));
      hash.update(part);
      await file.write(part);
    }
  } finally {
    await file.close();
  }
  return hash.digest('hex');
}

async function sha256(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path, { highWaterMark: MIB })) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

describe('a 512 MiB file', () => {
  it('round-trips through enc and dec with flat memory', { timeout: 240_000 }, async () => {
    const plain = join(dir, 'big.bin');
    const digest = await makeFile(plain, SIZE);

    const sealed = await runCliProcess(
      [
        'enc',
        '--pkg',
        pkg.url,
        '-i',
        JSON.stringify({ 'bob@example.org': [{ t: EMAIL, v: 'bob@example.org' }] }),
        '-P',
        JSON.stringify([{ t: EMAIL }]),
        '--report-max-rss',
        plain,
      ],
      { wallet: (s) => disclose(s, { [EMAIL]: 'alice@example.org' }) },
    );
    expect(sealed.stderr).not.toMatch(/error/);
    expect(sealed.code).toBe(0);
    expect((await stat(`${plain}.enc`)).size).toBeGreaterThan(SIZE);
    await rm(plain);

    const opened = await runCliProcess(['dec', '--pkg', pkg.url, '--report-max-rss', `${plain}.enc`], {
      wallet: (s) => disclose(s, { [EMAIL]: 'bob@example.org' }),
    });
    expect(opened.stderr).not.toMatch(/error/);
    expect(opened.code).toBe(0);
    await rm(`${plain}.enc`);
    expect((await stat(plain)).size).toBe(SIZE);
    expect(await sha256(plain)).toBe(digest);
    await rm(plain);

    console.log(
      `pg-cli peak RSS for 512 MiB: enc ${(sealed.maxRssBytes! / MIB).toFixed(0)} MiB, dec ${(opened.maxRssBytes! / MIB).toFixed(0)} MiB`,
    );
    expect(sealed.maxRssBytes).toBeGreaterThan(0);
    expect(sealed.maxRssBytes).toBeLessThan(RSS_LIMIT);
    expect(opened.maxRssBytes).toBeGreaterThan(0);
    expect(opened.maxRssBytes).toBeLessThan(RSS_LIMIT);
  });
});
