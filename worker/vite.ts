/**
 * postguard-ts/vite: the Vite plugin, `postguard()`. It lets Vite find and bundle the crypto
 * worker, and serves (dev) and emits (build) the decrypting service worker. Runs in Node, in
 * vite.config.
 *
 * @module postguard-ts/vite
 */
import { readFile } from 'node:fs/promises';
import type { Plugin, UserConfig } from 'vite';

/** Options of the `postguard()` Vite plugin. */
export interface PostGuardViteOptions {
  /**
   * The decrypting service worker: served at `<base><fileName>` by the dev server and emitted there
   * by builds. `false` leaves it out. Default `{ fileName: 'postguard-sw.js' }`.
   */
  serviceWorker?:
    | false
    | {
        /** Default 'postguard-sw.js'. */
        fileName?: string;
        /**
         * A scope wider than the script's folder (e.g. '/' for a script under '/assets/'). The dev
         * server then sends `Service-Worker-Allowed`; a production server must send it too.
         */
        scope?: string;
        /** Where the script's code comes from. Default: the ready-built `postguard-ts/sw/script`. */
        code?: () => Promise<string>;
      };
  /**
   * Keep postguard-ts out of Vite's dependency pre-bundling (default true), so the crypto worker it
   * starts with `new Worker(new URL(...))` is found and bundled, and pre-bundle its CommonJS
   * dependency (qrcode). Turn off only when postguard-ts is not installed as a package.
   */
  optimizeDeps?: boolean;
}

const readBuiltServiceWorker = () => readFile(new URL('../browser/postguard-sw.js', import.meta.url), 'utf8');

/**
 * postguard-ts in a Vite app, in one line: `plugins: [postguard()]`. Gives the app the crypto
 * worker (module workers, not pre-bundled away) and the decrypting service worker (served in dev,
 * emitted in builds). Register it from the page with
 * `registerDecryptingServiceWorker(import.meta.env.BASE_URL + 'postguard-sw.js')` from `postguard-ts/sw`.
 */
export function postguard(options: PostGuardViteOptions = {}): Plugin {
  const sw = options.serviceWorker === false ? undefined : (options.serviceWorker ?? {});
  const fileName = sw?.fileName ?? 'postguard-sw.js';
  const code = sw?.code ?? readBuiltServiceWorker;
  let base = '/';
  return {
    name: 'postguard-ts',
    config(): UserConfig {
      const config: UserConfig = { worker: { format: 'es' } };
      if (options.optimizeDeps !== false) {
        config.optimizeDeps = { exclude: ['postguard-ts'], include: ['postguard-ts > qrcode'] };
      }
      return config;
    },
    configResolved(config) {
      base = config.base.endsWith('/') ? config.base : `${config.base}/`;
    },
    configureServer(server) {
      if (sw === undefined) return;
      server.middlewares.use((req, res, next) => {
        if ((req.url ?? '').split('?')[0] !== `${base}${fileName}`) return next();
        // Read per request: the browser asks again when it checks for an update.
        code().then(
          (script) => {
            res.setHeader('content-type', 'text/javascript; charset=utf-8');
            res.setHeader('cache-control', 'no-cache');
            if (sw.scope !== undefined) res.setHeader('service-worker-allowed', sw.scope);
            res.end(script);
          },
          (error: unknown) => next(error),
        );
      });
    },
    async generateBundle() {
      if (sw === undefined) return;
      this.emitFile({ type: 'asset', fileName, source: await code() });
    },
  };
}

export default postguard;
