/// <reference lib="webworker" />
import { createDecrypterRoute } from 'postguard-ts/sw/install';
import { installSaver } from './save-sw.js';
import { SaveTracker } from './save-tracker.js';

/**
 * The demo's service worker (served as /sw.js, one classic script): the library's decrypter
 * (pg-download/…: a ciphertext in, streaming plaintext out) and the demo's saver (pg-save/…: a
 * ciphertext the page is sealing, out to a download). Both keep memory flat whatever the size.
 * The decrypter is mounted as a route, its messages passing the save tracker (save-tracker.ts),
 * which remembers the receive page's saves so a reload shows one still running.
 */

declare const self: ServiceWorkerGlobalScope;

const decrypter = createDecrypterRoute(self);
const saves = new SaveTracker(decrypter);
self.addEventListener('message', (event) => saves.onMessage(event));
self.addEventListener('fetch', (event) => {
  if (!decrypter.match({ url: new URL(event.request.url), request: event.request })) return;
  saves.watchFetch(event.request);
  event.respondWith(decrypter.handler({ request: event.request, event }));
});
installSaver(self);

self.addEventListener('install', () => void self.skipWaiting());
self.addEventListener('activate', (event) => event.waitUntil(self.clients.claim()));
