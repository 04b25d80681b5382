/**
 * Every failure the client reports on purpose is a ClientError with a stable `code` (configuration
 * mistakes excepted: the constructor throws a TypeError naming the field). Messages are for
 * people; codes are for programs and never change meaning.
 */

/** The codes a `ClientError` carries, by name: compare `error.code` with these. */
export const ClientErrorCode = {
  /** An argument to encrypt(), a recipient helper or upload() breaks a rule (the message says which). */
  INVALID_INPUT: 'INVALID_INPUT',
  /** An API key that is not `PG-` followed by printable characters. Checked before anything is sent. */
  INVALID_API_KEY: 'INVALID_API_KEY',
  /** The PKG refused the API key (401/403): unknown, expired or revoked. */
  API_KEY_REJECTED: 'API_KEY_REJECTED',
  /** The PKG could not be reached, timed out, or answered 5xx / 408 / 429. Worth retrying later. */
  PKG_UNAVAILABLE: 'PKG_UNAVAILABLE',
  /** The PKG answered something the client cannot use (another 4xx, bad JSON, missing or unusable keys). */
  PKG_BAD_RESPONSE: 'PKG_BAD_RESPONSE',
  /** A file's content stream failed while it was being read. */
  INPUT_FAILED: 'INPUT_FAILED',
  /** Sealing failed for another reason (see `cause`). */
  SEAL_FAILED: 'SEAL_FAILED',
  /** The storage service could not be reached, timed out, or kept answering 5xx / 408 / 429 after the retries. */
  STORAGE_UNAVAILABLE: 'STORAGE_UNAVAILABLE',
  /** The storage service refused a request (4xx other than 404 and 413). */
  STORAGE_REJECTED: 'STORAGE_REJECTED',
  /** The storage service answered something the client cannot use (no upload token, no UUID). */
  STORAGE_BAD_RESPONSE: 'STORAGE_BAD_RESPONSE',
  /** The upload is over the storage service's per-upload or rolling limit (413). */
  UPLOAD_TOO_LARGE: 'UPLOAD_TOO_LARGE',
  /** The storage service no longer knows the upload session (404; e.g. it sat idle too long). */
  UPLOAD_EXPIRED: 'UPLOAD_EXPIRED',
  /**
   * The finalize request got no answer (network error or timeout): the upload may or may not be
   * complete. It is not retried automatically, because a repeated finalize makes the storage
   * service send its notification e-mails again.
   */
  FINALIZE_UNCONFIRMED: 'FINALIZE_UNCONFIRMED',
  /** The caller's AbortSignal fired. */
  ABORTED: 'ABORTED',
  /**
   * An unfinished upload's kept bytes are not the ones sealed (changed, truncated, or their record
   * edited): refused before anything is sent, and dropped.
   */
  KEPT_BYTES_CHANGED: 'KEPT_BYTES_CHANGED',
  /** A request was answered with a redirect to another origin (or one a browser does not show): not followed, the app's headers stay home. */
  REDIRECT_REFUSED: 'REDIRECT_REFUSED',
  /** A download did not finish within `timeouts.transferMs`, or an upload within `timeouts.uploadMs`. */
  TIMED_OUT: 'TIMED_OUT',
  /** The sealed object cannot run again: one of its inputs is a stream and was already read. */
  INVALID_STATE: 'INVALID_STATE',
  /**
   * A received bundle is not a ZIP this client can read (a record out of bounds, a count over the
   * limits, an entry compressed or encrypted), or an entry's bytes do not match its CRC-32 or size.
   * The bytes are the sender's: the decryption was fine, the ZIP inside is not.
   */
  BUNDLE_INVALID: 'BUNDLE_INVALID',
  /** `pg.sign.apiKey()` in a browser: an API key in a page can be read by anyone who opens it. */
  API_KEY_IN_BROWSER: 'API_KEY_IN_BROWSER',
  /** upload(), open({uuid}) or resumeUploads() without a `cryptifyUrl` in the configuration. */
  NO_STORAGE: 'NO_STORAGE',
  /** The identity session ended without a proof (cancelled, timed out, or the PKG refused it). */
  SESSION_FAILED: 'SESSION_FAILED',
  /** The file is not for the chosen recipient, or `recipient` names none of its recipients (the message lists them). */
  RECIPIENT_UNKNOWN: 'RECIPIENT_UNKNOWN',
  /** The file could not be opened: damaged, tampered, not PostGuard, not openable with the key, or under a master key the PKG retired (see `cause`, a PostGuardError with its own code: NO_MATCHING_KEY). */
  DECRYPTION_FAILED: 'DECRYPTION_FAILED',
  /** The file could not be fetched from its URL or the storage service (see `status`). */
  DOWNLOAD_FAILED: 'DOWNLOAD_FAILED',
  /** output 'bytes' for a plaintext larger than `maxBytes`: stream it or save it instead. */
  TOO_LARGE_FOR_MEMORY: 'TOO_LARGE_FOR_MEMORY',
  /** output 'save' without a decrypting service worker (configure `serviceWorker`). */
  NO_SERVICE_WORKER: 'NO_SERVICE_WORKER',
} as const;

/** One of the stable codes of {@link ClientErrorCode}, as carried by `ClientError.code`. */
export type ClientErrorCode = (typeof ClientErrorCode)[keyof typeof ClientErrorCode];

/** What a `ClientError` carries besides its code and message. */
export interface ClientErrorDetails {
  /** The underlying failure (a network error, the sealer's error, the abort reason), when there was one. */
  cause?: unknown;
  /** HTTP status of the answer that caused the failure, when there was one. */
  status?: number;
  /** The URL that was called (never carries credentials: API keys travel in headers). */
  url?: string;
  /** The upload this failure belongs to, once the storage service assigned one. */
  uuid?: string;
  /** Ciphertext bytes the storage service confirmed before the failure. */
  uploadedBytes?: number;
}

/**
 * A failure of the client: a bad argument, the PKG or the storage service unreachable or refusing, a
 * file that could not be read, an abort. Branch on `code`; for an upload, `uuid` and
 * `uploadedBytes` say how far it got.
 */
export class ClientError extends Error {
  /** What went wrong, as a stable {@link ClientErrorCode}. */
  readonly code: ClientErrorCode;
  /** HTTP status of the answer that caused the failure, when there was one. */
  readonly status: number | undefined;
  /** The URL that was called (never with credentials in it). */
  readonly url: string | undefined;
  /** The upload this failure belongs to, once the storage service assigned one. */
  readonly uuid: string | undefined;
  /** Ciphertext bytes the storage service confirmed before the failure. */
  readonly uploadedBytes: number | undefined;

  constructor(code: ClientErrorCode, message: string, details: ClientErrorDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = 'ClientError';
    this.code = code;
    this.status = details.status;
    this.url = details.url;
    this.uuid = details.uuid;
    this.uploadedBytes = details.uploadedBytes;
  }
}

/** Whether `e` is a `ClientError`. */
export const isClientError = (e: unknown): e is ClientError => e instanceof ClientError;

export const invalidInput = (message: string): ClientError => new ClientError(ClientErrorCode.INVALID_INPUT, message);
