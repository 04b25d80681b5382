import type { Xof } from './xof.js';

/**
 * The running SHAKE128 transcript of a stream's segments, as the sealer and the opener use it:
 * absorb a segment's data, then squeeze the 64-byte digest of a fork with a tail appended (the
 * segment suffix, the signer's identity and the signature's nonce point), for each tail asked.
 *
 * The interface is asynchronous so the hashing can run on another thread (in Node, one thread
 * hashes while the caller's thread encrypts and signs: segment-hasher-node.ts). Calls are served in
 * the order they are made. A buffer handed to `absorbAndFork` may be moved to that thread and
 * back: the caller uses the view it gets back, never the one it gave.
 */
export interface SegmentHasher {
  absorbAndFork(
    buffer: Uint8Array,
    start: number,
    end: number,
    tails: readonly Uint8Array[],
  ): Promise<{ buffer: Uint8Array; digests: Uint8Array[] }>;
  /** Ends the transcript (frees another thread's state); pending calls reject. Idempotent. */
  close(): void;
}

export const FORK_DIGEST_BYTES = 64;

/** The transcript on the calling thread: the work is done at the call, the promise is already settled. */
export function inlineSegmentHasher(transcript: Xof): SegmentHasher {
  return {
    absorbAndFork(buffer, start, end, tails) {
      transcript.update(buffer.subarray(start, end));
      const digests = tails.map((tail) => transcript.clone().update(tail).digest(FORK_DIGEST_BYTES));
      return Promise.resolve({ buffer, digests });
    },
    close() {},
  };
}
