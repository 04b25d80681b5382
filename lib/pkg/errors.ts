/**
 * Every failure the PKG client reports on purpose is a PkgClientError with a stable `code`.
 * Messages are for people; codes are for programs and never change meaning.
 *
 * These are not PostGuardErrors: lib/errors.ts holds the format and crypto codes, and the PKG
 * client's failures (network, identity sessions) are a different family. Both carry `code`, and
 * both cross the worker boundary with it (worker/errors.ts).
 */

/** The codes a `PkgClientError` carries, by name: compare `error.code` with these. */
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
  /** A cache-only key request (`cacheOnly`) found no live key or JWT: none was kept, it expired or was forgotten. */
  NOT_CACHED: 'NOT_CACHED',
  /**
   * The passkey tier: this browser or the authenticator cannot evaluate the WebAuthn PRF extension,
   * so no wrapping key can come from it. Nothing is stored under another key instead.
   */
  PRF_UNAVAILABLE: 'PRF_UNAVAILABLE',
  /**
   * The passkey tier: no passkey gave its key. None is registered, the user refused or let the
   * prompt time out, the authenticator is gone or does not hold the credential, or it did not
   * verify the user.
   */
  PASSKEY_FAILED: 'PASSKEY_FAILED',
  /** The passkey tier: the cached keys were sealed under another passkey than the one in use. */
  PASSKEY_MISMATCH: 'PASSKEY_MISMATCH',
} as const;

/** One of the stable codes of {@link PkgClientErrorCode}, as carried by `PkgClientError.code`. */
export type PkgClientErrorCode = (typeof PkgClientErrorCode)[keyof typeof PkgClientErrorCode];

/** What a `PkgClientError` carries besides its code and message. */
export interface PkgClientErrorDetails {
  /** The underlying failure (a network error, the abort reason), when there was one. */
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

/**
 * A failure of the PKG client: the PKG or the identity server unreachable or refusing, a session
 * cancelled or timed out, an abort, a bad argument. Branch on `code`; the other fields say more
 * where the code's description names them (`retryAfter` for RATE_LIMITED, `serverCode` for
 * PKG_REJECTED). Not a `PostGuardError`: that family is the format's and the crypto's.
 */
export class PkgClientError extends Error {
  /** What went wrong, as a stable {@link PkgClientErrorCode}. */
  readonly code: PkgClientErrorCode;
  /** HTTP status of the answer behind the failure, when there was one. */
  readonly status: number | undefined;
  /** The PKG's error code from its JSON envelope, e.g. CHRONOLOGY, when it sent one. */
  readonly serverCode: string | undefined;
  /** Seconds to wait before retrying (RATE_LIMITED), when known. */
  readonly retryAfter: number | undefined;
  /** The URL that was called (never with credentials in it). */
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

/** Whether `e` is a `PkgClientError` (from this copy of the library: the worker rebuilds them as such). */
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
