import { fileURLToPath } from 'node:url';
import { build, defineConfig, type InlineConfig, type Plugin, type Rollup } from 'vite';
import { demoConfig } from './demo/vite.js';

/**
 * Browser builds of postguard-ts (the test config stays in vitest.config.ts, which aliases '#shake'
 * to the Node backend):
 *
 *   npx vite build              dist/browser/postguard-worker.js   postguard-ts/worker as one ES module,
 *                                                                   with the crypto worker beside it
 *   npx vite build --mode sw    dist/browser/postguard-sw.js       the decrypting service worker, one
 *                                                                   classic script (every browser can
 *                                                                   register it without {type: 'module'})
 *   npx vite build --mode demo  dist/demo-app/                      the demo (demo/README.md): both pages,
 *                                                                   the crypto worker, sw.js, config.json
 *   npx vite --mode demo        the demo on Vite's dev server alone (`npm start` adds the PKG and the
 *                                                                   stand-in)
 *
 * An application that bundles the sources itself needs `browserAlias`, and `postguardServiceWorker()`
 * among its plugins to serve and emit the service worker script (see worker/README.md).
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

/** The code of the service worker bundle, built in memory. */
export async function bundleServiceWorker(): Promise<string> {
  const config = serviceWorkerBuild();
  const result = await build({ ...config, logLevel: 'warn', build: { ...config.build, write: false, sourcemap: false } });
  for (const output of Array.isArray(result) ? result : [result]) {
    if (!('output' in output)) continue;
    const chunk = (output as Rollup.RollupOutput).output.find((o) => o.type === 'chunk' && o.isEntry);
    if (chunk && chunk.type === 'chunk') return chunk.code;
  }
  throw new Error('the service worker build produced no entry chunk');
}

/**
 * A Vite plugin for applications: serves the decrypting service worker at `<base><fileName>` in
 * the dev server and emits it there in builds, as one classic script, so the page can call
 * registerDecryptingServiceWorker('<base>postguard-sw.js') either way.
 */
export function postguardServiceWorker(options: { fileName?: string } = {}): Plugin {
  const fileName = options.fileName ?? 'postguard-sw.js';
  let base = '/';
  return {
    name: 'postguard-service-worker',
    configResolved(config) {
      base = config.base.endsWith('/') ? config.base : `${config.base}/`;
    },
    configureServer(server) {
      server.middlewares.use((req, res, next) => {
        if ((req.url ?? '').split('?')[0] !== `${base}${fileName}`) return next();
        // Built per request: the browser asks again when it checks for an update, and gets the current sources.
        bundleServiceWorker().then(
          (code) => {
            res.setHeader('content-type', 'text/javascript; charset=utf-8');
            res.setHeader('cache-control', 'no-cache');
            res.end(code);
          },
          (error: unknown) => next(error),
        );
      });
    },
    async generateBundle() {
      this.emitFile({ type: 'asset', fileName, source: await bundleServiceWorker() });
    },
  };
}

export default defineConfig(({ mode }) => {
  if (mode === 'sw') return serviceWorkerBuild();
  if (mode === 'demo') return demoConfig();
  return workerLibraryBuild();
});
