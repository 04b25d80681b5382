import { RemoteHashing, hashingService, type HashReply, type HashRequest } from './segment-hasher-remote.js';
import type { XofFactory } from './xof.js';

/**
 * In a browser, a stream's transcript is hashed on a nested worker while the crypto worker
 * decrypts, signs and moves the next segment: the browser's counterpart of Node's hashing thread
 * (segment-hasher-node.ts). In one thread, WebAssembly SHAKE128 and the rest of a segment's work
 * take turns, and a stream reaches about 60% of the one-thread ceiling (bench/browser-stream.ts).
 *
 * The crypto worker starts the hashing worker from its own script under another name
 * (worker/crypto.worker.ts), so there is no second file to ship and no blob: URL for a content
 * security policy to refuse. Where it cannot start (a service worker has no Worker; an engine
 * without nested workers), streams hash inline as before.
 */

/** The `name` the crypto worker's script runs the hashing service under. */
export const HASH_WORKER_NAME = 'postguard-hash';

/** Posted once, when the hashing worker has loaded its SHAKE128 and serves requests. */
const READY = 'ready';
/** What the hashing worker posts: READY, then a HashReply to each absorb (segment-hasher-remote.ts). */
type FromHashWorker = typeof READY | HashReply;

interface Started {
  hashing: RemoteHashing;
  ready: boolean;
  online: Promise<boolean>;
}

let started: Started | undefined;

/** How long a hashing worker may take to say it is ready before streams give up waiting for it. */
const START_TIMEOUT_MS = 10_000;

/**
 * Starts the hashing worker with `spawn` unless one is running; resolves true once it answers,
 * false when it fails to start (then later calls try again).
 */
export function startHashWorker(spawn: () => Worker): Promise<boolean> {
  if (started) return started.online;
  let worker: Worker;
  try {
    worker = spawn();
  } catch {
    return Promise.resolve(false);
  }
  const hashing = new RemoteHashing({
    post: (request, transfer) => worker.postMessage(request, transfer),
    hold: () => {},
  });
  const entry: Started = { hashing, ready: false, online: Promise.resolve(false) };
  const fail = (why: string) => {
    if (started === entry) started = undefined;
    hashing.stop(why);
    worker.terminate();
  };
  entry.online = new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => {
      fail('it did not start');
      resolve(false);
    }, START_TIMEOUT_MS);
    worker.onmessage = (e: MessageEvent<FromHashWorker>) => {
      if (e.data !== READY) return hashing.receive(e.data);
      clearTimeout(timer);
      entry.ready = true;
      resolve(true);
    };
    const onError = (e: Event) => {
      clearTimeout(timer);
      fail('message' in e && typeof e.message === 'string' && e.message !== '' ? e.message : e.type);
      resolve(false);
    };
    worker.onerror = onError;
    worker.onmessageerror = onError;
  });
  stopping = () => fail('it was stopped');
  started = entry;
  return entry.online;
}

let stopping: (() => void) | undefined;

/** Stops the hashing worker: streams on it fail with INVALID_STATE; later ones hash inline. */
export function stopHashWorker(): void {
  stopping?.();
  stopping = undefined;
}

/** Resolves true once a started hashing worker is up; false when none was started or it failed. */
export const hashWorkerOnline = (): Promise<boolean> => started?.online ?? Promise.resolve(false);

/** The running hashing worker's transcripts, or undefined while none is ready. */
export function hashWorker(): RemoteHashing | undefined {
  return started?.ready === true && !started.hashing.stopped ? started.hashing : undefined;
}

/** Runs the hashing service in this (nested) worker's global scope, with the best SHAKE128 it loaded. */
export function serveHashing(scope: DedicatedWorkerGlobalScope, createShake: XofFactory): void {
  const post = (message: FromHashWorker, transfer: ArrayBuffer[] = []) => scope.postMessage(message, transfer);
  const serve = hashingService(createShake, post);
  scope.onmessage = (e: MessageEvent<HashRequest>) => serve(e.data);
  post(READY);
}
