import { ErrorCode, FormatError, PostGuardError, describeThrown } from '../errors.js';
import { toHeaders, type CredentialsMode, type RequestHeaders } from '../web-types.js';
import { PROGRESS_BYTES, bounded, cancelledBy, idleBounded, linked } from './waits.js';

/**
 * One request for bytes from elsewhere, with its ways out: the caller's signal ends it at once, the
 * answer must come within a timeout, and a body read for an exact span must bring
 * {@link PROGRESS_BYTES} per idle window (a drip is a stall). What both readers of ranges (the
 * ranged URL source and the resumable download) send and read goes through here.
 */

/** How a URL is fetched: its headers, credentials and fetch implementation. */
export interface RangedUrlFetch {
  /** Request headers (an Authorization, say); `Range` is set per request. */
  headers?: RequestHeaders;
  /** Default `same-origin`. */
  credentials?: CredentialsMode;
  /** The fetch implementation; default the global `fetch`. */
  fetch?: typeof fetch;
}

/** A request whose answer's headers are in. */
export interface Sent {
  readonly response: Response;
  /** The request's own signal: aborted by {@link end}, or by the signals it was sent with. */
  readonly signal: AbortSignal;
  /** Ends the request: aborts it, cancels its body and lets go of the signals it followed. */
  end(reason?: unknown): Promise<void>;
}

/** How one request is sent. */
export interface SendOptions {
  /** Default GET. */
  method?: 'GET' | 'HEAD';
  /** `bytes=a-b` or `bytes=a-`; none sends no Range (one in the caller's headers is dropped). */
  range?: string;
  /** Signals that end the request (CANCELLED). */
  signals?: readonly (AbortSignal | undefined)[];
  /** How long the answer's headers may take (SOURCE_FAILED after). */
  answerMs: number;
  /** What is asked, for messages: 'the URL', 'the ciphertext URL'. */
  what: string;
}

export const sourceFailed = (message: string, cause?: unknown) =>
  new PostGuardError(ErrorCode.SOURCE_FAILED, message, cause === undefined ? undefined : { cause });

/**
 * Sends one request and waits for its answer's headers. Rejects with CANCELLED when a signal
 * aborts, SOURCE_FAILED when the fetch fails or the answer does not come within `answerMs`.
 */
export async function send(url: string | URL, fetching: RangedUrlFetch, options: SendOptions): Promise<Sent> {
  const doFetch = fetching.fetch ?? globalThis.fetch.bind(globalThis);
  const { controller, release } = linked(...(options.signals ?? []));
  const headers = toHeaders(fetching.headers);
  if (options.range === undefined) headers.delete('range');
  else headers.set('range', options.range);
  const init = { method: options.method ?? 'GET', headers, credentials: fetching.credentials ?? 'same-origin' };
  try {
    const response = await bounded(
      doFetch(url, { ...init, signal: controller.signal }),
      controller.signal,
      options.answerMs,
      () => sourceFailed(`${options.what} did not answer within ${options.answerMs / 1000} s`),
    );
    const end = async (reason?: unknown) => {
      controller.abort(reason);
      release();
      await response.body?.cancel(reason).catch(() => undefined);
    };
    return { response, signal: controller.signal, end };
  } catch (cause) {
    controller.abort(cause);
    release();
    if (cause instanceof PostGuardError) throw cause; // CANCELLED, or no answer in time
    throw sourceFailed(`${options.what} could not be fetched: ${describeThrown(cause)}`, cause);
  }
}

/** How {@link readExactly} waits. */
export interface ReadExactlyOptions {
  /** How long the body may go without {@link PROGRESS_BYTES} (or its end). */
  idleMs: number;
  /** Where the span starts in the file, for messages. */
  offset: number;
  /** What is read, for messages. */
  what: string;
}

/**
 * Exactly `length` bytes of `sent`'s body, which then ends. SOURCE_FAILED when it sends more, goes
 * idle or fails; TRUNCATED when it ends short; CANCELLED when the request's signal aborts.
 */
export async function readExactly(sent: Sent, length: number, options: ReadExactlyOptions): Promise<Uint8Array> {
  const { offset, what, idleMs } = options;
  const out = new Uint8Array(length);
  let filled = 0;
  let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  try {
    if (sent.response.body === null) throw sourceFailed(`${what} answered without a body`);
    reader = idleBounded(sent.response.body, idleMs, () =>
      sourceFailed(
        `${what} stopped arriving: less than ${PROGRESS_BYTES} bytes in ${idleMs / 1000} s after ${filled} of ${length} bytes at ${offset}`,
      ),
    ).getReader();
    for (;;) {
      // The idle timer is the reader's; the signal ends the wait at once.
      const next = await bounded(reader.read(), sent.signal, undefined, () => sourceFailed(''));
      if (next.done) break;
      if (next.value.length > length - filled)
        throw sourceFailed(`${what} sent more than the ${length} bytes asked for at ${offset}`);
      out.set(next.value, filled);
      filled += next.value.length;
    }
  } catch (cause) {
    if (sent.signal.aborted && !(cause instanceof PostGuardError)) throw cancelledBy(sent.signal);
    throw cause instanceof PostGuardError
      ? cause
      : sourceFailed(`${what} could not be read: ${describeThrown(cause)}`, cause);
  } finally {
    await reader?.cancel().catch(() => undefined);
    await sent.end();
  }
  if (filled !== length)
    throw new FormatError(ErrorCode.TRUNCATED, `${what} sent ${filled} of the ${length} bytes asked for at ${offset}`);
  return out;
}
