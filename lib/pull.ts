import { ErrorCode, PostGuardError, isPostGuardError } from './errors.js';
import { ABORT_GRACE_MS, PIECE_BYTES, type ChunkSource } from './io.js';
import type { SegmentOutput, Segmenter } from './segments.js';

/**
 * The pull-shaped half of the pipeline: a ReadableStream whose chunks are a Segmenter's outputs,
 * reading its source only when the stream is read. Up to `depth` segments are in flight (AES-GCM
 * and hashing overlap), so the source is read at most that far ahead of the reader; a reader that
 * stops reading stops the source. Any failure errors the stream and cancels the source; a reader
 * that cancels cancels the source too. pump.ts is the push-shaped twin for sealing into a sink.
 */

export interface PullOptions {
  /** Segments kept in flight ahead of the reader. */
  readonly depth: number;
  /** Cancels the source (a failure, or the reader cancelled). */
  cancelSource(reason: unknown): Promise<void>;
  /** Runs once when the stream ends, whichever way (the segmenter's resources). */
  finished?(): void;
  /** Checks each output before it is handed on (e.g. against an announced size); throws to fail. */
  check?(output: Uint8Array): void;
  /** Runs after the final output, before the stream closes; throws to fail instead. */
  complete?(): void;
  /** The stream failed by itself (not cancelled by its reader), with this typed error. */
  failed?(error: unknown): void;
}

/** The plaintext stream, and a way to open its first segment before anyone reads. */
export interface PulledSegments {
  readonly readable: ReadableStream<Uint8Array>;
  /**
   * Opens the first segment now (reading the source as far as it needs) and keeps its output for
   * the first read: what it revealed (segment 0's signer block) is then known. Rejects with the
   * stream's error, which the stream then holds too.
   */
  prime(): Promise<void>;
}

export function pullSegments(next: ChunkSource, segmenter: Segmenter, options: PullOptions): PulledSegments {
  const queue: Promise<SegmentOutput>[] = [];
  /** What is left of the source's current chunk, fed to the segmenter in pieces as room allows. */
  let chunk: Uint8Array | undefined;
  let at = 0;
  let sourceEnded = false;
  let over = false;

  const end = (reason?: unknown) => {
    if (over) return;
    over = true;
    options.finished?.();
    chunk = undefined;
    queue.length = 0;
    notify();
    if (reason !== undefined) {
      // Bounded: a source whose cancel never settles must not hold anyone.
      let timer: ReturnType<typeof setTimeout> | undefined;
      const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, ABORT_GRACE_MS)));
      void Promise.race([options.cancelSource(reason).catch(() => undefined), grace]).then(() => clearTimeout(timer));
    }
  };

  /** Wakes a pull that waits for the queue to grow (or the source to end or fail). */
  let wake: (() => void) | undefined;
  const notify = () => {
    wake?.();
    wake = undefined;
  };
  let filling = false;
  let fillFailure: { error: unknown } | undefined;

  /**
   * Reads the source until `depth` segments are in flight or it has ended, in the background:
   * a pull hands on the head segment as soon as it is ready, even while the source stalls.
   */
  const fill = async () => {
    filling = true;
    try {
      while (!over && queue.length < options.depth && !sourceEnded) {
        if (chunk === undefined) {
          const read = await next();
          if (over) return;
          if (read === undefined) {
            sourceEnded = true;
            queue.push(...segmenter.finish());
            break;
          }
          chunk = read;
          at = 0;
        }
        const piece = chunk.length <= PIECE_BYTES ? chunk : chunk.subarray(at, at + PIECE_BYTES);
        at += piece.length;
        if (at >= chunk.length) chunk = undefined;
        queue.push(...segmenter.push(piece));
        notify();
      }
    } catch (error) {
      fillFailure = { error };
    } finally {
      filling = false;
      notify();
    }
  };

  /** The first segment's output, opened by `prime` before any read. */
  let primed: { output: SegmentOutput | undefined } | undefined;
  /** A failure, typed, once: what the stream errors with. */
  let failure: { error: unknown } | undefined;
  const fail = (error: unknown): unknown => {
    if (failure) return failure.error;
    const typed = isPostGuardError(error)
      ? error
      : new PostGuardError(ErrorCode.SOURCE_FAILED, `the input failed: ${String(error)}`, { cause: error });
    failure = { error: typed };
    options.failed?.(typed);
    end(typed);
    return typed;
  };

  /** The next segment's output, in order; undefined after the last. */
  const nextSegment = async (): Promise<SegmentOutput | undefined> => {
    if (primed) {
      const { output } = primed;
      primed = undefined;
      return output;
    }
    for (;;) {
      if (fillFailure) throw fillFailure.error;
      if (!filling && !sourceEnded && queue.length < options.depth) void fill();
      if (queue.length > 0) return queue.shift();
      if (sourceEnded && !filling) return undefined;
      await new Promise<void>((resolve) => (wake = resolve));
    }
  };

  const readable = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        if (failure) throw failure.error;
        try {
          // A segment may carry no message bytes (segment 0 holding only the signer block, an empty
          // final one): keep going until something is handed on, or the stream has ended, since
          // the read that asked for this pull is still waiting.
          for (;;) {
            const output = await nextSegment();
            if (over) return;
            if (output === undefined) {
              options.complete?.();
              end();
              controller.close();
              return;
            }
            let handed = false;
            for (const piece of output instanceof Uint8Array ? [output] : output) {
              if (piece.length === 0) continue;
              options.check?.(piece);
              controller.enqueue(piece);
              handed = true;
            }
            if (handed) {
              // Top the queue up while the reader works on this: the source stays `depth` ahead.
              if (!filling && !sourceEnded && !over) void fill();
              return;
            }
          }
        } catch (error) {
          if (over && !failure) return; // cancelled meanwhile: the reader has gone
          throw fail(error);
        }
      },
      cancel(reason) {
        end(reason ?? new PostGuardError(ErrorCode.INVALID_STATE, 'the plaintext stream was cancelled'));
      },
    },
    { highWaterMark: 0 },
  );
  return {
    readable,
    async prime() {
      try {
        primed = { output: await nextSegment() };
      } catch (error) {
        throw fail(error);
      }
    },
  };
}
