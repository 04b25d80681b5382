import { execFileSync } from 'node:child_process';
import { copyFile, cp, mkdir, rm, symlink } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { build, preview } from 'vite';
import { launch, type EngineBrowser, type EnginePage, type Engine } from '../e2e/engines/driver.js';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from '../lib/keys.js';
import type { BenchKeys } from './browser/main.js';

/**
 * The cross-engine benchmark page (bench/browser/engines.html), built as an app builds it, served,
 * opened in an engine, and the keys it is driven with: shared by `npm run bench:browser` and the
 * scripts that look deeper (sw-cpu.ts, sw-variants.ts, sw-profile.ts, worker-phases.ts).
 */

const repo = fileURLToPath(new URL('..', import.meta.url));
const PG_WASM = `${repo}node_modules/@e4a/pg-wasm/web/index_bg.wasm`;

/** A fresh master key pair, a recipient's key and a sender's signing key. */
export function makeKeys(): BenchKeys {
  const kem = generateKemKeys();
  const ibs = generateSigningKeys();
  const ts = Math.floor(Date.now() / 1000);
  const email = 'pbdf.sidn-pbdf.email.email';
  const recipient = { ts, con: [{ t: email, v: 'alice@example.org' }] };
  const sender = { ts, con: [{ t: email, v: 'bob@example.org' }] };
  return {
    mpk: kem.mpk,
    vk: ibs.vk,
    rid: 'alice@example.org',
    usk: extractUsk(kem.msk, recipient),
    options: {
      policy: { 'alice@example.org': recipient },
      pubSignKey: { key: extractSigningKey(ibs.sk, sender), policy: sender },
    },
  };
}

/**
 * Builds the page from `tree` (the working tree, or a commit's export: its own source aliases and
 * Vite plugin) into `outDir`, with pg-wasm's module beside it.
 */
export async function buildEnginesPage(tree: string, outDir: string): Promise<void> {
  const { sourceAliases } = (await import(
    `${tree}scripts/source-aliases.ts`
  )) as typeof import('../scripts/source-aliases.js');
  const { postguardFromSources } = (await import(
    `${tree}lib/build/bundles.ts`
  )) as typeof import('../lib/build/bundles.js');
  await rm(outDir, { recursive: true, force: true });
  await build({
    configFile: false,
    root: `${tree}bench/browser/`,
    logLevel: 'error', // not rolldown's plugin-timing notes
    resolve: { alias: sourceAliases('portable') },
    worker: { format: 'es' },
    plugins: [postguardFromSources()],
    build: {
      outDir,
      emptyOutDir: true,
      target: 'es2022',
      minify: false,
      sourcemap: false,
      rollupOptions: { input: `${tree}bench/browser/engines.html` },
    },
  });
  // pg-wasm's web build fetches its module from a URL we give it: serve the package's own file.
  await mkdir(outDir, { recursive: true });
  await copyFile(PG_WASM, `${outDir}pg-wasm_bg.wasm`);
}

/**
 * The sources the page is built from: the working tree, or (`ref`) lib/, worker/ and
 * scripts/source-aliases.ts of a commit, exported with git archive beside this benchmark's own page
 * files, so that a figure names its commit while others edit the tree (and a tree in the middle of
 * an edit does not stop the run). The service worker is built by that tree's own Vite plugin.
 */
export async function enginesPageSources(ref: string | undefined): Promise<{ tree: string; label: string }> {
  const git = (...argv: string[]) => execFileSync('git', ['-C', repo, ...argv], { encoding: 'utf8' }).trim();
  if (ref === undefined || ref === '') {
    const dirty = git('status', '--porcelain', '--', 'lib', 'worker').split('\n').filter(Boolean).length;
    const label = `working tree at ${git('rev-parse', '--short', 'HEAD')}${dirty ? ` + ${dirty} uncommitted files in lib/ worker/` : ''}`;
    return { tree: repo, label };
  }
  const sha = git('rev-parse', '--verify', `${ref}^{commit}`);
  const tree = `${repo}tmp/bench-src/${sha}/`;
  await rm(tree, { recursive: true, force: true });
  await mkdir(`${tree}bench`, { recursive: true });
  execFileSync('sh', [
    '-c',
    `git -C "${repo}" archive ${sha} lib worker scripts/source-aliases.ts | tar -x -C "${tree}"`,
  ]);
  await cp(`${repo}bench/browser`, `${tree}bench/browser`, { recursive: true });
  await cp(`${repo}bench/shake-core.ts`, `${tree}bench/shake-core.ts`);
  await symlink(`${repo}node_modules`, `${tree}node_modules`);
  return { tree, label: `commit ${sha.slice(0, 7)} (${ref})` };
}

/** The page built from `tree` into `outDir` and served on a loopback port: its URL, and a way to stop serving. */
export async function serveEnginesPage(tree: string, outDir: string): Promise<{ url: string; close(): Promise<void> }> {
  await buildEnginesPage(tree, outDir);
  const server = await preview({
    configFile: false,
    root: `${tree}bench/browser/`,
    logLevel: 'warn',
    build: { outDir },
    preview: { host: '127.0.0.1', port: 0, strictPort: true },
  });
  const address = server.httpServer.address();
  if (typeof address !== 'object' || address === null) {
    await server.close();
    throw new Error('the preview server has no port');
  }
  return { url: `http://127.0.0.1:${address.port}/engines.html`, close: () => server.close() };
}

/** `engine` launched with the page at `url` open and its script loaded (`benchEngines` defined). */
export async function openEnginesPage(
  engine: Engine,
  url: string,
): Promise<{ browser: EngineBrowser; page: EnginePage }> {
  const browser = await launch(engine);
  try {
    const page = await browser.newPage();
    await page.goto(url);
    while (!(await page.evaluate(() => 'benchEngines' in globalThis, undefined))) {
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    return { browser, page };
  } catch (error) {
    await browser.close();
    throw error;
  }
}
