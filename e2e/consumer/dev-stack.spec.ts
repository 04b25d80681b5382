import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from '@playwright/test';
import { disclose } from '../../devtools/standin/wallet.js';
import { ROOT, packAll, type Packed } from '../../scripts/packages.js';

/**
 * PostGuard from npm alone: the packed postguard-ts, @postguard-ts/pkg, @postguard-ts/dev and
 * @postguard-ts/cli installed into a fresh folder, `pg-dev` started there as devtools/README.md says,
 * its three servers answering, a file sealed and opened with `pg-cli` against it (the stand-in's wallet
 * played from here, where a person would use its page), and a clean stop on SIGTERM.
 */

const EMAIL = 'pbdf.sidn-pbdf.email.email';

let work: string;
let app: string;
let packs: Packed[];
let dev: ChildProcess | undefined;

const run = (command: string, args: string[], cwd: string): string =>
  execFileSync(command, args, {
    cwd,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, npm_config_update_notifier: 'false' },
  });

const tarball = (name: string) => packs.find((p) => p.name === name)!.tarball;

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

const exited = (child: ChildProcess): Promise<Exit> =>
  child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve({ code: child.exitCode, signal: child.signalCode })
    : new Promise((done) => child.once('exit', (code, signal) => done({ code, signal })));

/** Runs the installed pg-cli; plays the stand-in wallet for each session it announces on --qr-json. */
async function pgCli(args: string[], values: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const qr = join(app, `qr-${Date.now()}.jsonl`);
  writeFileSync(qr, '');
  const child = spawn(join(app, 'node_modules', '.bin', 'pg-cli'), [...args, '--qr-json', qr, '--no-qr'], {
    cwd: app,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const done = exited(child);
  let answered = 0;
  let finished = false;
  void done.then(() => (finished = true));
  while (!finished) {
    const lines = readFileSync(qr, 'utf8').split('\n').filter(Boolean);
    for (const line of lines.slice(answered)) {
      const { sessionPtr } = JSON.parse(line) as { sessionPtr: object };
      expect((await disclose(sessionPtr, values)).proofStatus).toBe('VALID');
      answered++;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const { code } = await done;
  expect(answered, output).toBe(1);
  return { code, output };
}

test.describe.configure({ mode: 'serial' });

test.beforeAll(() => {
  test.setTimeout(600_000);
  if (
    process.env['CONSUMER_SKIP_BUILD'] !== '1' ||
    !existsSync(join(ROOT, 'devtools', 'dist', 'dev', 'main.js')) ||
    !existsSync(join(ROOT, 'server', 'dist', 'main.js'))
  ) {
    run('npm', ['run', 'build'], ROOT);
  }
  work = mkdtempSync(join(tmpdir(), 'pg-dev-stack-'));
  packs = packAll(join(work, 'packs'));
  app = join(work, 'trial');
  mkdirSync(app);
  const dependencies = Object.fromEntries(
    ['postguard-ts', '@postguard-ts/pkg', '@postguard-ts/dev', '@postguard-ts/cli'].map((n) => [n, tarball(n)]),
  );
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'trial', private: true, dependencies }, null, 2));
  run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], app);
});

test.afterAll(async () => {
  if (dev !== undefined && dev.exitCode === null && dev.signalCode === null) {
    dev.kill('SIGKILL');
    await exited(dev);
  }
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

test('pg-dev from the installed packages: PKG, stand-in and storage answer; pg-cli seals and opens; SIGTERM stops it all', async () => {
  test.setTimeout(300_000);
  const child = spawn(
    join(app, 'node_modules', '.bin', 'pg-dev'),
    ['--pkg-port', '0', '--standin-port', '0', '--storage-port', '0'],
    { cwd: app, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  dev = child;
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  await expect.poll(() => stdout, { timeout: 60_000, message: stderr }).toContain('Ctrl-C stops everything.');
  const url = (label: string) => new RegExp(`^  ${label} +(http://\\S+)`, 'm').exec(stdout)?.[1];
  const pkg = url('PKG')!;
  const wallet = url('simulated wallet')!;
  const storage = url('storage stand-in')!;
  const keyDir = /^ {2}keys +(\S+)/m.exec(stdout)![1]!;
  expect(
    [pkg, wallet, storage].every((u) => u?.startsWith('http://127.0.0.1:')),
    stdout,
  ).toBe(true);

  expect(await (await fetch(`${pkg}/health`)).text()).toBe('OK');
  expect((await (await fetch(`${pkg}/v2/parameters`)).json()) as object).toHaveProperty('publicKey');
  const page = await fetch(wallet);
  expect(page.status).toBe(200);
  expect(page.headers.get('content-type')).toMatch(/^text\/html/);
  expect(await (await fetch(`${storage}/health`)).text()).toBe('OK');
  expect(await (await fetch(`${storage}/standin/outbox`)).json()).toEqual({ mails: [] });
  expect(existsSync(join(keyDir, 'pkg_ibe.sec'))).toBe(true);

  const text = 'tried from npm alone\n';
  writeFileSync(join(app, 'note.txt'), text);
  const sealed = await pgCli(
    [
      'enc',
      '-p',
      pkg,
      '-i',
      JSON.stringify({ 'bob@example.org': [{ t: EMAIL, v: 'bob@example.org' }] }),
      '-P',
      JSON.stringify([{ t: EMAIL }]),
      'note.txt',
    ],
    { [EMAIL]: 'alice@example.org' },
  );
  expect(sealed.code, sealed.output).toBe(0);
  const opened = await pgCli(['dec', '-p', pkg, '-o', 'note-copy.txt', 'note.txt.enc'], {
    [EMAIL]: 'bob@example.org',
  });
  expect(opened.code, opened.output).toBe(0);
  expect(opened.output).toContain('alice@example.org');
  expect(readFileSync(join(app, 'note-copy.txt'), 'utf8')).toBe(text);

  child.kill('SIGTERM');
  expect(await exited(child)).toEqual({ code: 0, signal: null });
  await expect(fetch(`${pkg}/health`)).rejects.toThrow();
  await expect(fetch(`${storage}/health`)).rejects.toThrow();
  expect(existsSync(keyDir), 'the temporary key directory is removed').toBe(false);
});
