import { fileURLToPath } from 'node:url';
import { defineConfig, type InlineConfig } from 'vite';

/**
 * Browser builds of postguard-ts (the test config stays in vitest.config.ts, which aliases '#shake'
 * to the Node backend):
 *
 *   npx vite build              dist/browser/postguard-worker.js   postguard-ts/worker as one ES module,
 *                                                                   with the crypto worker beside it
 *   npx vite build --mode sw    dist/browser/postguard-sw.js       the decrypting service worker, one
 *                                                                   classic script (every browser can
 *                                                                   register it without {type: 'module'})
 *
 * An application that bundles the sources itself needs only `browserAlias` (see worker/README.md).
 */

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));

/** '#shake' is the platform seam: in browsers the WebAssembly Keccak with its noble fallback. */
export const browserAlias = { '#shake': here('./lib/crypto/shake-portable.ts') };

export const OUT_DIR = 'dist/browser';

/** The decrypting service worker as one classic script. */
export function serviceWorkerBuild(outDir = OUT_DIR): InlineConfig {
  return {
    configFile: false,
    resolve: { alias: browserAlias },
    build: {
      outDir,
      emptyOutDir: false,
      target: 'es2022',
      sourcemap: true,
      lib: { entry: here('./worker/sw.ts'), formats: ['iife'], name: 'PostGuardServiceWorker', fileName: () => 'postguard-sw.js' },
    },
  };
}

/** postguard-ts/worker (client, PKG client, download helpers) and the crypto worker it starts. */
export function workerLibraryBuild(outDir = OUT_DIR): InlineConfig {
  return {
    configFile: false,
    // Relative asset URLs: the worker is found next to postguard-worker.js wherever that is served.
    base: './',
    resolve: { alias: browserAlias },
    worker: { format: 'es' },
    build: {
      outDir,
      emptyOutDir: false,
      target: 'es2022',
      sourcemap: true,
      lib: { entry: { 'postguard-worker': here('./worker/client.ts') }, formats: ['es'] },
    },
  };
}

export default defineConfig(({ mode }) => (mode === 'sw' ? serviceWorkerBuild() : workerLibraryBuild()));
