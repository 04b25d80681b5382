import { mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StreamUnsealer } from '../lib/index.js';
import { closedPort } from '../server/db/testing.js';
import { cancel, disclose, type AttributeValues } from '../devtools/standin/wallet.js';
import { startPkg, type RunningPkg } from '../server/testing.js';
import { chunkedSource } from '../test/streams.js';
import { Exit } from './exit.js';
import { realClock, runCliProcess, startCli, type CliResult, type SessionLine } from './testing.js';

/**
 * pg-cli as a process against a real PKG on loopback in front of the real stand-in identity server;
 * the test plays the phone: it reads the session pointer the CLI writes to fd 3 and discloses with the
 * simulated wallet over HTTP.
 */

const EMAIL = 'irma-demo.sidn-pbdf.email.email';
/** How the CLI shows that type: the stand-in issues demo-scheme credentials, and says so. */
const SHOWN = `${EMAIL} (demo credential)`;
const DEMO_NOTE =
  'Note: Demo credentials: anyone can issue these to themselves, so they prove nothing about a person.\n';
const FULLNAME = 'irma-demo.gemeente.personalData.fullname';
const ALICE = 'alice@example.org';
const BOB = 'bob@example.org';
const CAROL = 'carol@example.org';

let pkg: RunningPkg;
let dir: string;
let n = 0;

beforeAll(async () => {
  pkg = await startPkg({ clock: realClock() });
  dir = await mkdtemp(join(tmpdir(), 'pg-cli-'));
});

afterAll(async () => {
  await pkg?.close();
  await rm(dir, { recursive: true, force: true });
});

/** A fresh file in the test directory. */
async function plainFile(content: string | Uint8Array = `secret ${n}\n`): Promise<string> {
  const path = join(dir, `file-${++n}.txt`);
  await writeFile(path, content);
  return path;
}

const wallet = (attributes: AttributeValues) => (session: SessionLine) => disclose(session, attributes);
const forBob = { [BOB]: [{ t: EMAIL, v: BOB }] };

/** pg-cli enc, the sender (Alice) disclosing her e-mail. */
function encrypt(
  file: string,
  recipients: object = forBob,
  extra: string[] = [],
  sender: AttributeValues = { [EMAIL]: ALICE },
): Promise<CliResult> {
  return runCliProcess(
    ['enc', '-i', JSON.stringify(recipients), '-P', JSON.stringify([{ t: EMAIL }]), '--pkg', pkg.url, ...extra, file],
    {
      wallet: wallet(sender),
    },
  );
}

function decrypt(
  file: string,
  attributes: AttributeValues = { [EMAIL]: BOB },
  extra: string[] = [],
): Promise<CliResult> {
  return runCliProcess(['dec', '--pkg', pkg.url, ...extra, file], { wallet: wallet(attributes) });
}

/** Partial outputs left in the test directory (there must never be any). */
const partials = async (): Promise<string[]> => (await readdir(dir)).filter((name) => name.includes('pg-cli-partial'));

const exists = (path: string): Promise<boolean> =>
  stat(path).then(
    () => true,
    () => false,
  );

describe('help, version and usage', () => {
  it('prints the version and every command help on stdout with exit 0', async () => {
    const version = JSON.parse(await readFile(new URL('./package.json', import.meta.url), 'utf8')).version;
    const v = await runCliProcess(['--version'], { noPointerFd: true });
    expect(v).toMatchObject({ code: 0, stdout: `pg-cli ${version}\n` });
    const main = await runCliProcess(['--help'], { noPointerFd: true });
    expect(main.code).toBe(0);
    expect(main.stdout).toMatch(/Usage: pg-cli <command>/);
    const encHelp = await runCliProcess(['enc', '--help'], { noPointerFd: true });
    expect(encHelp.code).toBe(0);
    expect(encHelp.stdout).toMatch(/--pub-sign-id/);
    expect(encHelp.stdout).toMatch(/--api-key/);
    const decHelp = await runCliProcess(['help', 'dec'], { noPointerFd: true });
    expect(decHelp.code).toBe(0);
    expect(decHelp.stdout).toMatch(/--recipient/);
  });

  it('refuses a missing command, an unknown command and an unknown flag with exit 2 and one line', async () => {
    const none = await runCliProcess([], { noPointerFd: true });
    expect(none.code).toBe(Exit.USAGE);
    const unknown = await runCliProcess(['encrypt', 'x'], { noPointerFd: true });
    expect(unknown.code).toBe(Exit.USAGE);
    expect(unknown.stderr).toBe(
      'pg-cli: error: unknown command "encrypt" (commands: enc, dec, inspect; see pg-cli --help)\n',
    );
    const flag = await runCliProcess(['dec', '--bogus', 'x.enc'], { noPointerFd: true });
    expect(flag.code).toBe(Exit.USAGE);
    expect(flag.stderr).toMatch(/^pg-cli: error: dec: Unknown option '--bogus'\n$/);
  });
});

describe('enc → dec round trip', () => {
  it('encrypts for Bob signed by Alice, and Bob decrypts after disclosing his e-mail', async () => {
    const content = 'the eagle lands at noon\n';
    const file = await plainFile(content);
    const sealed = await encrypt(file);
    expect(sealed.stderr).not.toMatch(/error/);
    expect(sealed.code).toBe(0);
    expect(sealed.sessions.map((s) => s.purpose)).toEqual(['sign']);
    expect(sealed.stdout).toContain(`Encrypted ${file} to ${file}.enc for ${BOB}`);
    expect(sealed.stdout).toContain(`Signed as: ${SHOWN} = "${ALICE}"`);

    await rm(file);
    const opened = await decrypt(`${file}.enc`);
    expect(opened.stderr).not.toMatch(/error/);
    expect(opened.code).toBe(0);
    expect(await readFile(file, 'utf8')).toBe(content);
    expect(opened.sessions.map((s) => s.purpose)).toEqual(['decrypt']);
    // The header is shown before the session: the sender it claims (nothing of the content is
    // checked yet) and the hidden recipient policy.
    expect(opened.stderr).toContain(`Claimed sender: ${SHOWN} = "${ALICE}"`);
    expect(opened.stderr).not.toContain('Verified');
    expect(opened.stderr).toContain(`  ${BOB}: ${SHOWN} = (hidden)`);
    expect(opened.stdout).toBe(
      `Decrypted ${file}.enc to ${file}\nVerified sender: ${SHOWN} = "${ALICE}"\n${DEMO_NOTE}`,
    );
    expect(await partials()).toEqual([]);
  });

  it('asks the identity server for exactly the recipient policy: types and sealed values', async () => {
    const file = await plainFile();
    const recipients = {
      [CAROL]: [
        { t: EMAIL, v: CAROL },
        { t: FULLNAME, v: 'Carol Cat' },
      ],
    };
    expect((await encrypt(file, recipients)).code).toBe(0);
    const seen: unknown[] = [];
    const opened = await runCliProcess(
      ['dec', '--pkg', pkg.url, '--attr', `${FULLNAME}=Carol Cat`, '-o', join(dir, `carol-${n}`), `${file}.enc`],
      {
        wallet: async (session) =>
          seen.push((await disclose(session, { [EMAIL]: CAROL, [FULLNAME]: 'Carol Cat' })).request.disclose),
      },
    );
    expect(opened.code).toBe(0);
    expect(seen).toEqual([
      [[[{ type: EMAIL, value: CAROL, notNull: true }]], [[{ type: FULLNAME, value: 'Carol Cat', notNull: true }]]],
    ]);
    expect(await readFile(join(dir, `carol-${n}`), 'utf8')).toBe(await readFile(file, 'utf8'));
  });

  it('signs privately as well with --priv-sign-id, and dec reports both identities (--json)', async () => {
    const file = await plainFile();
    const sealed = await runCliProcess(
      [
        'enc',
        '--pkg',
        pkg.url,
        '-i',
        JSON.stringify(forBob),
        '-P',
        JSON.stringify([{ t: EMAIL }]),
        '-S',
        JSON.stringify([{ t: FULLNAME }]),
        '--json',
        file,
      ],
      { wallet: wallet({ [EMAIL]: ALICE, [FULLNAME]: 'Alice Archer' }) },
    );
    expect(sealed.code).toBe(0);
    const summary = JSON.parse(sealed.stdout);
    expect(summary).toMatchObject({
      output: `${file}.enc`,
      recipients: [BOB],
      signedBy: { public: { con: [{ t: EMAIL, v: ALICE }] } },
    });
    expect(summary.signedBy.private.con).toEqual([{ t: FULLNAME, v: 'Alice Archer' }]);

    const opened = await decrypt(`${file}.enc`, { [EMAIL]: BOB }, ['--json', '--progress', '-o', `${file}.out`]);
    expect(opened.code).toBe(0);
    // --progress without a terminal: whole lines, once the decryption (after the session) runs.
    const progressAt = opened.stderr.indexOf('Decrypting: ');
    expect(progressAt).toBeGreaterThan(opened.stderr.indexOf('open this link'));
    // Without a terminal (no QR drawn), the stand-in's simulated wallet is named beside the Yivi link.
    expect(opened.stderr).toMatch(
      /open this link on the phone that has the Yivi app: https:\/\/open\.yivi\.app\/\S+\nOn a development stack \(pg-dev, npm start\), open the simulated wallet instead: (\S+)\n/,
    );
    expect(opened.stderr).toContain(
      `open the simulated wallet instead: ${new URL(pkg.yivi.url).origin}/standin/wallet\n`,
    );
    expect(opened.stderr).toMatch(/\nDecrypting: 100% \d+ B of \d+ B \([^)]*\/s\)\n/);
    const result = JSON.parse(opened.stdout);
    expect(result.recipient).toBe(BOB);
    expect(result.signedBy.public.con).toEqual([{ t: EMAIL, v: ALICE }]);
    expect(result.signedBy.private.con).toEqual([{ t: FULLNAME, v: 'Alice Archer' }]);
  });

  it('picks the recipient with --recipient when the file has several; refuses to guess without a terminal', async () => {
    const file = await plainFile();
    const recipients = { [BOB]: [{ t: EMAIL, v: BOB }], [CAROL]: [{ t: EMAIL, v: CAROL }] };
    expect((await encrypt(file, recipients)).code).toBe(0);

    const unsure = await decrypt(`${file}.enc`, { [EMAIL]: CAROL }, ['-o', `${file}.carol`]);
    expect(unsure.code).toBe(Exit.USAGE);
    expect(unsure.stderr).toContain(
      `pg-cli: error: dec: the file has 2 recipients (${BOB}, ${CAROL}); say which you are with --recipient`,
    );
    expect(unsure.sessions).toEqual([]);

    const opened = await decrypt(`${file}.enc`, { [EMAIL]: CAROL }, ['-o', `${file}.carol`, '--recipient', CAROL]);
    expect(opened.code).toBe(0);
    expect(await readFile(`${file}.carol`, 'utf8')).toBe(await readFile(file, 'utf8'));

    const stranger = await decrypt(`${file}.enc`, { [EMAIL]: 'dave@example.org' }, [
      '-o',
      `${file}.dave`,
      '--recipient',
      'dave@example.org',
    ]);
    expect(stranger.code).toBe(Exit.USAGE);
    expect(stranger.stderr).toContain('--recipient: dave@example.org is not a recipient of this file');
  });

  it('takes the spec-shaped policy entries {t, con} and JSON arguments from @files', async () => {
    const file = await plainFile();
    const policyFile = join(dir, `policy-${n}.json`);
    await writeFile(policyFile, JSON.stringify({ [BOB]: { t: 1_700_000_000, con: [{ t: EMAIL, v: BOB }] } }));
    const sealed = await runCliProcess(
      ['enc', '--pkg', pkg.url, '-i', `@${policyFile}`, '-P', JSON.stringify([{ t: EMAIL }]), file],
      {
        wallet: wallet({ [EMAIL]: ALICE }),
      },
    );
    expect(sealed.code).toBe(0);
    // Sealed at the current time (as pg-cli does), not at the entry's t.
    const bytes = await readFile(`${file}.enc`);
    const unsealer = await StreamUnsealer.new(chunkedSource(bytes), pkg.keys.vk);
    const ts = unsealer.inspect_header().get(BOB)!.ts;
    expect(Math.abs(ts - Date.now() / 1000)).toBeLessThan(120);
  });

  it('needs the value of a hidden attribute that is not an e-mail: --attr, else exit 2 before any session', async () => {
    const file = await plainFile();
    expect((await encrypt(file, { [CAROL]: [{ t: FULLNAME, v: 'Carol Cat' }] })).code).toBe(0);
    const missing = await decrypt(`${file}.enc`, { [FULLNAME]: 'Carol Cat' }, ['-o', `${file}.out`]);
    expect(missing.code).toBe(Exit.USAGE);
    expect(missing.stderr).toContain(
      `pg-cli: error: dec: give the value of ${FULLNAME} with --attr ${FULLNAME}=<value>`,
    );
    expect(missing.sessions).toEqual([]);
    const stray = await decrypt(`${file}.enc`, {}, ['-o', `${file}.out`, '--attr', `${EMAIL}=x@example.org`]);
    expect(stray.code).toBe(Exit.USAGE);
    expect(stray.stderr).toContain(`--attr: ${EMAIL} is not in ${CAROL}'s policy`);
    expect(await exists(`${file}.out`)).toBe(false);
  });
});

describe('failures: exit codes, one line, and no output left behind', () => {
  it('a missing input file → 3', async () => {
    const missing = join(dir, 'no-such-file.txt');
    const sealed = await encrypt(missing);
    expect(sealed.code).toBe(Exit.FILE);
    expect(sealed.stderr).toBe(`pg-cli: error: cannot read ${missing}: no such file\n`);
    const opened = await decrypt(`${missing}.enc`);
    expect(opened.code).toBe(Exit.FILE);
    expect(opened.stderr).toBe(`pg-cli: error: cannot read ${missing}.enc: no such file\n`);
    expect(await exists(`${missing}.enc`)).toBe(false);
  });

  it('an existing output → 3 before any session, the file untouched; --force overwrites it', async () => {
    const file = await plainFile('new content\n');
    await writeFile(`${file}.enc`, 'precious');
    const refused = await encrypt(file);
    expect(refused.code).toBe(Exit.FILE);
    expect(refused.stderr).toBe(`pg-cli: error: ${file}.enc already exists (use --force to overwrite it)\n`);
    expect(refused.sessions).toEqual([]);
    expect(await readFile(`${file}.enc`, 'utf8')).toBe('precious');

    expect((await encrypt(file, forBob, ['--force'])).code).toBe(0);
    const decRefused = await decrypt(`${file}.enc`);
    expect(decRefused.code).toBe(Exit.FILE);
    expect(decRefused.stderr).toBe(`pg-cli: error: ${file} already exists (use --force to overwrite it)\n`);
    expect(await readFile(file, 'utf8')).toBe('new content\n');
    expect(await partials()).toEqual([]);
  });

  it('bad JSON and a misspelled field → 2 with the reason', async () => {
    const file = await plainFile();
    const bad = await runCliProcess(['enc', '--pkg', pkg.url, '-i', '{"bob@example.org": [', '-P', '[]', file]);
    expect(bad.code).toBe(Exit.USAGE);
    expect(bad.stderr).toMatch(/^pg-cli: error: --identity: not valid JSON \(.+\)\n$/);
    const typo = await runCliProcess([
      'enc',
      '--pkg',
      pkg.url,
      '-i',
      JSON.stringify({ [BOB]: [{ t: EMAIL, vaule: BOB }] }),
      '-P',
      JSON.stringify([{ t: EMAIL }]),
      file,
    ]);
    expect(typo.code).toBe(Exit.USAGE);
    expect(typo.stderr).toBe(
      `pg-cli: error: --identity: recipient "${BOB}"[0] has an unknown field "vaule" (allowed: t, v)\n`,
    );
    const signId = await runCliProcess(['enc', '--pkg', pkg.url, '-i', JSON.stringify(forBob), '-P', '{"t": 1}', file]);
    expect(signId.code).toBe(Exit.USAGE);
    expect(signId.stderr).toBe('pg-cli: error: --pub-sign-id: must be a JSON array of {"t": type}, not an object\n');
    const noSigner = await runCliProcess(['enc', '--pkg', pkg.url, '-i', JSON.stringify(forBob), file]);
    expect(noSigner.code).toBe(Exit.USAGE);
    expect(await exists(`${file}.enc`)).toBe(false);
  });

  it('a PKG that is down → 4, for enc and dec, with no output', async () => {
    const down = `http://127.0.0.1:${await closedPort()}`;
    const file = await plainFile();
    const sealed = await runCliProcess([
      'enc',
      '--pkg',
      down,
      '-i',
      JSON.stringify(forBob),
      '-P',
      JSON.stringify([{ t: EMAIL }]),
      file,
    ]);
    expect(sealed.code).toBe(Exit.PKG_UNAVAILABLE);
    expect(sealed.stderr).toMatch(
      /^pg-cli: error: the PKG is unavailable: the PKG could not be reached \(http:\/\/127\.0\.0\.1:\d+\/v2\/parameters\)\n$/,
    );
    expect(await exists(`${file}.enc`)).toBe(false);

    expect((await encrypt(file)).code).toBe(0);
    await rm(file);
    // PKG_URL is the flag's environment twin.
    const opened = await runCliProcess(['dec', `${file}.enc`], { env: { PKG_URL: down } });
    expect(opened.code).toBe(Exit.PKG_UNAVAILABLE);
    expect(opened.stderr).toContain('/v2/sign/parameters');
    expect(await exists(file)).toBe(false);
    expect(await partials()).toEqual([]);
  });

  it('a wrong key (the wallet discloses another e-mail, the PKG issues its key) → 7, no output', async () => {
    const file = await plainFile();
    expect((await encrypt(file)).code).toBe(0);
    await rm(file);
    const eve = 'eve@example.org';
    const opened = await decrypt(`${file}.enc`, { [EMAIL]: eve }, ['--attr', `${EMAIL}=${eve}`]);
    expect(opened.code).toBe(Exit.WRONG_KEY);
    expect(opened.stderr).toContain('pg-cli: error: the key for the identity you disclosed does not open this file');
    expect(await exists(file)).toBe(false);
    expect(await partials()).toEqual([]);
  });

  it('a tampered or truncated file → 8, no output; a file that is not PostGuard → 3', async () => {
    // Big enough for several segments, so plaintext is written before the damage is found.
    const content = new Uint8Array(3 * 256 * 1024 + 17).map((_, i) => i * 7);
    const file = await plainFile(content);
    expect((await encrypt(file)).code).toBe(0);
    await rm(file);
    const sealed = await readFile(`${file}.enc`);

    const tampered = Uint8Array.from(sealed);
    tampered[tampered.length - 300_000]! ^= 1;
    await writeFile(`${file}.enc`, tampered);
    const opened = await decrypt(`${file}.enc`);
    expect(opened.code).toBe(Exit.DAMAGED);
    expect(opened.stderr).toMatch(/pg-cli: error: the encrypted file is damaged or was changed \(TAMPERED\)/);
    expect(await exists(file)).toBe(false);

    await writeFile(`${file}.enc`, sealed.subarray(0, sealed.length - 1000));
    const truncated = await decrypt(`${file}.enc`);
    expect(truncated.code).toBe(Exit.DAMAGED);
    expect(await exists(file)).toBe(false);

    await writeFile(`${file}.enc`, 'just some text, not a ciphertext');
    const foreign = await decrypt(`${file}.enc`);
    expect(foreign.code).toBe(Exit.FILE);
    expect(foreign.stderr).toBe('pg-cli: error: the input is not a PostGuard encrypted file\n');
    expect(foreign.sessions).toEqual([]);
    expect(await partials()).toEqual([]);
  });

  it('a session cancelled in the Yivi app → 6, no output', async () => {
    const file = await plainFile();
    const sealed = await runCliProcess(
      ['enc', '--pkg', pkg.url, '-i', JSON.stringify(forBob), '-P', JSON.stringify([{ t: EMAIL }]), file],
      {
        wallet: (session) => cancel(session),
      },
    );
    expect(sealed.code).toBe(Exit.SESSION);
    expect(sealed.stderr).toContain('pg-cli: error: the identity session was cancelled\n');
    expect(await exists(`${file}.enc`)).toBe(false);
  });

  it('a --qr-json descriptor that is not open → 2, and the session it could not announce is cancelled', async () => {
    const file = await plainFile();
    const before = (await (await fetch(`${pkg.yivi.url}/standin/sessions`)).json()).sessions.length;
    const result = await runCliProcess(
      [
        'enc',
        '--pkg',
        pkg.url,
        '-i',
        JSON.stringify(forBob),
        '-P',
        JSON.stringify([{ t: EMAIL }]),
        '--qr-json',
        '9',
        file,
      ],
      {
        noPointerFd: true,
      },
    );
    expect(result.code).toBe(Exit.USAGE);
    expect(result.stderr).toMatch(/pg-cli: error: --qr-json: cannot write to file descriptor 9: /);
    expect((await (await fetch(`${pkg.yivi.url}/standin/sessions`)).json()).sessions).toHaveLength(before);
  });

  it('a session nobody completes → 6 after --session-timeout, and the CLI cancels it', async () => {
    const file = await plainFile();
    const started = Date.now();
    const sealed = await runCliProcess([
      'enc',
      '--pkg',
      pkg.url,
      '-i',
      JSON.stringify(forBob),
      '-P',
      JSON.stringify([{ t: EMAIL }]),
      '--session-timeout',
      '1',
      file,
    ]);
    expect(sealed.code).toBe(Exit.SESSION);
    expect(sealed.stderr).toContain('pg-cli: error: the identity session was not completed within 1 s\n');
    expect(Date.now() - started).toBeLessThan(15_000);
    const pending = await (await fetch(`${pkg.yivi.url}/standin/sessions`)).json();
    expect(
      pending.sessions.filter(
        (s: { sessionPtr: { u: string } }) => s.sessionPtr.u === sealed.sessions[0]!.sessionPtr.u,
      ),
    ).toEqual([]);
  });

  it.each([
    ['SIGTERM', Exit.SIGTERM],
    ['SIGINT', Exit.SIGINT],
  ] as const)(
    '%s while waiting for the session: exit %i and the session is cancelled at the identity server',
    async (signal, exitCode) => {
      const file = await plainFile();
      const cli = startCli(
        ['enc', '--pkg', pkg.url, '-i', JSON.stringify(forBob), '-P', JSON.stringify([{ t: EMAIL }]), file],
        {
          wallet: async () => cli.child.kill(signal),
        },
      );
      const result = await cli.result;
      expect(result.code).toBe(exitCode);
      expect(result.stderr).toContain(`pg-cli: error: interrupted (${signal}); no output was written\n`);
      const status = await fetch(`${result.sessions[0]!.sessionPtr.u}/status`);
      expect(await status.json()).toBe('CANCELLED');
      expect(await exists(`${file}.enc`)).toBe(false);
    },
  );

  it('SIGTERM while writing the plaintext: exit 143 and the partial output is removed', async () => {
    const size = 160 << 20;
    const file = await plainFile(new Uint8Array(size).fill(42));
    expect((await encrypt(file)).code).toBe(0);
    await rm(file);
    let sawPartial = false;
    const cli = startCli(['dec', '--pkg', pkg.url, `${file}.enc`], {
      wallet: async (session) => {
        await disclose(session, { [EMAIL]: BOB });
        for (let i = 0; i < 2000 && !sawPartial; i++) {
          if ((await partials()).length > 0) sawPartial = true;
          else await new Promise((r) => setTimeout(r, 2));
        }
        cli.child.kill('SIGTERM');
      },
    });
    const result = await cli.result;
    expect(sawPartial).toBe(true);
    expect(result.code).toBe(Exit.SIGTERM);
    expect(await partials()).toEqual([]);
    expect(await exists(file)).toBe(false);
    await rm(`${file}.enc`);
  });
});
