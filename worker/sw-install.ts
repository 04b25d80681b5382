/// <reference lib="webworker" />
/**
 * postguard-ts/sw/install: for an app that has a service worker of its own. Call
 * `installDecrypter(self)` in it, and it answers the page's `prepareDownload` URLs as the
 * ready-built `postguard-ts/sw/script` does; or, with a router of its own (workbox),
 * `createDecrypterRoute(self)` and mount its `match`/`handler` as a route and its `onMessage` as a
 * message listener. This entry needs the WebWorker lib, so it is kept
 * apart from the page-side entries.
 *
 * @module postguard-ts/sw/install
 */
export { installDecrypter, createDecrypterRoute, contentDisposition, safeFilename } from './sw-core.js';
export type { DecrypterOptions, DecrypterRoute } from './sw-core.js';
/** The stream relay's receiving side, for a stream a page hands over with readableToPort. */
export { portToReadable } from './port-stream.js';
export type { ReceiverOptions } from './port-stream.js';
export type { RelayPort } from './worker-channel.js';
