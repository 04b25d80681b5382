import { shake128 } from '@noble/hashes/sha3.js';
import { loadKeccakWasm } from './keccak-wasm.js';
import { hashWorker, hashWorkerOnline } from './hash-worker.js';
import { inlineSegmentHasher, type SegmentHasher } from './segment-hasher.js';
import type { Xof, XofFactory } from './xof.js';

/**
 * SHAKE128 for browsers and other non-Node platforms: the WebAssembly Keccak when it compiles,
 * @noble/hashes otherwise (no WebAssembly, or a content security policy that forbids it).
 */

/** SHAKE128 on @noble/hashes: runs everywhere, used where no faster backend is available. */
class NobleShake128 implements Xof {
  constructor(private readonly hash: ReturnType<typeof shake128.create>) {}

  update(data: Uint8Array): Xof {
    this.hash.update(data);
    return this;
  }

  clone(): Xof {
    return new NobleShake128(this.hash.clone());
  }

  digest(length: number): Uint8Array {
    return this.hash.xof(length);
  }
}

/** Always the pure-JS backend, whatever `loadShake128` picked (benchmarks compare against it). */
export const nobleShake128: XofFactory = () => new NobleShake128(shake128.create({}));

export type ShakeBackend = 'wasm' | '@noble/hashes';

/**
 * The backend `createShake128` uses right now. An ES module live binding: it reads
 * '@noble/hashes' until `loadShake128()` has brought up WebAssembly, then 'wasm'. (It stays a
 * string, like the Node module's, so code typed against '#shake' works on both.)
 */
export let shakeBackend: ShakeBackend = '@noble/hashes';

let active: XofFactory = nobleShake128;

/** Synchronous factory: noble until `loadShake128()` has resolved, the WebAssembly one after. */
export const createShake128: XofFactory = () => active();

async function selectBackend(): Promise<XofFactory> {
  try {
    const keccak = await loadKeccakWasm();
    active = keccak.createShake128;
    shakeBackend = 'wasm';
  } catch {
    // No WebAssembly or it failed to compile: noble is correct everywhere, only slower.
  }
  return active;
}

let selected: Promise<XofFactory> | undefined;

/** Resolves to the fastest available factory; tries WebAssembly once per realm. Never rejects. */
export const loadShake128 = (): Promise<XofFactory> => (selected ??= selectBackend());

/**
 * A stream's segment transcript: on the hashing worker when the crypto worker has started one
 * (hash-worker.ts), on the calling thread otherwise.
 */
export const segmentHasher = (transcript: Xof, absorbed: Uint8Array): SegmentHasher =>
  hashWorker()?.open(absorbed) ?? inlineSegmentHasher(transcript);

/**
 * Node starts a thread for the hashing here (startHashThread). In a browser a worker can only be
 * started from a script URL, which the library does not know: the crypto worker starts it
 * (hash-worker.ts `startHashWorker`); this resolves true once that one is up.
 */
export const startHashThread = (): Promise<boolean> => hashWorkerOnline();
