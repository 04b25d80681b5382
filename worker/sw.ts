/// <reference lib="webworker" />
import { installDecrypter } from './sw-core.js';

/**
 * The ready-made decrypting service worker. Build it as one classic script (vite.config.ts:
 * `vite build --mode sw` → dist/browser/postguard-sw.js) and register it from the page with
 * registerDecryptingServiceWorker(). An app with its own service worker calls installDecrypter()
 * there instead.
 */

declare const self: ServiceWorkerGlobalScope;

installDecrypter(self);

// Take over at once: the page that registered this worker should be able to use it right away.
self.addEventListener('install', () => void self.skipWaiting());
self.addEventListener('activate', (event) => event.waitUntil(self.clients.claim()));
