/// <reference lib="webworker" />
import { installDecrypter } from 'postguard-ts/sw/install';
import { installSaver } from './save-sw.js';

/**
 * The demo's service worker (served as /sw.js, one classic script): the library's decrypter
 * (pg-download/…: a ciphertext in, streaming plaintext out) and the demo's saver (pg-save/…: a
 * ciphertext the page is sealing, out to a download). Both keep memory flat whatever the size.
 */

declare const self: ServiceWorkerGlobalScope;

installDecrypter(self);
installSaver(self);

self.addEventListener('install', () => void self.skipWaiting());
self.addEventListener('activate', (event) => event.waitUntil(self.clients.claim()));
