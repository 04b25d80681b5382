import { withDeadlineSignal } from '../net/waits.js';
import { PkgClientError, PkgClientErrorCode, aborted, badResponse } from './errors.js';

/**
 * HTTP exchanges with the PKG: a deadline per exchange, the caller's AbortSignal, bounded body
 * reads, and one mapping from statuses to error codes. Only fetch and streams: runs in pages,
 * workers, service workers and Node.
 */

export interface HttpContext {
  readonly fetch: typeof fetch;
  /** Deadline for one exchange (request, response headers and body). */
  readonly timeoutMs: number;
  /** Sent with every request (e.g. X-POSTGUARD-CLIENT-VERSION). */
  readonly headers: Readonly<Record<string, string>>;
}

/** Responses we read whole are small (keys, JWTs, error envelopes); anything bigger is not the PKG. */
export const MAX_BODY_BYTES = 64 * 1024;

/**
 * Runs `exchange` under a deadline and the caller's signal. A rejection caused by either becomes
 * ABORTED (the caller's signal) or PKG_UNAVAILABLE (the deadline); a fetch TypeError (network,
 * DNS, CORS) becomes PKG_UNAVAILABLE. PkgClientErrors pass through.
 */
export async function withDeadline<T>(
  ctx: HttpContext,
  url: string,
  signal: AbortSignal | undefined,
  exchange: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  if (signal?.aborted) throw aborted(signal.reason);
  const deadline = withDeadlineSignal(signal, ctx.timeoutMs);
  try {
    return await exchange(deadline.signal ?? new AbortController().signal);
  } catch (cause) {
    if (signal?.aborted) throw aborted(signal.reason);
    if (deadline.expired()) {
      throw new PkgClientError(PkgClientErrorCode.PKG_UNAVAILABLE, `no answer within ${ctx.timeoutMs} ms (${url})`, {
        url,
        cause,
      });
    }
    if (cause instanceof PkgClientError) throw cause;
    throw new PkgClientError(PkgClientErrorCode.PKG_UNAVAILABLE, `the PKG could not be reached (${url})`, {
      url,
      cause,
    });
  }
}

/**
 * A response body as UTF-8 text, or `undefined` once it grows past `limit` bytes (the body is then
 * cancelled, so a hostile or broken server cannot make us hold more). Each caller turns
 * `undefined` into its own error. Shared by the PKG client, the PKG's identity-server client and
 * the SDK: every whole-body read of a peer's answer goes through here.
 */
export async function readLimitedText(response: Response, limit: number): Promise<string | undefined> {
  if (response.body === null) return '';
  const reader = response.body.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => undefined);
      return undefined;
    }
    parts.push(value);
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const part of parts) {
    bytes.set(part, offset);
    offset += part.byteLength;
  }
  return new TextDecoder().decode(bytes);
}

/** The body as text, refusing more than `limit` bytes (the stream is cancelled past it). */
export async function readText(response: Response, url: string, limit = MAX_BODY_BYTES): Promise<string> {
  const text = await readLimitedText(response, limit);
  if (text === undefined) throw badResponse(url, `response body larger than ${limit} bytes`, response.status);
  return text;
}

export async function readJson(response: Response, url: string): Promise<unknown> {
  const text = await readText(response, url);
  try {
    return JSON.parse(text) as unknown;
  } catch (cause) {
    throw new PkgClientError(PkgClientErrorCode.BAD_RESPONSE, `the PKG's answer is not JSON (${url})`, {
      url,
      status: response.status,
      cause,
    });
  }
}

/** Seconds from a Retry-After header (delta-seconds or an HTTP date); undefined if absent or unreadable. */
export function retryAfterSeconds(header: string | null, nowMs = Date.now()): number | undefined {
  if (header === null) return undefined;
  const trimmed = header.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  const date = Date.parse(trimmed);
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil((date - nowMs) / 1000));
}

/** The PKG's own error code from its envelope `{"error": true, "code": "…", "message": "…"}`, if any. */
function envelopeCode(text: string): string | undefined {
  try {
    const body = JSON.parse(text) as unknown;
    if (typeof body === 'object' && body !== null) {
      const code = (body as { code?: unknown }).code;
      if (typeof code === 'string' && /^[A-Z_]{1,64}$/.test(code)) return code;
    }
  } catch {
    // pg-pkg's framework errors and 429s may be plain text: no code then.
  }
  return undefined;
}

/** The typed error for a non-2xx answer (its body is consumed). */
export async function statusError(response: Response, url: string): Promise<PkgClientError> {
  const { status } = response;
  let text = '';
  try {
    text = await readText(response, url);
  } catch {
    // An unreadable or oversized error body changes nothing about the status.
  }
  const serverCode = envelopeCode(text);
  const details = { url, status, ...(serverCode === undefined ? {} : { serverCode }) };
  if (status === 429) {
    const retryAfter = retryAfterSeconds(response.headers.get('retry-after'));
    return new PkgClientError(PkgClientErrorCode.RATE_LIMITED, `the PKG asks to slow down (${url})`, {
      ...details,
      ...(retryAfter === undefined ? {} : { retryAfter }),
    });
  }
  if (status >= 500 || status === 408) {
    return new PkgClientError(PkgClientErrorCode.PKG_UNAVAILABLE, `HTTP ${status} from the PKG (${url})`, details);
  }
  if (status === 401) {
    return new PkgClientError(PkgClientErrorCode.UNAUTHORIZED, `the PKG refused the credential (${url})`, details);
  }
  return new PkgClientError(
    PkgClientErrorCode.PKG_REJECTED,
    `the PKG refused the request: HTTP ${status}${serverCode === undefined ? '' : ` ${serverCode}`} (${url})`,
    details,
  );
}

/** Throws the typed error unless the answer is 2xx (or one of `also`, e.g. 304). */
export async function expectOk(response: Response, url: string, also: readonly number[] = []): Promise<Response> {
  if (response.ok || also.includes(response.status)) return response;
  throw await statusError(response, url);
}
