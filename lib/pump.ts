import { INLINE_IN_FLIGHT } from './crypto/segment-hasher.js';
import { ErrorCode, PostGuardError } from './errors.js';
import { ABORT_GRACE_MS, PIECE_BYTES, readerSource, type ChunkSource } from './io.js';
import type { SegmentOutput, Segmenter } from './segments.js';

/**
 * Moves a byte stream through a Segmenter into a writer, keeping up to `maxInFlight`
 * segments' AES-GCM work running while the next ones are hashed. Output order is input
 * order. The writer is closed only after the final segment succeeded; failures are thrown
 * (the caller aborts both ends with them).
 */

/**
 * Finished segments waiting for the sink. A deep queue (a sealer feeding a hashing thread) is for
 * work in progress; a slow sink (an upload) holds the pump to this many finished ones, or the queue
 * would fill with ciphertext waiting to be written.
 */
export const MAX_FINISHED_UNWRITTEN = 4;

const sinkFailed = (cause: unknown) =>
  new PostGuardError(ErrorCode.SINK_FAILED, `the output stream failed: ${String(cause)}`, { cause });

export async function pumpSegments(
  source: ReadableStreamDefaultReader<unknown> | ChunkSource,
  writer: WritableStreamDefaultWriter<Uint8Array>,
  head: Uint8Array | undefined,
  segmenter: Segmenter,
  maxInFlight = INLINE_IN_FLIGHT,
): Promise<void> {
  const next = typeof source === 'function' ? source : readerSource(source);
  const queue: Promise<SegmentOutput>[] = [];
  const settled = new WeakSet<Promise<SegmentOutput>>();
  /** Segments in the queue that have settled: those at its head wait only for the sink. */
  let finished = 0;

  // The first failure (a segment, or the sink) ends the pump, even while it waits for the source.
  // Each wait gets its own interrupt hook: racing every wait against one long-lived promise would
  // attach a reaction per wait to it, and each reaction would keep its chunk alive.
  let failure: { error: unknown } | undefined;
  let interrupt: ((error: unknown) => void) | undefined;
  const fail = (error: unknown) => {
    if (failure) return;
    failure = { error };
    interrupt?.(error);
  };
  const check = () => {
    if (failure) throw failure.error;
  };
  const interruptible = <T>(wait: Promise<T>): Promise<T> => {
    check();
    return new Promise<T>((resolve, reject) => {
      interrupt = reject;
      wait.then(resolve, reject);
    }).finally(() => {
      interrupt = undefined;
    });
  };

  // A sink can fail while nothing is being written (an upload whose connection dies while the source
  // waits for the user's disk): its `closed` promise tells, and the wait on the source is interrupted.
  writer.closed.then(undefined, (e: unknown) => fail(sinkFailed(e ?? new Error('the output stream was aborted'))));

  // Writes happen on one chain, as soon as the segment at the head of the queue is finished: the
  // first byte does not wait for the queue to fill, nor for a slow source to deliver more.
  let writes: Promise<void> = Promise.resolve();
  const write = async (output: SegmentOutput): Promise<void> => {
    const pieces = output instanceof Uint8Array ? [output] : output;
    if (pieces.every((p) => p.length === 0)) return;
    try {
      await writer.ready;
    } catch (e) {
      throw sinkFailed(e);
    }
    // A segment's pieces go out together: the sink's backpressure is honoured between segments.
    for (const piece of pieces) {
      if (piece.length > 0) writer.write(piece).catch((e) => fail(sinkFailed(e ?? new Error('write failed'))));
    }
  };
  const flush = () => {
    writes = writes
      .then(async () => {
        while (!failure && queue.length > 0 && settled.has(queue[0]!)) {
          finished--;
          await write(await queue.shift()!);
        }
      })
      .catch(fail);
  };
  /** Waits until the queue is no longer than `limit` (nor holds too many finished), or throws the first failure. */
  const drainTo = async (limit: number) => {
    while (queue.length > limit || finished > MAX_FINISHED_UNWRITTEN) {
      await interruptible(
        queue[0]!.then(
          () => writes,
          () => writes,
        ),
      );
      check();
    }
  };
  const enqueue = async (segments: Promise<SegmentOutput>[]) => {
    for (const segment of segments) {
      queue.push(segment);
      const mark = () => {
        settled.add(segment);
        finished++;
        flush();
      };
      segment.then(mark, mark);
    }
    await drainTo(maxInFlight);
  };

  if (head) await write(head);
  for (;;) {
    check();
    const chunk = await interruptible(next());
    if (chunk === undefined) break;
    for (let at = 0; at < chunk.length; at += PIECE_BYTES) {
      const piece = chunk.length <= PIECE_BYTES ? chunk : chunk.subarray(at, at + PIECE_BYTES);
      await enqueue(segmenter.push(piece));
    }
  }
  await enqueue(segmenter.finish());
  await drainTo(0);
  await writes;
  check();
  try {
    await writer.close();
  } catch (e) {
    throw sinkFailed(e);
  }
}

/**
 * Fails both ends of a pipeline with the same reason, so the sink never looks complete. The
 * cancel and abort are started at once; waiting for them is bounded, since a source or sink whose
 * cancel algorithm never settles must not keep the caller's promise from settling.
 */
export async function abortBoth(
  reader: ReadableStreamDefaultReader<unknown> | { cancel(reason?: unknown): Promise<void> },
  writer: WritableStreamDefaultWriter<Uint8Array>,
  reason: unknown,
): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const grace = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ABORT_GRACE_MS);
  });
  const both = Promise.all([reader.cancel(reason).catch(() => undefined), writer.abort(reason).catch(() => undefined)]);
  await Promise.race([both, grace]);
  clearTimeout(timer);
}
