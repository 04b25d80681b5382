import { fileURLToPath } from 'node:url';
import type { InlineConfig, Plugin, Rollup } from 'vite';
import { postguard } from '../../worker/vite.js';
import { emitterSources } from './emitters.js';
import { embeddedWasmBytesModule } from './wasm-bytes.js';

/**
 * The three browser files postguard-ts ships ready-built, as Vite configurations over the sources:
 *
 *   postguard-sw.js              the decrypting service worker as one classic script (every
 *                                browser registers those without {type: 'module'})
 *   postguard-crypto-worker.js   the crypto worker as one self-contained ES module, for apps whose
 *                                bundler does not follow `new Worker(new URL(...))` (esbuild)
 *   postguard.js                 the page side (postguard-ts/browser, worker/browser.ts) as one
 *                                self-contained ES module, for pages with no build step; it starts
 *                                postguard-crypto-worker.js from beside itself
 *
 * lib/build/main.ts writes them into lib/dist/browser/; tests and the demo build the service worker
 * in memory from the sources (bundleServiceWorker).
 */

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));

/**
 * The platform seams in browsers: '#shake' is the WebAssembly Keccak with its noble fallback,
 * '#aes' is WebCrypto.
 */
export const browserAlias = {
  '#aes': here('../crypto/aes-portable.ts'),
  '#shake': here('../crypto/shake-portable.ts'),
};

/**
 * The scripts carry the WebAssembly bytes, not the emitters (lib/crypto/wasm-bytes.ts): a runtime
 * module that imports an emitter fails the build rather than bundling it (emitters.ts).
 */
const embeddedWasm = (): Plugin => {
  const source = here('../crypto/wasm-bytes.ts');
  const emitters = new Set(emitterSources());
  return {
    name: 'postguard-embedded-wasm',
    enforce: 'pre',
    async load(id) {
      if (emitters.has(id)) this.error(`${id} is a WebAssembly emitter: the runtime imports its layout module instead`);
      return id === source ? await embeddedWasmBytesModule() : undefined;
    },
  };
};

export const SERVICE_WORKER_FILE = 'postguard-sw.js';
export const CRYPTO_WORKER_FILE = 'postguard-crypto-worker.js';
export const PAGE_MODULE_FILE = 'postguard.js';

/** One browser script, bundled whole (no imports left), minified, into `outDir/fileName`. */
export function scriptBuild(entry: string, format: 'iife' | 'es', fileName: string, outDir: string): InlineConfig {
  return {
    configFile: false,
    logLevel: 'warn',
    resolve: { alias: browserAlias },
    plugins: [embeddedWasm()],
    build: {
      outDir,
      emptyOutDir: false,
      target: 'es2022',
      minify: true,
      sourcemap: false,
      copyPublicDir: false,
      lib: { entry, formats: [format], name: 'PostGuard', fileName: () => fileName },
      // One file, whatever the sources load on first use (the crypto worker's offload-serve.ts); an
      // iife is one file anyway. Vite's library mode leaves an ES module's whitespace and
      // tree-shaking annotations in place for the bundler that would take it next: these scripts
      // are served as they are, so they are minified whole (about 4 KB less gzip each).
      ...(format === 'es'
        ? { rollupOptions: { output: { codeSplitting: false, minify: true, comments: { annotation: false } } } }
        : {}),
    },
  };
}

export const serviceWorkerBuild = (outDir: string): InlineConfig =>
  scriptBuild(here('../../worker/sw.ts'), 'iife', SERVICE_WORKER_FILE, outDir);

export const cryptoWorkerBuild = (outDir: string): InlineConfig =>
  scriptBuild(here('../../worker/crypto.worker.ts'), 'es', CRYPTO_WORKER_FILE, outDir);

/** Where worker/client.ts starts the crypto worker by default, for bundlers to follow. */
const BUNDLED_WORKER = "new URL('./crypto.worker.js', import.meta.url)";

/**
 * In the page module, `new PostGuardWorker()` starts the ready-built crypto worker served beside
 * the module instead of bundling a second copy of it: client.ts's default worker URL becomes
 * postguard-crypto-worker.js relative to the module's own URL. The name is read from a variable,
 * so that Vite neither bundles it as a worker nor looks for it as an asset. A client.ts that no
 * longer has that URL fails the build rather than shipping the worker inside the page module.
 */
const siblingCryptoWorker = (): Plugin => {
  const client = here('../../worker/client.ts');
  return {
    name: 'postguard-sibling-crypto-worker',
    enforce: 'pre',
    transform(code, id) {
      if (id !== client) return undefined;
      if (code.split(BUNDLED_WORKER).length !== 2) {
        this.error(`worker/client.ts must start its default worker with ${BUNDLED_WORKER} exactly once`);
      }
      const sibling = `((file) => new URL(file, import.meta.url))(${JSON.stringify(CRYPTO_WORKER_FILE)})`;
      return { code: code.replace(BUNDLED_WORKER, sibling), map: null };
    },
  };
};

export const pageModuleBuild = (outDir: string): InlineConfig => {
  const config = scriptBuild(here('../../worker/browser.ts'), 'es', PAGE_MODULE_FILE, outDir);
  return { ...config, plugins: [...(config.plugins ?? []), siblingCryptoWorker()] };
};

/** The code of the service worker bundle, built in memory from the sources. */
export async function bundleServiceWorker(): Promise<string> {
  const config = serviceWorkerBuild('dist');
  // Loaded here, so that reading the configurations (no-emitters.test.ts) does not load Vite.
  const { build } = await import('vite');
  const result = await build({ ...config, build: { ...config.build, write: false } });
  for (const output of Array.isArray(result) ? result : [result]) {
    if (!('output' in output)) continue;
    const chunk = (output as Rollup.RollupOutput).output.find((o) => o.type === 'chunk' && o.isEntry);
    if (chunk && chunk.type === 'chunk') return chunk.code;
  }
  throw new Error('the service worker build produced no entry chunk');
}

/**
 * The `postguard()` Vite plugin for apps inside this repository (tests, benchmarks), which bundle
 * the sources: the service worker is built from them per request instead of read from dist/.
 */
export const postguardFromSources = (): Plugin =>
  postguard({ serviceWorker: { code: bundleServiceWorker }, optimizeDeps: false });
