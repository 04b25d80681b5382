import { rm } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { build, preview } from 'vite';
import { createApiKey, createApiKeyStore } from '../../server/db.js';
import { createTestSchema } from '../../server/db/testing.js';
import { startPkg } from '../../server/testing.js';
import { addKeys, oneKeySet, primaryKeys, promoteKey } from '../../server/keyset.js';
import { generatePkgKeys } from '../../lib/keys.js';
import { startStorage } from '../../devtools/storage/testing.js';
import { sourceAliases } from '../../scripts/source-aliases.js';
import type { ManualClock } from '../../devtools/standin/testing.js';
import { EMAIL } from './files.js';

/**
 * Everything the interop spec talks to, on loopback: the page with pg-js (built by Vite, served by
 * its preview server), our PKG in front of the stand-in identity server with API keys in a private
 * PostgreSQL schema, and the storage stand-in asking that PKG for its verifying key. Three origins,
 * so every call pg-js makes is a real cross-origin request: the PKG allows the page's origin only,
 * as a deployment would, and so does the storage stand-in.
 */

export interface InteropStack {
  pageUrl: string;
  pkgUrl: string;
  storageUrl: string;
  /** An organisation key the PKG accepts, signing as {@link API_KEY_SENDER}. */
  apiKey: string;
  close(): Promise<void>;
}

export const API_KEY_SENDER = 'newsletter@example.org';

const PAGE = fileURLToPath(new URL('./page/', import.meta.url));

/**
 * pg-js stamps policies with the browser's Date.now(), and the PKG refuses a key for a timestamp
 * more than a minute ahead of its clock: the stack runs on wall time, not a test clock.
 */
const wallClock: ManualClock = {
  now: () => Math.floor(Date.now() / 1000),
  set: () => {
    throw new Error('the interop stack runs on wall time');
  },
  advance: () => {
    throw new Error('the interop stack runs on wall time');
  },
};

async function servePage(outDir: string): Promise<{ url: string; close(): Promise<void> }> {
  await rm(outDir, { recursive: true, force: true });
  await build({
    configFile: false,
    root: PAGE,
    logLevel: 'warn',
    // postguard-ts/client from the sources, as the rest of the repository sees it, with the crypto worker.
    resolve: { alias: sourceAliases('portable') },
    worker: { format: 'es' },
    build: {
      outDir,
      emptyOutDir: true,
      target: 'es2022',
      minify: false,
      sourcemap: false,
      // On a busy machine the bundler reports its slow plugins; that is not this spec's business.
      rolldownOptions: { checks: { bundlerTimings: false } },
    },
  });
  const server = await preview({
    configFile: false,
    root: PAGE,
    logLevel: 'warn',
    build: { outDir },
    preview: { host: '127.0.0.1', port: 0, strictPort: true },
  });
  const address = server.httpServer.address();
  if (typeof address !== 'object' || address === null) throw new Error('preview server has no port');
  return { url: `http://127.0.0.1:${address.port}/`, close: () => server.close() };
}

/** Starts the stack; the page is built into `outDir` (one per engine and worker, never shared). */
export async function startInteropStack(outDir: string): Promise<InteropStack> {
  const closers: Array<() => Promise<unknown>> = [];
  const close = async () => {
    for (const closer of closers.reverse()) await closer().catch(() => undefined);
  };
  try {
    const page = await servePage(outDir);
    closers.push(() => page.close());
    const origin = new URL(page.url).origin;

    const schema = await createTestSchema();
    closers.push(() => schema.drop());
    const apiKey = await createApiKey(schema.url, { email: API_KEY_SENDER, org: 'Example BV' });
    const apiKeys = createApiKeyStore(schema.url, { emailAttribute: EMAIL });
    closers.push(() => apiKeys.close());

    // A PKG after a rotation (server/README.md): key B the primary, A decrypt-only beside it. pg-js reads
    // pg-pkg's fields (publicKey, key), which are B's; the key set beside them must not disturb it.
    const older = addKeys(oneKeySet(generatePkgKeys()), { kinds: ['ibe', 'ibs'], now: 0 });
    const keySet = older.added.reduce((set, { key }) => promoteKey(set, key.id).set, older.set);
    const keys = primaryKeys(keySet);
    const pkg = await startPkg({ apiKeys, clock: wallClock, allowedOrigins: [origin], keys, keySet });
    closers.push(() => pkg.close());
    // Strict: CORS exposes only cryptifytoken, as Cryptify does, so nothing passes here that would not there.
    const storage = await startStorage({
      pkgUrl: pkg.url,
      strict: true,
      allowedOrigins: new RegExp(`^${origin.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}$`),
    });
    closers.push(() => storage.close());

    return { pageUrl: page.url, pkgUrl: pkg.url, storageUrl: storage.url, apiKey, close };
  } catch (error) {
    await close();
    throw error;
  }
}
