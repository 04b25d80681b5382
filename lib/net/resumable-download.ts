import { ErrorCode, InputError, PostGuardError, describeThrown } from '../errors.js';
import { toHeaders, type CredentialsMode, type RequestHeaders } from '../web-types.js';
import { strongEtag } from './http-lengths.js';
import { judgeRangedAnswer, spanMismatch, wholeSize } from './ranged-answer.js';
import { send, sourceFailed, type Sent } from './request.js';
import { MAX_TIMER_MS, PROGRESS_BYTES, bounded, cancelledBy, fullJitter, idleBounded, sleep } from './waits.js';

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

const invalid = (message: string) => new InputError(ErrorCode.INVALID_INPUT, message);

/** A status worth asking again for: the server is busy or failing for now, not refusing. */
const transient = (status: number) => status === 408 || status === 429 || status >= 500;

type Settings = ReturnType<typeof checked>;

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

/**
 * How a resume answer continues the file of `total` bytes at `offset`: the bytes to skip at its
 * start (a 200 of the whole file: `offset`), or a reason to try again (a transient status). Throws
 * when the file changed or the server cannot continue.
 */
function continuation(answer: Response, offset: number, total: number, etag: string | undefined) {
  const later = strongEtag(answer.headers);
  if (etag !== undefined && later !== undefined && later !== etag)
    throw sourceFailed(`the file changed while it was downloaded (its ETag went from ${etag} to ${later})`);
  const status = answer.status;
  if (transient(status)) return { retry: sourceFailed(`a resume at byte ${offset} was answered HTTP ${status}`) };
  const judged = judgeRangedAnswer(answer, true);
  if (judged.kind === 'unsatisfiable')
    throw sourceFailed(`the URL has no byte ${offset} any more (HTTP 416): the file changed while it was downloaded`);
  if (judged.kind === 'refused') {
    if (status !== 200 && status !== 206) throw refused(status);
    throw sourceFailed(`a resume at byte ${offset} was answered with bytes it cannot continue from: ${judged.why}`);
  }
  if (answer.body === null) throw sourceFailed(`a resume at byte ${offset} was answered with no body`);
  if (judged.kind === 'whole') {
    if (judged.length !== total)
      throw sourceFailed(
        `the file changed while it was downloaded: it was ${total} bytes, it is ${judged.length ?? 'of unknown size'} now`,
      );
    return { skip: offset };
  }
  const why = spanMismatch(judged.span, { offset, length: total - offset, total });
  if (why !== undefined) throw sourceFailed(`a resume at byte ${offset} of ${total} ${why}`);
  return { skip: 0 };
}

/** One request and its body being read. */
interface Leg {
  sent: Sent;
  reader: ReadableStreamDefaultReader<Uint8Array>;
  /** Bytes still to skip at the body's start (a 200 to a resume: the whole file again). */
  skip: number;
  /** Bytes this leg delivered. */
  brought: number;
}

/** A download's state across its legs: what was delivered, and the runs of failed attempts. */
class Download {
  /** The download's life: the caller's signal or a cancelled readable ends every request and wait. */
  readonly life = new AbortController();
  size: number | undefined;
  etag: string | undefined;
  private leg: Leg | undefined;
  private delivered = 0;
  /** Attempts to resume since the last new byte. */
  private streak = 0;
  /**
   * Legs in a row that stalled with less than 16 KiB: progress is a piece, not a byte, so a server
   * that drips, or answers every resume with a byte or two and stalls, ends after `maxResumes`.
   */
  private slow = 0;
  private lastFailure: PostGuardError | undefined;
  private readonly stalls = new WeakSet<PostGuardError>();
  private readonly detach: () => void;

  constructor(
    private readonly url: string | URL,
    private readonly options: ResumableDownloadOptions,
    private readonly settings: Settings,
  ) {
    const signal = options.signal;
    const onAbort = () => this.life.abort(signal!.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    this.detach = () => signal?.removeEventListener('abort', onAbort);
  }

  readonly cancelled = () => cancelledBy(this.life.signal, 'the download was cancelled');

  /** One GET, from `offset`; rejects with CANCELLED, or SOURCE_FAILED (failed or stalled). */
  private async request(offset: number): Promise<Sent> {
    try {
      return await send(this.url, this.options, {
        ...(offset > 0 ? { range: `bytes=${offset}-` } : {}),
        signals: [this.life.signal],
        answerMs: this.settings.stallMs,
        what: 'the URL',
      });
    } catch (error) {
      if (this.life.signal.aborted) throw this.cancelled();
      throw error;
    }
  }

  /** The first answer: its size and ETag, and the first leg. */
  async start(): Promise<void> {
    let first: Sent;
    try {
      first = await this.request(0);
    } catch (error) {
      this.detach();
      throw error;
    }
    const { response } = first;
    if (!response.ok || (response.body === null && wholeSize(response) !== 0)) {
      await first.end();
      this.detach();
      throw response.ok
        ? sourceFailed(`the URL answered HTTP ${response.status} without a body`)
        : refused(response.status);
    }
    this.size = wholeSize(response);
    this.etag = strongEtag(response.headers);
    this.leg = response.body === null ? undefined : this.legOf(first, 0);
  }

  /** A leg over `sent`'s body, whose reader errors when it goes `stallMs` without 16 KiB (a drip is a stall). */
  private legOf(sent: Sent, skip: number): Leg {
    const seconds = `${this.settings.stallMs / 1000} s`;
    const reader = idleBounded(sent.response.body!, this.settings.stallMs, () => {
      const error = sourceFailed(
        `the download stalled: less than ${PROGRESS_BYTES} bytes in ${seconds} after ${this.delivered} bytes`,
      );
      this.stalls.add(error);
      return error;
    }).getReader();
    return { sent, reader, skip, brought: 0 };
  }

  private release(leg: { sent: Sent; reader?: ReadableStreamDefaultReader<Uint8Array> }): void {
    void leg.sent.end();
    void leg.reader?.cancel().catch(() => undefined);
  }

  /** A new leg from the delivered byte, after the backoff; throws when the download must end. */
  private async resume(): Promise<Leg> {
    const { maxResumes, initialMs, maxMs } = this.settings;
    for (;;) {
      this.streak += 1;
      if (this.streak > maxResumes) {
        const why = this.lastFailure!;
        throw new PostGuardError(
          why.code,
          `the download stopped after ${this.delivered} of its ${this.size} bytes and ${maxResumes} attempts in a row to resume it brought nothing: ${why.message}`,
          { cause: why },
        );
      }
      await sleep(fullJitter(this.streak, initialMs, maxMs), this.life.signal, this.cancelled);
      try {
        this.options.onResume?.(this.delivered, this.streak);
      } catch {
        // A progress callback's fault is not the download's.
      }
      let attempt: Sent;
      try {
        attempt = await this.request(this.delivered);
      } catch (error) {
        if (this.life.signal.aborted) throw this.cancelled();
        this.lastFailure = error as PostGuardError;
        continue;
      }
      let verdict: ReturnType<typeof continuation>;
      try {
        verdict = continuation(attempt.response, this.delivered, this.size!, this.etag);
      } catch (error) {
        await attempt.end();
        throw error;
      }
      if (verdict.skip !== undefined) return this.legOf(attempt, verdict.skip);
      void attempt.end();
      this.lastFailure = verdict.retry;
    }
  }

  /** Ends the current leg after `error`: resumable, or the download's end (thrown). */
  private drop(error: PostGuardError): void {
    const leg = this.leg;
    this.leg = undefined;
    if (leg !== undefined) this.release(leg);
    const { maxResumes } = this.settings;
    if (this.stalls.has(error) && (leg?.brought ?? 0) < PROGRESS_BYTES && ++this.slow > maxResumes)
      throw new PostGuardError(
        error.code,
        `the download stopped after ${this.delivered} of its ${this.size ?? 'unknown number of'} bytes: ${maxResumes + 1} times in a row, less than ${PROGRESS_BYTES} bytes came in ${this.settings.stallMs / 1000} s`,
        { cause: error },
      );
    if (this.life.signal.aborted) throw this.cancelled();
    if (this.size === undefined) throw error; // nothing says where a resume would continue
    this.lastFailure = error;
  }

  /** What a failed read of a leg means: the error itself, or the cut connection it says. */
  private readFailure(error: unknown): PostGuardError {
    if (error instanceof PostGuardError) return error;
    if (this.size === undefined)
      return sourceFailed(`the download failed after ${this.delivered} bytes: ${describeThrown(error)}`, error);
    return new PostGuardError(
      ErrorCode.TRUNCATED,
      `the connection was cut after ${this.delivered} of ${this.size} bytes: ${describeThrown(error)}`,
      { cause: error },
    );
  }

  /** The next bytes for the reader, or undefined at the end. */
  async next(): Promise<Uint8Array | undefined> {
    for (;;) {
      const size = this.size;
      if (size !== undefined && this.delivered === size) return undefined;
      const leg = (this.leg ??= await this.resume());
      let read: ReadableStreamReadResult<Uint8Array>;
      try {
        // The reader has the idle timer (legOf); the signal ends the wait at once.
        read = await bounded(leg.reader.read(), this.life.signal, undefined, this.cancelled, this.cancelled);
      } catch (error) {
        this.drop(this.readFailure(error));
        continue;
      }
      if (read.done) {
        if (size === undefined) return undefined;
        this.drop(new PostGuardError(ErrorCode.TRUNCATED, `the body ended after ${this.delivered} of ${size} bytes`));
        continue;
      }
      const skipped = Math.min(leg.skip, read.value.length);
      leg.skip -= skipped;
      const chunk = read.value.subarray(skipped);
      if (chunk.length === 0) continue;
      if (size !== undefined && this.delivered + chunk.length > size)
        throw sourceFailed(`the URL sent more than the ${size} bytes its Content-Length announced`);
      this.delivered += chunk.length;
      leg.brought += chunk.length;
      this.streak = 0;
      if (leg.brought >= PROGRESS_BYTES) this.slow = 0;
      if (this.delivered === size) this.release(leg);
      return chunk;
    }
  }

  /** Lets go of everything: the caller's signal, the current leg. */
  finish(): void {
    this.detach();
    if (this.leg !== undefined) this.release(this.leg);
    this.leg = undefined;
  }

  /** The bytes as a stream, which the caller's signal errors at once (not at the next read). */
  readable(): ReadableStream<Uint8Array> {
    let stream: ReadableStreamDefaultController<Uint8Array> | undefined;
    this.life.signal.addEventListener(
      'abort',
      () => {
        stream?.error(this.cancelled());
        this.finish();
      },
      { once: true },
    );
    return new ReadableStream<Uint8Array>(
      {
        start: (controller) => void (stream = controller),
        pull: async (controller) => {
          let chunk: Uint8Array | undefined;
          try {
            chunk = await this.next();
          } catch (error) {
            this.finish();
            throw error;
          }
          if (chunk === undefined) {
            this.finish();
            controller.close();
          } else controller.enqueue(chunk);
        },
        cancel: (reason) => {
          stream = undefined;
          this.life.abort(reason);
          this.finish();
        },
      },
      { highWaterMark: 0 },
    );
  }
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
  if (options.signal?.aborted) throw cancelledBy(options.signal, 'the download was cancelled');
  const download = new Download(url, options, settings);
  await download.start();
  const { size, etag } = download;
  return { readable: download.readable(), size, ...(etag !== undefined ? { etag } : {}) };
}
