import { fullJitter, sleep, withDeadlineSignal } from '../lib/net/waits.js';
import { readLimitedText } from '../lib/pkg/index.js';
import type { FetchLike, ResolvedConfig } from './config.js';
import { ClientError, ClientErrorCode, type ClientErrorDetails } from './errors.js';

/**
 * One HTTP exchange with a deadline. Failures before an answer arrives are sorted into the
 * caller's abort (an ClientError ABORTED, thrown) and transport failures (returned, so the
 * caller decides whether to retry and which code to report).
 */

export type Exchange = { ok: true; response: Response } | { ok: false; reason: 'network' | 'timeout'; cause: unknown };

export const aborted = (cause?: unknown): ClientError =>
  new ClientError(ClientErrorCode.ABORTED, 'the operation was aborted', { cause });

export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw aborted(signal.reason);
}

const MAX_REDIRECTS = 5;

/**
 * `fetchFn` that never carries a request (and the app's headers) to another origin: redirects are
 * taken by hand, followed only within the origin asked and only for GET and HEAD, and anything
 * else is REDIRECT_REFUSED. A browser hides a redirect's target from the page ('opaqueredirect'),
 * so there every redirect is refused: the storage services we know answer without one.
 */
export function sameOriginFetch(fetchFn: FetchLike): FetchLike {
  return async (url, init) => {
    const origin = new URL(url).origin;
    const method = (init.method ?? 'GET').toUpperCase();
    let at = url;
    for (let hop = 0; ; hop++) {
      const response = await fetchFn(at, { ...init, redirect: 'manual' });
      const location = response.headers.get('location');
      const redirect =
        response.type === 'opaqueredirect' || (response.status >= 300 && response.status < 400 && location !== null);
      if (!redirect) return response;
      await response.body?.cancel().catch(() => undefined);
      const target = location === null ? undefined : new URL(location, at);
      const why =
        target === undefined
          ? 'the browser does not show where it leads'
          : target.origin !== origin
            ? `it leads to another origin (${target.origin})`
            : method !== 'GET' && method !== 'HEAD'
              ? `a ${method} is not sent again`
              : hop >= MAX_REDIRECTS
                ? `more than ${MAX_REDIRECTS} in a row`
                : undefined;
      if (why !== undefined)
        throw new ClientError(ClientErrorCode.REDIRECT_REFUSED, `${url} answered with a redirect, refused: ${why}`, {
          status: response.status,
          url,
        });
      at = target!.href;
    }
  };
}

export async function exchange(
  fetchFn: FetchLike,
  url: string,
  init: RequestInit,
  timeoutMs: number,
  signal: AbortSignal | undefined,
): Promise<Exchange> {
  throwIfAborted(signal);
  const deadline = withDeadlineSignal(signal, timeoutMs);
  try {
    return { ok: true, response: await fetchFn(url, { ...init, signal: deadline.signal! }) };
  } catch (cause) {
    if (signal?.aborted) throw aborted(signal.reason);
    if (cause instanceof ClientError) throw cause;
    return { ok: false, reason: deadline.expired() ? 'timeout' : 'network', cause };
  }
}

/** The storage service's answers are small JSON documents; a bigger body is not one of them. */
const MAX_ANSWER_BYTES = 64 * 1024;

/**
 * The body as JSON; undefined when it is over 64 KiB or does not parse (the request's deadline still
 * applies). A body that breaks off is no answer at all: ABORTED when `signal` cut it, else
 * STORAGE_UNAVAILABLE (the deadline, or the network), never a bad answer.
 */
export async function readJson(
  response: Response,
  signal: AbortSignal | undefined,
  what: string,
  details: ClientErrorDetails & { url: string },
): Promise<unknown> {
  let text: string | undefined;
  try {
    text = await readLimitedText(response, MAX_ANSWER_BYTES);
  } catch (cause) {
    if (signal?.aborted) throw aborted(signal.reason);
    throw new ClientError(
      ClientErrorCode.STORAGE_UNAVAILABLE,
      `${what}: the answer broke off before its end (the request's timeout, or the network)`,
      { ...details, cause },
    );
  }
  try {
    return text === undefined ? undefined : JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * Reads a body we do not need to its end (up to 64 KiB, under the request's deadline), so the
 * connection can be reused and the request ends as finished: cancelling the body of an answer that
 * arrived whole still aborts its request, which a browser's network panel lists as cancelled. Only
 * a body larger than any answer of the service is cancelled.
 */
export async function discard(response: Response): Promise<void> {
  await readLimitedText(response, MAX_ANSWER_BYTES).catch(() => undefined);
}

/** A short, single-line excerpt of an error body, for messages (never more than 200 characters). */
export async function excerpt(response: Response): Promise<string> {
  const text = (await readLimitedText(response, 8 * 1024).catch(() => '')) ?? '';
  const line = text.replace(/\p{Cc}+/gu, ' ').trim();
  return line.length > 200 ? `${line.slice(0, 197)}...` : line;
}

/** Statuses after which the same request may succeed later. */
export const isTransientStatus = (status: number): boolean => status >= 500 || status === 408 || status === 429;

/**
 * Waits before attempt `attempt` (2, 3, …): lib/net's full jitter below
 * initialDelayMs · 2^(attempt − 2), capped at maxDelayMs, so clients that failed together do not
 * retry together; ABORTED as soon as `signal` fires.
 */
export function backoff(
  attempt: number,
  retry: ResolvedConfig['retry'],
  signal: AbortSignal | undefined,
): Promise<void> {
  return sleep(fullJitter(attempt - 1, retry.initialDelayMs, retry.maxDelayMs), signal, (s) => aborted(s.reason));
}
