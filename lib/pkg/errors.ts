/**
 * Every failure the PKG client reports on purpose is a PkgClientError with a stable `code`.
 * Messages are for people; codes are for programs and never change meaning.
 *
 * These are not PostGuardErrors: lib/errors.ts holds the format and crypto codes, and the PKG
 * client's failures (network, identity sessions) are a different family. Both carry `code`, and
 * both cross the worker boundary with it (worker/errors.ts).
 */

export const PkgClientErrorCode = {
  /** The PKG could not be reached, timed out, or answered 5xx / 408. Worth retrying later. */
  PKG_UNAVAILABLE: 'PKG_UNAVAILABLE',
  /** The PKG answered 429; `retryAfter` holds its Retry-After in seconds when the header was readable. */
  RATE_LIMITED: 'RATE_LIMITED',
  /** The PKG refused a credential (401): a session JWT that does not verify, or an unknown API key. */
  UNAUTHORIZED: 'UNAUTHORIZED',
  /** The PKG refused the request (another 4xx); `serverCode` holds the PKG's own code, e.g. CHRONOLOGY. */
  PKG_REJECTED: 'PKG_REJECTED',
  /** The PKG answered something that is not what its API promises (bad JSON, a missing or malformed key). */
  BAD_RESPONSE: 'BAD_RESPONSE',
  /** The identity session was cancelled: in the Yivi app, by `session.cancel()`, or by the identity server. */
  SESSION_CANCELLED: 'SESSION_CANCELLED',
  /** The identity session timed out, or the identity server no longer knows it. */
  SESSION_TIMEOUT: 'SESSION_TIMEOUT',
  /** The session finished but did not prove what was asked (proof status not VALID, or not DONE). */
  NOT_VALID: 'NOT_VALID',
  /** The caller's AbortSignal fired. */
  ABORTED: 'ABORTED',
  /** An argument breaks a rule (the message says which). Nothing was sent. */
  INVALID_ARGUMENT: 'INVALID_ARGUMENT',
} as const;

export type PkgClientErrorCode = (typeof PkgClientErrorCode)[keyof typeof PkgClientErrorCode];

export interface PkgClientErrorDetails {
  cause?: unknown;
  /** HTTP status of the answer behind the failure, when there was one. */
  status?: number;
  /** The PKG's error code from its JSON envelope (`{"error": true, "code": …}`), when it sent one. */
  serverCode?: string;
  /** Seconds to wait before retrying (RATE_LIMITED), when known. */
  retryAfter?: number;
  /** The URL that was called. Never carries credentials: JWTs and API keys travel in headers. */
  url?: string;
}

export class PkgClientError extends Error {
  readonly code: PkgClientErrorCode;
  readonly status: number | undefined;
  readonly serverCode: string | undefined;
  readonly retryAfter: number | undefined;
  readonly url: string | undefined;

  constructor(code: PkgClientErrorCode, message: string, details: PkgClientErrorDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'PkgClientError';
    this.code = code;
    this.status = details.status;
    this.serverCode = details.serverCode;
    this.retryAfter = details.retryAfter;
    this.url = details.url;
  }
}

export const isPkgClientError = (e: unknown): e is PkgClientError => e instanceof PkgClientError;

export const aborted = (reason?: unknown): PkgClientError =>
  new PkgClientError(PkgClientErrorCode.ABORTED, 'the operation was aborted', { cause: reason });

export const badResponse = (url: string, message: string, status?: number): PkgClientError =>
  new PkgClientError(
    PkgClientErrorCode.BAD_RESPONSE,
    `${message} (${url})`,
    status === undefined ? { url } : { url, status },
  );

export const invalidArgument = (message: string): PkgClientError =>
  new PkgClientError(PkgClientErrorCode.INVALID_ARGUMENT, message);

/** Throws ABORTED if the signal has fired. */
export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw aborted(signal.reason);
}
