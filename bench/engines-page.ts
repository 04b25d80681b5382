import { copyFile, mkdir, rm } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { build } from 'vite';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from '../lib/keys.js';
import type { BenchKeys } from './browser/main.js';

/**
 * The cross-engine benchmark page (bench/browser/engines.html), built as an app builds it, and the
 * keys it is driven with: shared by `npm run bench:browser` and bench/sw-profile.ts.
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
