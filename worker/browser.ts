/**
 * postguard-ts/browser: everything a page needs, for pages with no build step. It is
 * `postguard-ts/worker` (PostGuardWorker, the PKG client and its QR identity sessions, the page side
 * of the decrypting service worker, the errors, senderReport and claimedSenderReport), shipped
 * ready-built as one self-contained ES module, dist/browser/postguard.js, with no bare imports left,
 * so `<script type="module">` can import it from a static server without an import map.
 *
 * Serve it from your origin beside the two ready-built scripts, postguard-crypto-worker.js
 * (`postguard-ts/worker/script`) and postguard-sw.js (`postguard-ts/sw/script`). In that file,
 * `new PostGuardWorker()` starts the crypto worker from postguard-crypto-worker.js next to the
 * module itself (`new PostGuardWorker({ workerUrl })` says where else it is);
 * `registerDecryptingServiceWorker(url)` takes the service worker's. An app with a bundler imports
 * `postguard-ts/worker` instead, which its bundler can share with the other entries.
 * lib/build/bundles.ts builds the file.
 *
 * @module postguard-ts/browser
 */
export * from './client.js';
