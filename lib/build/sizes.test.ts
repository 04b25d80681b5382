import { gzipSync } from 'node:zlib';
import type { InlineConfig, Rollup } from 'vite';
import { describe, expect, it } from 'vitest';
import { SIZE_BUDGETS } from './budgets.js';
import { cryptoWorkerBuild, pageModuleBuild, serviceWorkerBuild } from './bundles.js';

/**
 * The ready-built scripts stay within their budgets (budgets.ts): each is built in memory from the
 * sources, exactly as `npm run build` writes it into dist/browser/, and gzipped. A change that
 * makes one heavier fails here, in seconds, before the consumer spec builds an app from the
 * tarball (which checks the Vite app's crypto worker chunk against its own budget).
 */

/** The one file a script build makes, and its gzip size. */
async function built(config: InlineConfig): Promise<{ code: string; gzip: number; files: string[] }> {
  const { build } = await import('vite');
  const result = await build({ ...config, build: { ...config.build, write: false } });
  const chunks = (Array.isArray(result) ? result : [result])
    .flatMap((r) => (r as Rollup.RollupOutput).output)
    .filter((o): o is Rollup.OutputChunk => o.type === 'chunk');
  const code = chunks[0]!.code;
  return { code, gzip: gzipSync(code).length, files: chunks.map((c) => c.fileName) };
}

const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;

describe('the ready-built scripts', () => {
  it('the service worker (postguard-sw.js) is one file within its budget', async () => {
    const sw = await built(serviceWorkerBuild('dist'));
    expect(sw.files).toEqual(['postguard-sw.js']);
    console.log(`postguard-sw.js: ${kib(sw.gzip)} gzip (budget ${kib(SIZE_BUDGETS.serviceWorker)})`);
    expect(sw.gzip).toBeLessThanOrEqual(SIZE_BUDGETS.serviceWorker);
  });

  it('the crypto worker (postguard-crypto-worker.js) is one file within its budget', async () => {
    const worker = await built(cryptoWorkerBuild('dist'));
    expect(worker.files).toEqual(['postguard-crypto-worker.js']);
    console.log(
      `postguard-crypto-worker.js: ${kib(worker.gzip)} gzip (budget ${kib(SIZE_BUDGETS.readyBuiltCryptoWorker)})`,
    );
    expect(worker.gzip).toBeLessThanOrEqual(SIZE_BUDGETS.readyBuiltCryptoWorker);
  });

  it('the page module (postguard.js) is one file within the main-thread budget', async () => {
    const page = await built(pageModuleBuild('dist'));
    expect(page.files).toEqual(['postguard.js']);
    // It starts the ready-built worker from beside itself: the worker's code is not in it.
    expect(page.code).toContain('postguard-crypto-worker.js');
    console.log(`postguard.js: ${kib(page.gzip)} gzip (budget ${kib(SIZE_BUDGETS.pageModule)})`);
    expect(page.gzip).toBeLessThanOrEqual(SIZE_BUDGETS.pageModule);
  });
});
