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
  /**
   * How many segments of this size a sealer (or, with 'open', an opener) should keep in flight to
   * keep this transcript busy.
   */
  inFlight(segmentSize: number, direction?: Direction): number;
  /** Ends the transcript (frees another thread's state); pending calls reject. Idempotent. */
  close(): void;
}

export const FORK_DIGEST_BYTES = 64;

/** Which way a stream runs: its queue to the hashing thread may differ (segment-hasher-node.ts). */
export type Direction = 'seal' | 'open';

/** Bytes of segments a stream queues on a hashing thread, per direction. */
export type QueueBytes = Readonly<Record<Direction, number>>;

/**
 * Inline, what runs beside the hashing is WebCrypto's AES-GCM, which four segments keep busy; also
 * the depth of a pump that is given none (pump.ts).
 */
export const INLINE_IN_FLIGHT = 4;

/**
 * On another thread, enough segments queued there to keep it hashing through a pause of the
 * caller's thread: a full garbage collection, which the output buffers' external memory triggers
 * every ~64 MB, stops it for 3–8 ms, ~10–20 segments of SHAKE128. With four in flight the hashing
 * thread sat idle ~30% of a 256 MiB seal in Node. Twelve and 24 measured the same when the two
 * alternated run by run in one process (median of 8: 401 vs 393 MB/s; the thread idle 8–20% and
 * 6–28% of the runs); an earlier gain for 24 came from comparing separate invocations, which on
 * this VM differ by more than that. Memory does differ: each MiB queued added ~3.8 MiB of RSS to
 * the SDK's 128 MiB upload (14 MiB with four segments, 25 with twelve, 36 with 24, measured while
 * fetch still copied each chunk's body). So the queue is 3 MiB (12 segments of the usual 256 KiB),
 * bounded in bytes so that large segments do not multiply it.
 */
export const REMOTE_QUEUE_BYTES = 3 << 20;

export const REMOTE_QUEUES: QueueBytes = { seal: REMOTE_QUEUE_BYTES, open: REMOTE_QUEUE_BYTES };

export const remoteInFlight = (segmentSize: number, queueBytes = REMOTE_QUEUE_BYTES): number =>
  Math.max(INLINE_IN_FLIGHT, Math.min(64, Math.floor(queueBytes / segmentSize)));

/** The transcript on the calling thread: the work is done at the call. */
export function inlineSegmentHasher(transcript: Xof): SegmentHasher {
  return {
    absorbAndFork(buffer, start, end, tails) {
      transcript.update(buffer.subarray(start, end));
      const digests = tails.map((tail) => transcript.clone().update(tail).digest(FORK_DIGEST_BYTES));
      return { buffer, digests };
    },
    inFlight: () => INLINE_IN_FLIGHT,
    close() {},
  };
}
