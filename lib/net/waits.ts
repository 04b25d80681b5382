import { ErrorCode, InputError, PostGuardError } from '../errors.js';

/**
 * Waits with a way out: every await on a network or a caller's source goes through `bounded`, so
 * it ends when its signal aborts or when nothing came for the stall timeout, whatever the awaited
 * promise does. The pauses between attempts (`sleep`, `fullJitter`) and the idle timer of a body
 * (`idleBounded`) live here too, so that the library, the client and the service worker wait the
 * same way. Each takes the error it ends with from its caller where layers name it differently
 * (the library's CANCELLED, the client's ABORTED).
 */

/** The error a wait ends with when its signal aborts. */
export type OnAbort = (signal: AbortSignal) => unknown;

/** setTimeout's largest delay: a longer one fires at once. */
export const MAX_TIMER_MS = 0x7fff_ffff;

/**
 * The default for `stallMs`: how long a read of a source may go without an answer. Here, not in
 * random-access.ts, so that a module that needs only the number (the client's upload) does not
 * pull random access and the crypto it opens files with into a page's first chunk.
 */
export const DEFAULT_STALL_MS = 30_000;

/** `stallMs` as given (INVALID_INPUT unless a positive number), or {@link DEFAULT_STALL_MS}. */
export function stallOption(stallMs: unknown): number {
  if (stallMs === undefined) return DEFAULT_STALL_MS;
  if (typeof stallMs !== 'number' || !(stallMs > 0))
    throw new InputError(ErrorCode.INVALID_INPUT, 'stallMs must be a positive number of milliseconds');
  return stallMs;
}

/** The CANCELLED error for an aborted `signal`, its reason as the cause. */
export const cancelledBy = (signal: AbortSignal, what = 'the read was cancelled (its signal was aborted)') =>
  new PostGuardError(ErrorCode.CANCELLED, what, { cause: signal.reason });

/**
 * `work`, or CANCELLED when `signal` aborts first, or `stalled()` after `stallMs` (none when
 * undefined or beyond setTimeout's range).
 */
export function bounded<T>(
  work: Promise<T>,
  signal: AbortSignal | undefined,
  stallMs: number | undefined,
  stalled: () => Error,
  onAbort: OnAbort = cancelledBy,
): Promise<T> {
  if (signal?.aborted) {
    work.catch(() => undefined); // nobody waits for it any more
    return Promise.reject(onAbort(signal));
  }
  // `work` is always handled below (its rejection after a timeout or an abort goes nowhere).
  return new Promise<T>((resolve, reject) => {
    const timer =
      stallMs !== undefined && stallMs <= MAX_TIMER_MS
        ? setTimeout(() => {
            done();
            reject(stalled());
          }, stallMs)
        : undefined;
    const abort = () => {
      done();
      reject(onAbort(signal!));
    };
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', abort);
    };
    signal?.addEventListener('abort', abort, { once: true });
    work.then(
      (value) => {
        done();
        resolve(value);
      },
      (error: unknown) => {
        done();
        reject(error);
      },
    );
  });
}

/** A signal that aborts when any of `signals` does; `release` detaches it. */
export function linked(...signals: (AbortSignal | undefined)[]): { controller: AbortController; release: () => void } {
  const controller = new AbortController();
  const present = signals.filter((s): s is AbortSignal => s !== undefined);
  const onAbort = (event: Event) => controller.abort((event.target as AbortSignal).reason);
  for (const signal of present) {
    if (signal.aborted) {
      controller.abort(signal.reason);
      break;
    }
    signal.addEventListener('abort', onAbort, { once: true });
  }
  return {
    controller,
    release: () => present.forEach((signal) => signal.removeEventListener('abort', onAbort)),
  };
}

/** A signal with a deadline: see {@link withDeadlineSignal}. */
export interface DeadlineSignal {
  /** Aborts when the caller's signal does or the deadline passes; the caller's own when there is no deadline. */
  readonly signal: AbortSignal | undefined;
  /** Whether the deadline, not the caller, ended it. */
  expired(): boolean;
}

/**
 * `signal` that also aborts `ms` from now (no deadline when `ms` is 0). The timer needs no release
 * (`AbortSignal.timeout`: it keeps no process alive), so the deadline can outlive the call that
 * set it, as an answer's body is read after its headers came.
 */
export function withDeadlineSignal(signal: AbortSignal | undefined, ms: number): DeadlineSignal {
  if (!(ms > 0)) return { signal, expired: () => false };
  const timeout = AbortSignal.timeout(Math.min(ms, MAX_TIMER_MS));
  return {
    signal: signal === undefined ? timeout : AbortSignal.any([signal, timeout]),
    expired: () => timeout.aborted && signal?.aborted !== true,
  };
}

/** Resolves after `ms`, or rejects with `onAbort(signal)` (CANCELLED) as soon as `signal` aborts. */
export function sleep(ms: number, signal: AbortSignal | undefined, onAbort: OnAbort = cancelledBy): Promise<void> {
  if (signal?.aborted) return Promise.reject(onAbort(signal));
  return new Promise<void>((resolve, reject) => {
    const abort = () => {
      clearTimeout(timer);
      reject(onAbort(signal!));
    };
    const timer = setTimeout(
      () => {
        signal?.removeEventListener('abort', abort);
        resolve();
      },
      Math.min(ms, MAX_TIMER_MS),
    );
    signal?.addEventListener('abort', abort, { once: true });
  });
}

/**
 * The wait before attempt number `attempt` of a run (1, 2, …): a uniform draw below
 * `initialMs · 2^(attempt − 1)`, capped at `maxMs` ("full jitter"), so that clients that failed
 * together do not try again together.
 */
export function fullJitter(attempt: number, initialMs: number, maxMs: number): number {
  return Math.random() * Math.min(maxMs, initialMs * 2 ** (attempt - 1));
}

/**
 * `promise`, or `onTimeout()` thrown when it takes longer than `ms`: for a wait that has no signal
 * to heed (a storage probe, a port's read), which is left running but no longer waited for.
 */
export function withTimeout<T>(promise: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  return bounded(promise, undefined, ms, onTimeout);
}

/**
 * Bytes that count as progress for an idle timer: a server that drips a byte at a time keeps a
 * per-read timer happy for ever, so an idle window is met only by this many bytes (or the end).
 */
export const PROGRESS_BYTES = 16 * 1024;

/**
 * `body` with an idle timeout: it errors with `idle()` (and cancels `body`) when fewer than
 * {@link PROGRESS_BYTES} came within `idleMs` of the last window's start, unless the body ended.
 * Reads are not otherwise changed (no buffering, no copy).
 */
export function idleBounded(
  body: ReadableStream<Uint8Array>,
  idleMs: number,
  idle: () => PostGuardError,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let windowStart = Date.now();
  let windowBytes = 0;
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const left = Math.max(0, windowStart + idleMs - Date.now());
        let read: ReadableStreamReadResult<Uint8Array>;
        try {
          read = await bounded(reader.read(), undefined, left, idle);
        } catch (error) {
          void reader.cancel(error).catch(() => undefined);
          throw error;
        }
        if (read.done) {
          controller.close();
          return;
        }
        windowBytes += read.value.length;
        if (windowBytes >= PROGRESS_BYTES) {
          windowStart = Date.now();
          windowBytes = 0;
        }
        controller.enqueue(read.value);
      },
      cancel: (reason) => reader.cancel(reason),
    },
    { highWaterMark: 0 },
  );
}
