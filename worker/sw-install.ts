/// <reference lib="webworker" />
/**
 * postguard-ts/sw/install: for an app that has a service worker of its own. Call
 * `installDecrypter(self)` in it, and it answers the page's `prepareDownload` URLs as the
 * ready-built `postguard-ts/sw/script` does. This entry needs the WebWorker lib, so it is kept
 * apart from the page-side entries.
 *
 * @module postguard-ts/sw/install
 */
export { installDecrypter, contentDisposition, safeFilename } from './sw-core.js';
export type { DecrypterOptions } from './sw-core.js';
