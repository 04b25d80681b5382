import { execFileSync, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test, type Page } from '@playwright/test';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from '../../lib/keys.js';
import { ROOT, packAll, packageJson, type Packed } from '../../scripts/packages.js';
import type { ConsumerApi, ConsumerKeys } from './apps/web/page.js';
import { serveStatic as startStatic, type StaticServer } from './static-server.js';

/**
 * What users install is what we test: the packed tarballs (not the workspace) installed into fresh
 * apps outside the source tree, each using only what the packages' READMEs say:
 *   vite      a Vite app with `postguard()` from postguard-ts/vite: worker and service worker
 *   esbuild   a plain esbuild bundle, the two ready-built scripts copied next to it
 *   node      a Node app with the SDK, the library and the CLI
 * (no-bundler.spec.ts: a page with no build step, on every engine.)
 * The apps' sources are in apps/; installs use the npm cache (--prefer-offline).
 */

const APPS = join(ROOT, 'e2e', 'consumer', 'apps');
const SERVER_ONLY = ['@postguard-ts/pkg', 'fastify', 'pg', 'ioredis', 'jose', 'prom-client', '@fastify/cors'];
const EMAIL = 'pbdf.sidn-pbdf.email.email';

let work: string;
let viteApp: string | undefined;
let packs: Packed[];
const servers: StaticServer[] = [];

const run = (command: string, args: string[], cwd: string): string =>
  execFileSync(command, args, {
    cwd,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, npm_config_update_notifier: 'false' },
  });

const tarball = (name: string) => packs.find((p) => p.name === name)!.tarball;

function newApp(name: string, dependencies: Record<string, string>, files: string[]): string {
  const dir = join(work, name);
  mkdirSync(dir, { recursive: true });
  for (const file of files) cpSync(join(APPS, file), join(dir, file.split('/').pop()!));
  writeFileSync(
    join(dir, 'package.json'),
    JSON.stringify({ name: `consumer-${name}`, private: true, type: 'module', dependencies }, null, 2),
  );
  run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], dir);
  return dir;
}

const rootVersion = (name: string): string => {
  const manifest = JSON.parse(readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as {
    version: string;
  };
  return manifest.version;
};

/** A static file server on loopback (what a user's host would be), closed after the suite. */
async function serveStatic(dir: string): Promise<string> {
  const server = await startStatic(dir);
  servers.push(server);
  return server.url;
}

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

function keys(): ConsumerKeys {
  const kem = generateKemKeys();
  const ibs = generateSigningKeys();
  const alice = { ts: 1_700_000_000, con: [{ t: EMAIL, v: 'alice@example.com' }] };
  const bob = { ts: 1_700_000_000, con: [{ t: EMAIL, v: 'bob@example.com' }] };
  return {
    mpk: kem.mpk,
    vk: ibs.vk,
    usk: extractUsk(kem.msk, bob),
    policy: { bob },
    pubSignKey: { key: extractSigningKey(ibs.sk, alice), policy: alice },
  };
}

/** The production dependency tree an app got from postguard-ts, and the bins it installed. */
function installedTree(dir: string): { names: string[]; bins: string[] } {
  const names = readdirSync(join(dir, 'node_modules')).flatMap((entry) =>
    entry.startsWith('@') ? readdirSync(join(dir, 'node_modules', entry)).map((sub) => `${entry}/${sub}`) : [entry],
  );
  const binDir = join(dir, 'node_modules', '.bin');
  return { names, bins: existsSync(binDir) ? readdirSync(binDir) : [] };
}

async function exercise(page: Page, origin: string): Promise<void> {
  await page.goto(origin);
  await expect(page.locator('body[data-ready="true"]')).toHaveCount(1);
  const k = keys();
  const text = 'hello from an installed postguard-ts';
  const result = await page.evaluate(
    ([k, text]) => (globalThis as unknown as { consumer: ConsumerApi }).consumer.roundTrip(k, text),
    [k, text] as const,
  );
  expect(result).toEqual({ memory: text, stream: text, sender: 'alice@example.com' });
  const download = await page.evaluate(
    ([k, text]) => (globalThis as unknown as { consumer: ConsumerApi }).consumer.download(k, text),
    [k, text] as const,
  );
  expect(download.body).toBe(text);
  expect(download.contentType).toMatch(/^text\/plain/);
}

test.describe.configure({ mode: 'serial' });

test.beforeAll(async () => {
  test.setTimeout(600_000);
  if (
    process.env['CONSUMER_SKIP_BUILD'] !== '1' ||
    !existsSync(join(ROOT, 'lib', 'dist', 'browser', 'postguard-sw.js'))
  ) {
    run('npm', ['run', 'build'], ROOT);
  }
  work = mkdtempSync(join(tmpdir(), 'pg-consumers-'));
  packs = packAll(join(work, 'packs'));
});

test.afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

test('a Vite app: postguard() gives it the worker and the service worker; strict types compile', async ({ page }) => {
  test.setTimeout(300_000);
  const dir = newApp('vite', { 'postguard-ts': tarball('postguard-ts'), vite: rootVersion('vite') }, [
    'web/index.html',
    'web/page.ts',
    'web/vite-main.ts',
    'web/esbuild-main.ts',
    'web/types.ts',
    'web/vite.config.js',
    'web/tsconfig.json',
  ]);
  // skipLibCheck false, lib ES2022 + DOM: every browser entry's .d.ts compiles.
  run(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', dir], dir);
  run(process.execPath, [join(dir, 'node_modules', 'vite', 'bin', 'vite.js'), 'build', '--logLevel', 'error'], dir);
  viteApp = dir;
  const built = join(dir, 'dist');
  expect(existsSync(join(built, 'postguard-sw.js'))).toBe(true);
  const tree = installedTree(dir);
  for (const name of SERVER_ONLY) expect(tree.names).not.toContain(name);
  expect(tree.bins.filter((b) => b.startsWith('pg-'))).toEqual([]);
  await exercise(page, await serveStatic(built));
});

test('the same Vite app on the dev server: the plugin serves the service worker, the worker is found', async ({
  page,
}) => {
  test.setTimeout(180_000);
  // Runs after the build test (serial mode), on the app that test installed.
  expect(viteApp, 'the Vite app was installed by the test before').toBeDefined();
  const port = await freePort();
  const dev = spawn(
    process.execPath,
    [
      join(viteApp!, 'node_modules', 'vite', 'bin', 'vite.js'),
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--strictPort',
    ],
    {
      cwd: viteApp,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  try {
    const origin = `http://127.0.0.1:${port}`;
    for (let i = 0; ; i++) {
      const ok = await fetch(origin).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      if (i > 120) throw new Error('the Vite dev server did not start');
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const sw = await fetch(`${origin}/postguard-sw.js`);
    expect(sw.headers.get('content-type')).toMatch(/^text\/javascript/);
    await exercise(page, origin);
  } finally {
    dev.kill();
  }
});

test('an esbuild app: the ready-built crypto worker and service worker, copied', async ({ page }) => {
  test.setTimeout(300_000);
  const dir = newApp('esbuild', { 'postguard-ts': tarball('postguard-ts'), esbuild: rootVersion('esbuild') }, [
    'web/page.ts',
    'web/esbuild-main.ts',
  ]);
  const out = join(dir, 'public');
  mkdirSync(out);
  run(
    join(dir, 'node_modules', '.bin', 'esbuild'),
    ['esbuild-main.ts', '--bundle', '--format=esm', `--outfile=${join(out, 'main.js')}`, '--log-level=error'],
    dir,
  );
  const scripts = join(dir, 'node_modules', 'postguard-ts', 'dist', 'browser');
  cpSync(join(scripts, 'postguard-crypto-worker.js'), join(out, 'postguard-crypto-worker.js'));
  cpSync(join(scripts, 'postguard-sw.js'), join(out, 'postguard-sw.js'));
  writeFileSync(
    join(out, 'index.html'),
    '<!doctype html><html><body><script type="module" src="/main.js"></script></body></html>',
  );
  const tree = installedTree(dir);
  for (const name of SERVER_ONLY) expect(tree.names).not.toContain(name);
  expect(tree.bins.filter((b) => b.startsWith('pg-'))).toEqual([]);
  await exercise(page, await serveStatic(out));
});

test('a Node app: the SDK and the library; pg-cli from any directory', async () => {
  test.setTimeout(300_000);
  const dir = newApp(
    'node',
    {
      '@postguard-ts/sdk': tarball('@postguard-ts/sdk'),
      '@postguard-ts/cli': tarball('@postguard-ts/cli'),
      'postguard-ts': tarball('postguard-ts'),
    },
    ['node/sdk.mjs'],
  );
  const out = JSON.parse(run(process.execPath, ['sdk.mjs'], dir)) as Record<string, unknown>;
  expect(out).toEqual({
    plain: 'hi from node',
    sender: 'alice@example.com',
    sdk: true,
    version: packageJson('sdk')['version'],
  });

  const cli = join(dir, 'node_modules', '.bin', 'pg-cli');
  const elsewhere = mkdtempSync(join(tmpdir(), 'pg-cli-cwd-'));
  try {
    expect(run(cli, ['--version'], elsewhere).trim()).toBe(`pg-cli ${packageJson('cli')['version']}`);
    writeFileSync(join(elsewhere, 'notes.enc'), 'not a ciphertext');
    let failure: { status?: number; stderr?: string } = {};
    try {
      run(cli, ['dec', '--pkg', 'http://127.0.0.1:9', 'notes.enc'], elsewhere);
    } catch (error) {
      failure = error as typeof failure;
    }
    expect(failure.status).toBe(3);
    expect(failure.stderr).toBe('pg-cli: error: the input is not a PostGuard encrypted file\n');
  } finally {
    rmSync(elsewhere, { recursive: true, force: true });
  }
});
