/**
 * What the browser scripts may weigh, in bytes of gzip (Node's zlib at its default level, the
 * measure e2e/consumer/send-receive.spec.ts and lib/build/sizes.test.ts take). Issue 30 asks that
 * the crypto worker and the service worker grow no bigger than they were at its base (5d8a807):
 * these are that commit's sizes, measured as a consumer gets the scripts. A feature that needs more
 * is loaded on first use (a dynamic import: the crypto worker's offload-serve.ts in a bundled app)
 * or pays for itself elsewhere; worker/README.md ("Bundling") gives the figures and what they hold.
 */
export const SIZE_BUDGETS = {
  /** dist/browser/postguard-sw.js, the service worker every app serves (postguard() emits it as is). */
  serviceWorker: 82_660,
  /** dist/browser/postguard-crypto-worker.js, the ready-built crypto worker (esbuild apps, no bundler). */
  readyBuiltCryptoWorker: 87_265,
  /**
   * The crypto worker's chunk in a Vite app built from the packed package (`crypto.worker-*.js`):
   * what a page loads to start the worker; chunks it imports on first use are not counted.
   */
  viteCryptoWorker: 81_565,
  /**
   * dist/browser/postguard.js, the page module for pages with no build step: main-thread code, so it
   * gets the main-thread limit (40 KiB gzip), not a base size (29,579 at 5d8a807; the
   * Firefox worker channel's page side added ~0.9 KB since).
   */
  pageModule: 40 * 1024,
} as const;
