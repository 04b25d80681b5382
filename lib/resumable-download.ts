import { MAX_TIMER_MS, PROGRESS_BYTES, bounded, cancelledBy, idleBounded, sleep } from './bounded.js';
import { ErrorCode, InputError, PostGuardError, describeThrown } from './errors.js';
import { contentLength, contentRange, reencoded, strongEtag } from './http-lengths.js';
import { toHeaders, type CredentialsMode, type RequestHeaders } from './web-types.js';

/**
 * A download that survives a dropped connection: when the body errors or stalls before all its
 * bytes came, the same URL is asked again with `Range: bytes=N-`, N the bytes already handed
 * downstream, and the answer continues the same stream; the reader sees nothing of it.
 *
 * Why byte N and not a segment boundary: whoever reads a PostGuard ciphertext (the STREAM opener)
 * authenticates every segment, so a file spliced from two versions, or changed between two
 * requests, fails authentication whichever byte the splice is at. Resuming at the byte already
 * delivered therefore proves as much as resuming at a segment start, and needs no buffering of a
 * partial segment: nothing is kept beyond the chunk in hand.
 *
 * A resume answer is taken only when it provably continues at N, judged from what a cross-origin
 * page can read (the status and Content-Length; Cryptify exposes no other header): a 206 whose
 * Content-Length is exactly the bytes still missing, and whose Content-Range, when readable, says
 * `bytes N-(size-1)/size`; or a 200 of the whole file (same Content-Length), whose first N bytes
 * are skipped. Anything else means the file changed or the server cannot continue, and fails.
 */

/** How long to wait between attempts to resume: full jitter over a doubling ceiling. */
export interface ResumeBackoff {
  /** The ceiling of the first wait; it doubles with each attempt in a row (default 500 ms). */
  initialMs?: number;
  /** The largest ceiling (default 30 s). */
  maxMs?: number;
}

/** Options of {@link resumableDownload}. */
export interface ResumableDownloadOptions {
  /** The fetch implementation; default the global `fetch`. */
  fetch?: typeof fetch;
  /** Request headers of every request (an Authorization, say); `Range` is the download's own. */
  headers?: RequestHeaders;
  /** Default `same-origin`. */
  credentials?: CredentialsMode;
  /** Ends the download: the promise rejects, or the readable errors, with CANCELLED. */
  signal?: AbortSignal;
  /**
   * How long a response may take, and then how long its body may go without delivering 16 KiB
   * (`PROGRESS_BYTES`, or the rest of it) (default 30 s): a server that drips a byte at a time
   * stalls too. A first response slower than that fails with SOURCE_FAILED; a body that stalls is
   * resumed, and after `maxResumes` + 1 stalls in a row that each brought less than 16 KiB the
   * download fails with SOURCE_FAILED.
   */
  stallMs?: number;
  /**
   * Attempts to resume in a row that bring no new byte before the download fails (default 5).
   * An attempt that delivers bytes starts the count, and the backoff, afresh: a long download
   * over a flaky network may resume many times while it makes progress.
   */
  maxResumes?: number;
  /** The wait before each attempt (default: up to 500 ms, doubling, at most 30 s). */
  backoff?: ResumeBackoff;
  /**
   * Told before each attempt to resume: the byte it continues from and its number in the current
   * run of attempts (1 to `maxResumes`). What it throws is ignored.
   */
  onResume?(offset: number, attempt: number): void;
}

/** A download under way: its bytes, and what its first answer said of them. */
export interface ResumableDownload {
  /**
   * The body, resumed as needed. It closes only after exactly `size` bytes (when known); it errors
   * with TRUNCATED when the connection kept dropping without progress (the last cause in
   * `cause`), SOURCE_FAILED when a resume answer does not continue the same bytes or the body
   * stalled to the end, CANCELLED on `signal`. Cancelling it aborts the request.
   */
  readonly readable: ReadableStream<Uint8Array>;
  /**
   * Bytes of the file: the first answer's Content-Length. Undefined when it has none (or the body
   * is re-encoded): such a download cannot be resumed, and a drop fails it with SOURCE_FAILED.
   */
  readonly size: number | undefined;
  /** The first answer's strong ETag, when readable: a later request may pin the same bytes (If-Match). */
  readonly etag?: string;
}

/** Defaults of {@link ResumableDownloadOptions}. */
export const RESUME_DEFAULTS = { stallMs: 30_000, maxResumes: 5, initialMs: 500, maxMs: 30_000 } as const;

const sourceFailed = (message: string, cause?: unknown) =>
  new PostGuardError(ErrorCode.SOURCE_FAILED, message, cause === undefined ? undefined : { cause });

const invalid = (message: string) => new InputError(ErrorCode.INVALID_INPUT, message);

/** A status worth asking again for: the server is busy or failing for now, not refusing. */
const transient = (status: number) => status === 408 || status === 429 || status >= 500;

function checked(options: ResumableDownloadOptions) {
  if (options === null || typeof options !== 'object') throw invalid('resumableDownload options must be an object');
  const positive = (value: unknown, name: string, fallback: number, zero = false) => {
    if (value === undefined) return fallback;
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || (!zero && value === 0))
      throw invalid(`${name} must be a ${zero ? 'non-negative' : 'positive'} number of milliseconds`);
    return Math.min(value, MAX_TIMER_MS);
  };
  const { maxResumes = RESUME_DEFAULTS.maxResumes, onResume } = options;
  if (!Number.isSafeInteger(maxResumes) || maxResumes < 0) throw invalid('maxResumes must be a non-negative integer');
  if (onResume !== undefined && typeof onResume !== 'function') throw invalid('onResume must be a function');
  if (toHeaders(options.headers).has('range'))
    throw invalid('resumableDownload sets Range itself: the headers must not have one');
  return {
    stallMs: positive(options.stallMs, 'stallMs', RESUME_DEFAULTS.stallMs),
    maxResumes,
    initialMs: positive(options.backoff?.initialMs, 'backoff.initialMs', RESUME_DEFAULTS.initialMs, true),
    maxMs: positive(options.backoff?.maxMs, 'backoff.maxMs', RESUME_DEFAULTS.maxMs, true),
  };
}

/** What an answer that is not a 2xx means, in words. */
function refused(status: number): PostGuardError {
  if (status === 404 || status === 410)
    return sourceFailed(
      `the file is not there (HTTP ${status}): the link is wrong, or the file expired or was removed`,
    );
  if (status === 412)
    return sourceFailed('the URL no longer serves the file its request was pinned to (HTTP 412 to If-Match)');
  return sourceFailed(`the URL answered HTTP ${status}`);
}

/** One request and its body being read. */
interface Leg {
  reader: ReadableStreamDefaultReader<Uint8Array>;
  abort: AbortController;
  /** Bytes still to skip at the body's start (a 200 to a resume: the whole file again). */
  skip: number;
  /** Bytes this leg delivered. */
  brought: number;
}

/**
 * Downloads `url`, resuming after a dropped or stalled connection (see the module comment). Resolves
 * once the first answer's headers are in. Rejects with SOURCE_FAILED when that answer is not a 2xx
 * (a 404 says the file is not there) or does not come within `stallMs`, CANCELLED on `signal`,
 * INVALID_INPUT for bad options.
 */
export async function resumableDownload(
  url: string | URL,
  options: ResumableDownloadOptions = {},
): Promise<ResumableDownload> {
  const settings = checked(options);
  const { stallMs, maxResumes } = settings;
  const doFetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  const seconds = `${stallMs / 1000} s`;

  // The download's life: the caller's signal or a cancelled readable ends every request and wait.
  const life = new AbortController();
  const onAbort = () => life.abort(options.signal!.reason);
  if (options.signal?.aborted) throw cancelledBy(options.signal, 'the download was cancelled');
  options.signal?.addEventListener('abort', onAbort, { once: true });
  const detach = () => options.signal?.removeEventListener('abort', onAbort);
  const cancelled = () => cancelledBy(life.signal, 'the download was cancelled');

  /** One GET, from `offset`; rejects with CANCELLED, or SOURCE_FAILED (failed or stalled). */
  const send = async (offset: number): Promise<{ response: Response; abort: AbortController }> => {
    const abort = new AbortController();
    const stop = () => abort.abort(life.signal.reason);
    life.signal.addEventListener('abort', stop, { once: true });
    const headers = toHeaders(options.headers);
    if (offset > 0) headers.set('range', `bytes=${offset}-`);
    try {
      const response = await bounded(
        doFetch(url, { headers, credentials: options.credentials ?? 'same-origin', signal: abort.signal }),
        life.signal,
        stallMs,
        () => sourceFailed(`the URL did not answer within ${seconds}`),
      );
      return { response, abort };
    } catch (cause) {
      abort.abort(cause);
      if (life.signal.aborted) throw cancelled();
      throw cause instanceof PostGuardError
        ? cause
        : sourceFailed(`the file could not be fetched: ${describeThrown(cause)}`, cause);
    } finally {
      life.signal.removeEventListener('abort', stop);
    }
  };
  const release = (leg: { abort: AbortController; reader?: ReadableStreamDefaultReader<Uint8Array> }) => {
    leg.abort.abort();
    void leg.reader?.cancel().catch(() => undefined);
  };

  let first: Awaited<ReturnType<typeof send>>;
  try {
    first = await send(0);
  } catch (error) {
    detach();
    throw error;
  }
  const { response } = first;
  if (!response.ok) {
    first.abort.abort();
    await response.body?.cancel().catch(() => undefined);
    detach();
    throw refused(response.status);
  }
  const size = response.status === 200 && !reencoded(response.headers) ? contentLength(response.headers) : undefined;
  const etag = strongEtag(response.headers);
  if (response.body === null && size !== 0) {
    first.abort.abort();
    detach();
    throw sourceFailed(`the URL answered HTTP ${response.status} without a body`);
  }

  /** A body's reader that errors when it goes `stallMs` without 16 KiB (a drip is a stall). */
  const stalls = new WeakSet<PostGuardError>();
  const watched = (body: ReadableStream<Uint8Array>) =>
    idleBounded(body, stallMs, () => {
      const error = sourceFailed(
        `the download stalled: less than ${PROGRESS_BYTES} bytes in ${seconds} after ${delivered} bytes`,
      );
      stalls.add(error);
      return error;
    }).getReader();
  /**
   * Legs in a row that stalled with less than 16 KiB: progress is a piece, not a byte, so a server
   * that drips, or answers every resume with a byte or two and stalls, ends after `maxResumes`.
   */
  let slow = 0;
  let leg: Leg | undefined =
    response.body === null ? undefined : { ...first, reader: watched(response.body), skip: 0, brought: 0 };
  let delivered = 0;
  /** Attempts to resume since the last new byte. */
  let streak = 0;
  let lastFailure: PostGuardError | undefined;

  /** Judges a resume answer: the leg that continues at `offset`, or a reason to try again, or a fatal error. */
  const judge = (answer: Response, offset: number): { skip: number } | { retry: PostGuardError } => {
    const total = size!;
    const status = answer.status;
    const later = strongEtag(answer.headers);
    if (etag !== undefined && later !== undefined && later !== etag)
      throw sourceFailed(`the file changed while it was downloaded (its ETag went from ${etag} to ${later})`);
    if (transient(status)) return { retry: sourceFailed(`a resume at byte ${offset} was answered HTTP ${status}`) };
    if (status === 416)
      throw sourceFailed(`the URL has no byte ${offset} any more (HTTP 416): the file changed while it was downloaded`);
    if (status !== 200 && status !== 206) throw refused(status);
    if (reencoded(answer.headers) || answer.body === null)
      throw sourceFailed(
        `a resume at byte ${offset} was answered with ${answer.body === null ? 'no body' : 're-encoded bytes'}`,
      );
    const length = contentLength(answer.headers);
    if (status === 200) {
      if (length !== total)
        throw sourceFailed(
          `the file changed while it was downloaded: it was ${total} bytes, it is ${length ?? 'of unknown size'} now`,
        );
      return { skip: offset };
    }
    if (length !== total - offset)
      throw sourceFailed(
        `a resume at byte ${offset} of ${total} was answered with ${length ?? 'an unknown number of'} bytes instead of the ${total - offset} still missing: the file changed`,
      );
    // Readable only same-origin (or where the host exposes it); when it is, it must agree too.
    if (answer.headers.has('content-range')) {
      const range = contentRange(answer.headers);
      if (range === undefined || range.start !== offset || range.end !== total - 1 || range.total !== total)
        throw sourceFailed(
          `a resume at byte ${offset} of ${total} was answered with Content-Range ${answer.headers.get('content-range')}: the file changed`,
        );
    }
    return { skip: 0 };
  };

  /** A new leg from the delivered byte, after the backoff; throws when the download must end. */
  const resume = async (): Promise<Leg> => {
    for (;;) {
      streak += 1;
      if (streak > maxResumes) {
        const why = lastFailure!;
        throw new PostGuardError(
          why.code,
          `the download stopped after ${delivered} of its ${size} bytes and ${maxResumes} attempts in a row to resume it brought nothing: ${why.message}`,
          { cause: why },
        );
      }
      const ceiling = Math.min(settings.maxMs, settings.initialMs * 2 ** (streak - 1));
      await sleep(Math.random() * ceiling, life.signal).catch(() => Promise.reject(cancelled()));
      try {
        options.onResume?.(delivered, streak);
      } catch {
        // A progress callback's fault is not the download's.
      }
      let attempt: Awaited<ReturnType<typeof send>>;
      try {
        attempt = await send(delivered);
      } catch (error) {
        if (life.signal.aborted) throw cancelled();
        lastFailure = error as PostGuardError;
        continue;
      }
      let verdict: ReturnType<typeof judge>;
      try {
        verdict = judge(attempt.response, delivered);
      } catch (error) {
        release(attempt);
        await attempt.response.body?.cancel().catch(() => undefined);
        throw error;
      }
      if ('retry' in verdict) {
        release(attempt);
        lastFailure = verdict.retry;
        continue;
      }
      return { abort: attempt.abort, reader: watched(attempt.response.body!), skip: verdict.skip, brought: 0 };
    }
  };

  /** Ends the current leg after `error`: resumable, or the download's end (thrown). */
  const drop = (error: PostGuardError) => {
    if (stalls.has(error) && (leg?.brought ?? 0) < PROGRESS_BYTES && ++slow > maxResumes) {
      if (leg !== undefined) release(leg);
      leg = undefined;
      throw new PostGuardError(
        error.code,
        `the download stopped after ${delivered} of its ${size ?? 'unknown number of'} bytes: ${maxResumes + 1} times in a row, less than ${PROGRESS_BYTES} bytes came in ${seconds}`,
        { cause: error },
      );
    }
    if (leg !== undefined) release(leg);
    leg = undefined;
    if (life.signal.aborted) throw cancelled();
    if (size === undefined) throw error; // nothing says where a resume would continue
    lastFailure = error;
  };

  /** The next bytes for the reader, or undefined at the end. */
  const next = async (): Promise<Uint8Array | undefined> => {
    for (;;) {
      if (size !== undefined && delivered === size) return undefined;
      if (leg === undefined) leg = await resume();
      let read: ReadableStreamReadResult<Uint8Array>;
      try {
        // The reader has the idle timer (watched); the signal ends the wait at once.
        read = await bounded(leg.reader.read(), life.signal, undefined, () => cancelled());
      } catch (error) {
        drop(
          error instanceof PostGuardError
            ? error
            : size === undefined
              ? sourceFailed(`the download failed after ${delivered} bytes: ${describeThrown(error)}`, error)
              : new PostGuardError(
                  ErrorCode.TRUNCATED,
                  `the connection was cut after ${delivered} of ${size} bytes: ${describeThrown(error)}`,
                  { cause: error },
                ),
        );
        continue;
      }
      if (read.done) {
        if (size === undefined) return undefined;
        drop(new PostGuardError(ErrorCode.TRUNCATED, `the body ended after ${delivered} of ${size} bytes`));
        continue;
      }
      let chunk = read.value;
      if (leg.skip > 0) {
        const skipped = Math.min(leg.skip, chunk.length);
        leg.skip -= skipped;
        chunk = chunk.subarray(skipped);
      }
      if (chunk.length === 0) continue;
      if (size !== undefined && delivered + chunk.length > size)
        throw sourceFailed(`the URL sent more than the ${size} bytes its Content-Length announced`);
      delivered += chunk.length;
      leg.brought += chunk.length;
      streak = 0;
      if (leg.brought >= PROGRESS_BYTES) slow = 0;
      if (delivered === size) release(leg);
      return chunk;
    }
  };

  let stream: ReadableStreamDefaultController<Uint8Array> | undefined;
  const finish = () => {
    detach();
    if (leg !== undefined) release(leg);
    leg = undefined;
  };
  // The caller's signal errors the readable and ends the request at once, not at the next read.
  life.signal.addEventListener(
    'abort',
    () => {
      stream?.error(cancelled());
      finish();
    },
    { once: true },
  );
  const readable = new ReadableStream<Uint8Array>(
    {
      start(controller) {
        stream = controller;
      },
      async pull(controller) {
        let chunk: Uint8Array | undefined;
        try {
          chunk = await next();
        } catch (error) {
          finish();
          throw error;
        }
        if (chunk === undefined) {
          finish();
          controller.close();
        } else controller.enqueue(chunk);
      },
      cancel(reason) {
        stream = undefined;
        life.abort(reason);
        finish();
      },
    },
    { highWaterMark: 0 },
  );
  return { readable, size, ...(etag !== undefined ? { etag } : {}) };
}
