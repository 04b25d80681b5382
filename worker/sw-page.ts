/**
 * postguard-ts/sw: the page's side of the decrypting service worker. The worker itself is the
 * ready-built script `postguard-ts/sw/script` (copy it to your origin, or let the Vite plugin
 * `postguard-ts/vite` serve and emit it); an app with a service worker of its own installs the
 * decrypter there with `postguard-ts/sw/install`.
 *
 * @module postguard-ts/sw
 */
export { DOWNLOAD_PATH, registerDecryptingServiceWorker, prepareDownload, triggerDownload } from './download.js';
export type { DownloadOptions, PreparedDownload, RegisterRequest, ServedRange } from './download.js';
/** The stream relay's sending side, to hand a stream to a service worker of your own (its side: portToReadable). */
export { readableToPort } from './port-stream.js';
export type { SenderOptions } from './port-stream.js';
