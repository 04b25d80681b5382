import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from '@playwright/test';
import { disclose } from '../../devtools/standin/wallet.js';
import { ROOT } from '../../scripts/packages.js';

/**
 * PostGuard without the repository's sources, by README.md's route while the packages are not on
 * the registry ("Without the clone: installing the packages"): `npm run pack` in the repository, then
 * in an empty folder `npm init -y` and one `npm install` of packs/*.tgz (the shell's glob), then
 * `npx pg-dev` as devtools/README.md says: its three servers answering, a file sealed and opened
 * with `npx pg-cli` against it (the stand-in's wallet played from here, where a person would use its
 * page), and a clean stop on Ctrl-C (SIGINT to the terminal's process group: npx and pg-dev).
 */

const EMAIL = 'pbdf.sidn-pbdf.email.email';

let work: string;
let app: string;
let dev: ChildProcess | undefined;

const run = (command: string, args: string[], cwd: string): string =>
  execFileSync(command, args, {
    cwd,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, npm_config_update_notifier: 'false' },
  });

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
  const child = spawn('npx', ['pg-cli', ...args, '--qr-json', qr, '--no-qr'], {
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
  // README.md's `npm run pack` builds, then packs; with CONSUMER_SKIP_BUILD=1 (the build is fresh) its packing step alone.
  if (process.env['CONSUMER_SKIP_BUILD'] === '1' && existsSync(join(ROOT, 'devtools', 'dist', 'dev', 'main.js')))
    run(process.execPath, ['--import', 'tsx', join(ROOT, 'scripts', 'pack.ts')], ROOT);
  else run('npm', ['run', 'pack'], ROOT);
  work = mkdtempSync(join(tmpdir(), 'pg-dev-stack-'));
  app = join(work, 'pg-try');
  mkdirSync(app);
  expect(readdirSync(app)).toEqual([]);
  run('npm', ['init', '-y'], app);
  // One install line, the glob expanded by the shell as in the README.
  run(
    'sh',
    ['-c', `npm install --prefer-offline --no-audit --no-fund --loglevel=error '${join(ROOT, 'packs')}'/*.tgz`],
    app,
  );
  const installed = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8')) as { dependencies: object };
  expect(Object.keys(installed.dependencies).sort()).toEqual([
    '@postguard-ts/cli',
    '@postguard-ts/dev',
    '@postguard-ts/pkg',
    '@postguard-ts/sdk',
    'postguard-ts',
  ]);
});

test.afterAll(async () => {
  if (dev?.pid !== undefined) {
    // The whole group, npx and the pg-dev and PKG under it, even if npx itself has ended.
    try {
      process.kill(-dev.pid, 'SIGKILL');
    } catch {
      // nothing left of it
    }
    await exited(dev);
  }
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

test('README route: npm run pack, one npm install in an empty folder; npx pg-dev answers, npx pg-cli seals and opens; Ctrl-C stops it all', async () => {
  test.setTimeout(300_000);
  // A process group of its own, as a terminal gives a command: Ctrl-C signals npx and pg-dev alike.
  const child = spawn('npx', ['pg-dev', '--pkg-port', '0', '--standin-port', '0', '--storage-port', '0'], {
    detached: true,
    cwd: app,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
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

  // Ctrl-C: SIGINT to the whole group. npx's own exit status is npm's affair; pg-dev's clean stop
  // shows in what it leaves: nothing listening, the temporary keys removed (only its close() does that).
  process.kill(-child.pid!, 'SIGINT');
  await exited(child);
  const down = (url: string) =>
    fetch(url).then(
      () => false,
      () => true,
    );
  await expect.poll(() => down(`${pkg}/health`), { timeout: 15_000 }).toBe(true);
  await expect.poll(() => down(`${storage}/health`), { timeout: 15_000 }).toBe(true);
  await expect
    .poll(() => existsSync(keyDir), { timeout: 15_000, message: 'the temporary key directory is removed' })
    .toBe(false);
});
