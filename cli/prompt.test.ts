import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { disclose } from '../devtools/standin/wallet.js';
import { startPkg, type RunningPkg } from '../server/testing.js';
import type { CliIo } from './args.js';
import { disclosureFor } from './dec.js';
import { CliError, Exit } from './exit.js';
import { Prompter } from './prompt.js';
import { runCli } from './run.js';
import { realClock, runCliProcess, type SessionLine } from './testing.js';

const EMAIL = 'irma-demo.sidn-pbdf.email.email';
const FULLNAME = 'irma-demo.gemeente.personalData.fullname';
const MOBILE = 'pbdf.sidn-pbdf.mobilenumber.mobilenumber';

function prompter(answers: string, end = true, signal?: AbortSignal) {
  const input = new PassThrough();
  input.write(answers);
  if (end) input.end();
  let shown = '';
  return { prompter: new Prompter(input, { write: (t) => void (shown += t) }, signal), shown: () => shown };
}

describe('Prompter', () => {
  it('asks for a number until it gets one in range (or an exact label)', async () => {
    const { prompter: p, shown } = prompter('0\nfive\n2\ncarol@x\n');
    expect(await p.choose('Who?', ['bob@x', 'carol@x'])).toBe('carol@x');
    expect(shown()).toBe(`${'Who?\n  1) bob@x\n  2) carol@x\nNumber [1-2]: '.repeat(3)}`);
    expect(await p.choose('Who?', ['bob@x', 'carol@x'])).toBe('carol@x');
    p.close();
  });

  it('takes the default on an empty answer and asks again when the check complains', async () => {
    const { prompter: p, shown } = prompter('\n0699\n  0612345678  \n');
    expect(await p.text('E-mail', 'bob@x')).toBe('bob@x');
    const check = (v: string) => (v.length === 10 ? undefined : 'ten digits please');
    expect(await p.text('Phone', undefined, check)).toBe('0612345678');
    expect(shown()).toBe('E-mail [bob@x]: Phone: ten digits please\nPhone: ');
    p.close();
  });

  it('fails with a usage error when the input ends, and with the reason when aborted', async () => {
    const ended = prompter('');
    const error = await ended.prompter.text('Name').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CliError);
    expect((error as CliError).exitCode).toBe(Exit.USAGE);

    const controller = new AbortController();
    const waiting = prompter('', false, controller.signal);
    const answer = waiting.prompter.text('Name');
    controller.abort('SIGINT');
    await expect(answer).rejects.toBe('SIGINT');
    waiting.prompter.close();
  });
});

describe('disclosureFor: what dec asks the identity server for', () => {
  const hidden = { ts: 7, con: [{ t: EMAIL, v: '' }, { t: MOBILE, v: '061234****' }, { t: FULLNAME }] };

  it('the policy in order: given values, the e-mail default, and no value where any value was sealed', async () => {
    expect(await disclosureFor('bob@x.org', hidden, new Map([[MOBILE, '0612345678']]), undefined)).toEqual([
      { t: EMAIL, v: 'bob@x.org' },
      { t: MOBILE, v: '0612345678' },
      { t: FULLNAME },
    ]);
  });

  it('refuses a value that does not fit the hint, a stray --attr, and a missing value without a terminal', async () => {
    await expect(disclosureFor('bob@x.org', hidden, new Map([[MOBILE, '0699999999']]), undefined)).rejects.toThrow(
      `--attr ${MOBILE}: "0699999999" does not fit the hint "061234****"`,
    );
    await expect(
      disclosureFor(
        'bob@x.org',
        hidden,
        new Map([
          [MOBILE, '0612345678'],
          ['x.y.z.w', '1'],
        ]),
        undefined,
      ),
    ).rejects.toThrow(`--attr: x.y.z.w is not in bob@x.org's policy`);
    await expect(disclosureFor('bob@x.org', hidden, new Map(), undefined)).rejects.toThrow(
      `dec: give the value of ${MOBILE} with --attr ${MOBILE}=<value>`,
    );
    await expect(disclosureFor('bob@x.org', { ts: 7, con: [] }, new Map(), undefined)).rejects.toThrow(
      'has no attributes',
    );
  });

  it('on a terminal asks for each hidden value, showing the default and the hint', async () => {
    const { prompter: p, shown } = prompter('\n0699999999\n0612345678\n');
    expect(await disclosureFor('bob@x.org', hidden, new Map(), () => p)).toEqual([
      { t: EMAIL, v: 'bob@x.org' },
      { t: MOBILE, v: '0612345678' },
      { t: FULLNAME },
    ]);
    expect(shown()).toBe(
      `Enter value for ${EMAIL} [bob@x.org]: ` +
        `Enter value for ${MOBILE} (hint: 061234****): ${MOBILE}: "0699999999" does not fit the hint "061234****"\n` +
        `Enter value for ${MOBILE} (hint: 061234****): `,
    );
    p.close();
  });
});

describe('pg-cli dec on a terminal (in-process, stdin a TTY)', () => {
  let pkg: RunningPkg;
  let dir: string;

  beforeAll(async () => {
    pkg = await startPkg({ clock: realClock() });
    dir = await mkdtemp(join(tmpdir(), 'pg-cli-tty-'));
  });

  afterAll(async () => {
    await pkg?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('asks which recipient you are and the hidden values, then decrypts', async () => {
    const file = join(dir, 'memo.txt');
    await writeFile(file, 'for Carol\n');
    const recipients = {
      'bob@example.org': [{ t: EMAIL, v: 'bob@example.org' }],
      'carol@example.org': [
        { t: EMAIL, v: 'carol@example.org' },
        { t: FULLNAME, v: 'Carol Cat' },
      ],
    };
    const sealed = await runCliProcess(
      ['enc', '--pkg', pkg.url, '-i', JSON.stringify(recipients), '-P', JSON.stringify([{ t: EMAIL }]), file],
      {
        wallet: (s) => disclose(s, { [EMAIL]: 'alice@example.org' }),
      },
    );
    expect(sealed.code).toBe(0);
    await rm(file);

    const stdin = Object.assign(new PassThrough(), { isTTY: true });
    stdin.write('2\n\nCarol Cat\n');
    let stderr = '';
    let stdout = '';
    const pointers = join(dir, 'sessions.jsonl');
    const io: CliIo = {
      stdin,
      stdout: { isTTY: false, write: (t) => void (stdout += t) },
      stderr: { isTTY: false, write: (t) => void (stderr += t) },
      env: {},
      signal: new AbortController().signal,
      version: '0.0.0-test',
    };
    const wallet = (async () => {
      for (;;) {
        const text = await readFile(pointers, 'utf8').catch(() => '');
        if (text.includes('\n'))
          return disclose(JSON.parse(text) as SessionLine, { [EMAIL]: 'carol@example.org', [FULLNAME]: 'Carol Cat' });
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    const code = await runCli(['dec', '--pkg', pkg.url, '--qr-json', pointers, `${file}.enc`], io);
    const report = await wallet;
    expect(stderr).not.toMatch(/error/);
    expect(code).toBe(0);
    expect(await readFile(file, 'utf8')).toBe('for Carol\n');
    expect(stderr).toContain(
      "What's your recipient identifier?\n  1) bob@example.org\n  2) carol@example.org\nNumber [1-2]: ",
    );
    expect(stderr).toContain(`Enter value for ${EMAIL} [carol@example.org]: Enter value for ${FULLNAME}: `);
    expect(report.request.disclose).toEqual([
      [[{ type: EMAIL, value: 'carol@example.org', notNull: true }]],
      [[{ type: FULLNAME, value: 'Carol Cat', notNull: true }]],
    ]);
    expect(stdout).toContain(
      'Verified sender: irma-demo.sidn-pbdf.email.email (demo credential) = "alice@example.org"',
    );
    expect(stdout).toContain('Note: Demo credentials: anyone can issue these');
  });
});
