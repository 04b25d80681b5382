import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Policy, VerificationResult } from '../lib/index.js';
import { disclose } from '../devtools/standin/wallet.js';
import { startPkg, testKeys, type RunningPkg } from '../server/testing.js';
import {
  ATTACKERS,
  BOB,
  EMAIL,
  FILE_KINDS,
  buildThreatModel,
  type ThreatModel,
  type ThreatRow,
} from '../test/threat-model.js';
import { Exit } from './exit.js';
import { realClock, runCliProcess, type CliResult } from './testing.js';

/**
 * docs/security.md, row by row, through the real `pg-cli dec` binary: each attacker's best forgery
 * of each kind of file, decrypted by Bob against a real PKG (holding the master keys the forgeries
 * were made under) in front of the stand-in identity server, the test playing Bob's wallet.
 *
 * The words expected on stdout are written here from the document's table, not taken from
 * lib/sender.ts, so a change of wording in one place and not the other fails this test.
 */

/** The document's wording ("The words people see"), literally. */
const WORDS = {
  claimed: 'Claimed sender: ',
  verified: 'Verified sender: ',
  contentSigner: 'Content signed by: ',
  headerClaim: 'Claimed in the signed header (not part of the content signature): ',
  olderHeaderClaim: 'Signed header, older format (not part of the content signature): ',
  olderFormat: 'Signed header, older format: ',
  demoNote: 'Note: Demo credentials: anyone can issue these to themselves, so they prove nothing about a person.\n',
};

/** How the CLI shows one identity: `type = "value"`, a demo-scheme type marked as such. */
function shown(policy: Policy): string {
  return policy.con
    .map(({ t, v }) => `${t.startsWith('irma-demo.') ? `${t} (demo credential)` : t} = ${JSON.stringify(v)}`)
    .join(', ');
}

const isDemo = (policy: Policy): boolean => policy.con.some(({ t }) => t.startsWith('irma-demo.'));

/** The sender lines for a verified file, from the document's table (standing → lines). */
function expectedLines(result: VerificationResult): string {
  let lines: string;
  if (result.contentSigner === 'private') {
    const header = result.bound ? WORDS.headerClaim : WORDS.olderHeaderClaim;
    lines = `${WORDS.contentSigner}${shown(result.private!)}\n${header}${shown(result.public)}\n`;
  } else if (result.bound) {
    lines = `${WORDS.verified}${shown(result.public)}\n`;
  } else {
    lines = `${WORDS.olderFormat}${shown(result.public)}\n`;
  }
  const demo = isDemo(result.public) || (result.private !== undefined && isDemo(result.private));
  return demo ? `${lines}${WORDS.demoNote}` : lines;
}

/** The start of pg-cli's one error line (cli/exit.ts) for each error a row can end with. */
const ERROR_LINES: Record<string, string> = {
  BAD_SIGNATURE: 'pg-cli: error: the encrypted file is damaged or was changed (BAD_SIGNATURE): ',
  SENDER_MISMATCH:
    'pg-cli: error: the sender named in the file is not the one who sealed it (SENDER_MISMATCH): someone re-signed its header; do not trust it\n',
  TRUNCATED: 'pg-cli: error: the encrypted file is incomplete (TRUNCATED): ',
};

/** The last line of stderr, with its newline. */
const lastLine = (text: string): string => text.slice(text.lastIndexOf('\n', text.length - 2) + 1);

/** `text` begins with `start` (failing with both shown). */
const expectStart = (text: string, start: string): void => expect(text.slice(0, start.length)).toBe(start);

let pkg: RunningPkg;
let dir: string;
let model: ThreatModel;

beforeAll(async () => {
  // The PKG follows real time: Bob's key is asked for the files' timestamp, which must not lie in its future.
  const clock = realClock();
  const keys = testKeys();
  [pkg, dir, model] = await Promise.all([
    startPkg({ clock, keys }),
    mkdtemp(join(tmpdir(), 'pg-cli-threats-')),
    buildThreatModel(keys, clock.now() - 60),
  ]);
});

afterAll(async () => {
  await pkg?.close();
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

const rowOf = (attacker: string, kind: string): ThreatRow =>
  model.rows.find((r) => r.attacker === attacker && r.kind === kind)!;

interface Decrypted {
  result: CliResult;
  file: string;
  output: string;
  /** What the directory holds afterwards besides the input: the output, or a partial one left behind. */
  left: string[];
}

/**
 * Writes the row's file into a directory of its own and runs `pg-cli dec` on it as Bob, disclosing
 * his (pbdf) e-mail.
 */
async function decrypt(row: ThreatRow, name: string, extra: string[] = []): Promise<Decrypted> {
  const rowDir = join(dir, name);
  await mkdir(rowDir);
  const file = join(rowDir, `${name}.enc`);
  await writeFile(file, row.file);
  const result = await runCliProcess(['dec', '--pkg', pkg.url, '--recipient', BOB, ...extra, file], {
    wallet: (session) => disclose(session, { [EMAIL]: BOB }),
  });
  const left = (await readdir(rowDir)).filter((entry) => entry !== `${name}.enc`);
  return { result, file, output: join(rowDir, name), left };
}

// Each row is a process of its own that mostly waits (start-up, the PKG, the wallet): run a few at once.
describe.concurrent('threat model (docs/security.md) through pg-cli dec', () => {
  for (const attacker of ATTACKERS) {
    for (const kind of FILE_KINDS) {
      it(`${attacker} × ${kind}`, async () => {
        const row = rowOf(attacker, kind);
        const { result, file, output, left } = await decrypt(row, `${attacker}-${kind}`);
        expect(result.stderr).not.toContain('Verified');

        if ('error' in row.outcome && row.outcome.at === 'header') {
          // The header signature does not verify: refused before anything about the sender is
          // shown, before any session, and nothing is written.
          expectStart(result.stderr, ERROR_LINES[row.outcome.error]!);
          expect(result.stderr.indexOf('\n')).toBe(result.stderr.length - 1);
          expect(result.code).toBe(Exit.DAMAGED);
          expect(result.sessions).toEqual([]);
          expect(result.stdout).toBe('');
          expect(left).toEqual([]);
          return;
        }

        // The header verifies: before the session its sender is shown, and only as a claim.
        const claimed = `${WORDS.claimed}${shown(row.claimed!)}\n${isDemo(row.claimed!) ? WORDS.demoNote : ''}`;
        expectStart(result.stderr, `${claimed}Encrypted for:\n`);
        expect(result.stderr.indexOf('open this link')).toBeGreaterThan(claimed.length);
        expect(result.sessions.map((s) => s.purpose)).toEqual(['decrypt']);

        if ('error' in row.outcome) {
          // Found in the content, after the session: exit 8 and no output, not even a partial one.
          expectStart(lastLine(result.stderr), ERROR_LINES[row.outcome.error]!);
          expect(result.stderr.indexOf('pg-cli: error:')).toBe(result.stderr.length - lastLine(result.stderr).length);
          expect(result.code).toBe(Exit.DAMAGED);
          expect(result.stdout).toBe('');
          expect(left).toEqual([]);
          return;
        }

        expect(result.stderr).not.toContain('error');
        expect(result.code).toBe(Exit.OK);
        expect(result.stdout).toBe(`Decrypted ${file} to ${output}\n${expectedLines(row.outcome.result)}`);
        expect(left).toEqual([`${attacker}-${kind}`]);
      });
    }
  }

  it('--json names the standing and whose key signed the content (co-recipient × bound)', async () => {
    const row = rowOf('co-recipient', 'bound');
    if (!('result' in row.outcome)) throw new Error('co-recipient × bound has a result');
    const { result, output } = await decrypt(row, 'json', ['--json']);
    expect(result.code).toBe(Exit.OK);
    expect(result.stdout).toContain('"sender":"content-signer"');
    expect(result.stdout).toContain('"contentSigner":"private"');
    expect(JSON.parse(result.stdout)).toEqual({
      // The PKG's key the file was sealed under (its id in the key set: 8 bytes of SHA-256, hex).
      keyId: expect.stringMatching(/^[0-9a-f]{16}$/),
      output,
      recipient: BOB,
      sender: 'content-signer',
      signedBy: row.outcome.result,
    });
  });
});
