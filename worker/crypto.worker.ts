/// <reference lib="webworker" />
import { expose } from 'comlink';
import { loadShake128 } from '#shake';
import { HASH_WORKER_NAME, serveHashing, startHashWorker } from '../lib/crypto/hash-worker.js';
import { acceptOn } from './transfer.js';
import { cryptoWorkerApi } from './worker-api.js';
import { WorkerChannel } from './worker-channel.js';

/**
 * The crypto worker's entry: serves worker-api.ts to the page that started it (client.ts). The
 * same script, started by the crypto worker under HASH_WORKER_NAME, is its hashing worker
 * (lib/crypto/hash-worker.ts): the streams' SHAKE128 transcripts run there, beside the AES-GCM,
 * signing and relaying here.
 */

declare const self: DedicatedWorkerGlobalScope;

/**
 * Set on the worker's global by the first evaluation of this entry. WebKitGTK 2.50 evaluates the
 * entry again, in the same worker, when the worker first loads a chunk that imports from it (the
 * bundled offload-serve.js, loaded by decrypterPort on a page's first offloaded download, imports
 * the shared code from this entry's chunk): a second comlink server then answered every call (each
 * call ran twice), and two relays read each stream, so over the worker's own channel the page's
 * sender ran past its window. Chromium evaluates it once. One server per worker, however often
 * the entry runs.
 */
const STARTED = Symbol.for('postguard-ts.crypto-worker.started');
const startedBefore = STARTED in self;
(self as unknown as Record<symbol, boolean>)[STARTED] = true;

if (startedBefore) {
  // Already serving: the first evaluation's hashing worker, channel and comlink server stand.
} else if (self.name === HASH_WORKER_NAME) {
  void loadShake128().then((createShake) => serveHashing(self, createShake));
} else {
  // Start compiling the WebAssembly Keccak now, not on the first seal.
  void loadShake128();
  // A module worker may start another from its own URL (Vite's dev server and bundles alike).
  // Not in Firefox: there the page's first call into a crypto worker that starts one at load
  // sometimes never returned (3 hangs in 108 runs of the engines suite); it hashes inline.
  if (!/\bFirefox\//.test(self.navigator.userAgent)) {
    void startHashWorker(() => new Worker(self.location.href, { type: 'module', name: HASH_WORKER_NAME }));
  }
  // The page's streams arrive over this worker's own channel (worker-channel.ts), beside comlink's calls.
  const channel = new WorkerChannel(self);
  acceptOn(channel);
  expose(cryptoWorkerApi(), channel.endpoint);
}
