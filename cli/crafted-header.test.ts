import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { disclose } from '../devtools/standin/wallet.js';
import { startPkg, type RunningPkg } from '../server/testing.js';
import { benignEmail, craftedEmail, sealedBy } from '../test/crafted-header.js';
import { realClock, runCliProcess, type SessionLine } from './testing.js';

/**
 * pg-cli dec on a file whose header is signed by an e-mail of "a", ~1 MiB of spaces and "a"
 * (test/crafted-header.ts), the real CLI against a real PKG and the stand-in, the test playing the
 * phone: it reads the claimed sender before anything else, and once spent minutes trimming it.
 * It now decrypts the file as promptly as one from a benign 1 MiB address.
 */

const RECIPIENT_EMAIL = 'irma-demo.sidn-pbdf.email.email';
const BOB = 'bob@example.org';
const plain = new TextEncoder().encode('a secret from a long address\n');

let pkg: RunningPkg;
let dir: string;

beforeAll(async () => {
  pkg = await startPkg({ clock: realClock() });
  dir = await mkdtemp(join(tmpdir(), 'pg-cli-crafted-'));
});

afterAll(async () => {
  await pkg?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('pg-cli dec on a header signed by an e-mail of a million spaces', () => {
  it('decrypts it as promptly as a file from a benign address of the same length', async () => {
    const ts = Math.floor(Date.now() / 1000) - 10;
    const recipient = { ts, con: [{ t: RECIPIENT_EMAIL, v: BOB }] };
    const times: Record<string, number> = {};
    for (const [name, email] of [
      ['benign', benignEmail()],
      ['crafted', craftedEmail()],
    ] as const) {
      const { stream } = await sealedBy(pkg.keys, email, recipient, plain, BOB);
      const file = join(dir, `${name}.txt.enc`);
      await writeFile(file, stream);
      const start = performance.now();
      const result = await runCliProcess(['dec', '--pkg', pkg.url, file], {
        wallet: (session: SessionLine) => disclose(session, { [RECIPIENT_EMAIL]: BOB }),
      });
      times[name] = performance.now() - start;
      expect(result.code, result.stderr.slice(0, 2000)).toBe(0);
      expect(await readFile(join(dir, `${name}.txt`))).toEqual(Buffer.from(plain));
      expect(result.stderr).toContain(email);
    }
    if (process.env['LINEAR_TIME_LOG'] !== undefined) {
      console.log(
        `[crafted] pg-cli dec: benign ${times['benign']!.toFixed(0)} ms, crafted ${times['crafted']!.toFixed(0)} ms`,
      );
    }
    // The whole run (a process, an identity session, the key) against the benign one's, generously.
    expect(times['crafted']!).toBeLessThan(2 * times['benign']! + 3000);
  }, 120_000);
});
