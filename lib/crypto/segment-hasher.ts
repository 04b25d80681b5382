import type { Xof } from './xof.js';

/**
 * The running SHAKE128 transcript of a stream's segments, as the sealer and the opener use it:
 * absorb a segment's data, then squeeze the 64-byte digest of a fork with a tail appended (the
 * segment suffix, the signer's identity and the signature's nonce point), for each tail asked.
 *
 * The hashing may run on another thread (in Node, one thread hashes while the caller's thread
 * encrypts and signs: segment-hasher-node.ts); then the answer is a promise, and calls are served
 * in the order they are made. A buffer handed to `absorbAndFork` may be moved to that thread and
 * back: the caller uses the view it gets back, never the one it gave. Inline, the answer is
 * immediate and the buffer stays where it is: callers skip the promise hop and may reuse it.
 */
export interface Forked {
  buffer: Uint8Array;
  digests: Uint8Array[];
}

export interface SegmentHasher {
  absorbAndFork(buffer: Uint8Array, start: number, end: number, tails: readonly Uint8Array[]): Forked | Promise<Forked>;
  /** Ends the transcript (frees another thread's state); pending calls reject. Idempotent. */
  close(): void;
}

export const FORK_DIGEST_BYTES = 64;

/** The transcript on the calling thread: the work is done at the call. */
export function inlineSegmentHasher(transcript: Xof): SegmentHasher {
  return {
    absorbAndFork(buffer, start, end, tails) {
      transcript.update(buffer.subarray(start, end));
      const digests = tails.map((tail) => transcript.clone().update(tail).digest(FORK_DIGEST_BYTES));
      return { buffer, digests };
    },
    close() {},
  };
}
