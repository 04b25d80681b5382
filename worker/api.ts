import type { UserKeys, VerifyingKeys } from '../lib/unseal.js';
import type { Policy } from '../lib/policy.js';
import type { SealOptions } from '../lib/seal.js';
import type { VerificationResult } from '../lib/signatures.js';

/**
 * What the crypto worker exposes over comlink (crypto.worker.ts) and the client wraps (client.ts).
 * Streams in arguments are relayed by the transfer handlers in transfer.ts.
 */

/** What both worker-side unsealers answer about the authenticated header. */
export interface RemoteHeaderView {
  inspect_header(): Map<string, Policy>;
  public_identity(): Policy;
}

export interface RemoteUnsealer extends RemoteHeaderView {
  unseal(recipientId: string, usk: UserKeys): Promise<[Uint8Array, VerificationResult]>;
}

export interface RemoteStreamUnsealer extends RemoteHeaderView {
  unseal(recipientId: string, usk: UserKeys, writable: WritableStream<Uint8Array>): Promise<VerificationResult>;
}

export interface CryptoWorkerApi {
  seal(mpk: string, options: SealOptions, plain: Uint8Array): Promise<Uint8Array>;
  sealStream(
    mpk: string,
    options: SealOptions,
    readable: ReadableStream<Uint8Array>,
    writable: WritableStream<Uint8Array>,
  ): Promise<void>;
  unsealer(input: Uint8Array, vk: VerifyingKeys): Promise<RemoteUnsealer>;
  streamUnsealer(readable: ReadableStream<Uint8Array>, vk: VerifyingKeys): Promise<RemoteStreamUnsealer>;
  /** Which SHAKE128 backend the worker runs ('wasm' normally). */
  shakeBackend(): Promise<string>;
  /** Whether streams' SHAKE128 transcripts run on a thread of their own (a nested worker here). */
  hashesOnOwnThread(): Promise<boolean>;
  /** A port on which this worker decrypts downloads for the decrypting service worker (offload-serve.ts). */
  decrypterPort(): Promise<MessagePort>;
}
