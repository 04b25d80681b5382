import { rm } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { test as base, expect } from '@playwright/test';
import { build, preview, type PreviewServer } from 'vite';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from '../../lib/keys.js';
import type { SealOptions } from '../../lib/seal.js';
import { browserAlias, postguardFromSources as postguardServiceWorker } from '../../lib/build/bundles.js';

/**
 * Fixtures for the browser specs: the test app (worker/test/app) built by Vite the way an
 * application bundles postguard-ts/worker (browserAlias, and the postguardServiceWorker plugin that
 * emits /postguard-sw.js), served by Vite's preview server on an ephemeral loopback port; and keys
 * made in Node.
 */

const APP = fileURLToPath(new URL('./app/', import.meta.url));
const OUT = fileURLToPath(new URL('../../tmp/worker-test-app/', import.meta.url));

async function buildApp(out = OUT): Promise<void> {
  await rm(out, { recursive: true, force: true });
  await build({
    configFile: false,
    root: APP,
    logLevel: 'warn',
    resolve: { alias: browserAlias },
    worker: { format: 'es' },
    plugins: [postguardServiceWorker()],
    build: { outDir: out, emptyOutDir: true, target: 'es2022', minify: false, sourcemap: false },
  });
}

/** Builds the test app into `out` and serves it on an ephemeral loopback port (the cross-engine specs use this too). */
export async function serveApp(out = OUT): Promise<{ url: string; close(): Promise<void> }> {
  await buildApp(out);
  const server = await preview({
    configFile: false,
    root: APP,
    logLevel: 'warn',
    build: { outDir: out },
    preview: { host: '127.0.0.1', port: 0, strictPort: true },
  });
  const address = server.httpServer.address();
  if (typeof address !== 'object' || address === null) throw new Error('preview server has no port');
  return { url: `http://127.0.0.1:${address.port}/`, close: () => server.close() };
}

export interface Keys {
  mpk: string;
  vk: string;
  id: string;
  usk: string;
  options: SealOptions;
  sender: { ts: number; con: Array<{ t: string; v: string }> };
}

export const ALICE = 'alice@example.org';
export const EMAIL = 'pbdf.sidn-pbdf.email.email';

export function makeKeys(): Keys {
  const kem = generateKemKeys();
  const ibs = generateSigningKeys();
  const ts = 1_700_000_000;
  const alice = { ts, con: [{ t: EMAIL, v: ALICE }] };
  const sender = { ts, con: [{ t: EMAIL, v: 'bob@example.org' }] };
  return {
    mpk: kem.mpk,
    vk: ibs.vk,
    id: ALICE,
    usk: extractUsk(kem.msk, alice),
    options: { policy: { [ALICE]: alice }, pubSignKey: { key: extractSigningKey(ibs.sk, sender), policy: sender } },
    sender,
  };
}

export const test = base.extend<{ app: string }, { server: PreviewServer; keys: Keys }>({
  server: [
    async ({}, use) => {
      await buildApp();
      const server = await preview({
        configFile: false,
        root: APP,
        logLevel: 'warn',
        build: { outDir: OUT },
        preview: { host: '127.0.0.1', port: 0, strictPort: true },
      });
      await use(server);
      await server.close();
    },
    { scope: 'worker', timeout: 120_000 },
  ],
  keys: [async ({}, use) => use(makeKeys()), { scope: 'worker' }],
  app: async ({ server, page }, use) => {
    const address = server.httpServer.address();
    if (typeof address !== 'object' || address === null) throw new Error('preview server has no port');
    const url = `http://127.0.0.1:${address.port}/`;
    await page.goto(url);
    await page.waitForFunction(() => 'pgt' in window);
    await use(url);
  },
});

export { expect };
