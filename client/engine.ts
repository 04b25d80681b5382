import type { Policy } from '../lib/policy.js';
import type { SealOptions } from '../lib/seal.js';
import type { VerificationResult } from '../lib/signatures.js';

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

/** Where a page can start a module worker; a Node process or a service worker cannot (or need not). */
const canStartWorker = (): boolean => typeof Worker !== 'undefined' && typeof document !== 'undefined';

/**
 * An engine loaded on first use: neither the crypto worker's client nor the library is in the
 * module graph a page loads up front (a dynamic import is its own chunk in a bundler). A load that
 * fails (a chunk the network did not deliver) fails that call, aborting its streams as the engine's
 * own failure would, and is tried again on the next.
 */
export function lazyEngine(load: () => Promise<CryptoEngine>): CryptoEngine {
  let loading: Promise<CryptoEngine> | undefined;
  const engine = () =>
    (loading ??= load().catch((error: unknown) => {
      loading = undefined;
      throw error;
    }));
  return {
    async sealStream(mpk, options, readable, writable) {
      let loaded: CryptoEngine;
      try {
        loaded = await engine();
      } catch (error) {
        await Promise.allSettled([readable.cancel(error), writable.abort(error)]);
        throw error;
      }
      return loaded.sealStream(mpk, options, readable, writable);
    },
    StreamUnsealer: {
      async new(readable, vk) {
        let loaded: CryptoEngine;
        try {
          loaded = await engine();
        } catch (error) {
          await readable.cancel(error).catch(() => undefined);
          throw error;
        }
        return loaded.StreamUnsealer.new(readable, vk);
      },
    },
  };
}

/**
 * The default: the crypto worker in a page (started on first use, one per client), the library
 * inline elsewhere (engine-inline.ts). Both are loaded when first used, so a page's own bundle
 * carries neither the library nor the worker's client.
 */
export function defaultEngine(): () => CryptoEngine {
  let engine: CryptoEngine | undefined;
  return () =>
    (engine ??= lazyEngine(
      canStartWorker()
        ? async () => new (await import('../worker/client.js')).PostGuardWorker()
        : async () => (await import('./engine-inline.js')).inlineEngine,
    ));
}
