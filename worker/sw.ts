/// <reference lib="webworker" />
import { installDecrypter } from './sw-core.js';

/**
 * The ready-made decrypting service worker, shipped as one classic script (lib/build/bundles.ts:
 * dist/browser/postguard-sw.js, `postguard-ts/sw/script`); a page registers it with
 * registerDecryptingServiceWorker(). An app with its own service worker calls installDecrypter()
 * (or mounts createDecrypterRoute()) there instead.
 */

declare const self: ServiceWorkerGlobalScope;

installDecrypter(self);

// Take over at once: the page that registered this worker should be able to use it right away.
self.addEventListener('install', () => void self.skipWaiting());
self.addEventListener('activate', (event) => event.waitUntil(self.clients.claim()));
