import { sealStream, StreamUnsealer } from '../lib/index.js';
import type { Policy } from '../lib/policy.js';
import type { SealOptions } from '../lib/seal.js';
import type { VerificationResult } from '../lib/signatures.js';
import { PostGuardWorker } from '../worker/client.js';

/**
 * Where the client's cryptography runs. The two implementations have pg-wasm's shape already: the
 * library itself (this thread) and `PostGuardWorker` (the crypto worker, so a page stays
 * responsive). The client needs only streaming sealing and opening, so it asks for no more.
 */
export interface CryptoEngine {
  /** Seals `readable` into `writable`; `writable` is closed after the last segment, aborted on failure. */
  sealStream(
    mpk: string,
    options: SealOptions,
    readable: ReadableStream<Uint8Array>,
    writable: WritableStream<Uint8Array>,
  ): Promise<void>;
  /** Reads and authenticates a ciphertext's header from `readable`. */
  StreamUnsealer: { new: (readable: ReadableStream<Uint8Array>, vk: string) => Promise<EngineUnsealer> };
}

/** An opened ciphertext, before or during its decryption. */
export interface EngineUnsealer {
  /** Recipient id → that recipient's hidden policy. */
  inspect_header(): Map<string, Policy> | Promise<Map<string, Policy>>;
  /** Decrypts the rest of the stream into `writable` (closed after the final segment, aborted on failure). */
  unseal(recipientId: string, usk: string, writable: WritableStream<Uint8Array>): Promise<VerificationResult>;
}

/** The library on this thread (Node, tests, a worker of the app's own). */
export const inlineEngine: CryptoEngine = { sealStream, StreamUnsealer };

/** Where a page can start a module worker; a Node process or a service worker cannot (or need not). */
const canStartWorker = (): boolean => typeof Worker !== 'undefined' && typeof document !== 'undefined';

/**
 * The default: the crypto worker in a page (started on first use, one per client), the library
 * inline elsewhere.
 */
export function defaultEngine(): () => CryptoEngine {
  let worker: PostGuardWorker | undefined;
  return () => (canStartWorker() ? (worker ??= new PostGuardWorker()) : inlineEngine);
}
