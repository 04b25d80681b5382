/**
 * Every failure the library reports is a PostGuardError with a stable `code`.
 * Messages are for people; codes are for programs and never change meaning.
 */

/** The codes a `PostGuardError` carries, by name: compare `error.code` with these. */
export const ErrorCode = {
  /** The input does not start with the PostGuard prelude. */
  NOT_POSTGUARD: 'NOT_POSTGUARD',
  /** The preamble names a format version we do not read. */
  UNSUPPORTED_VERSION: 'UNSUPPORTED_VERSION',
  /** The header length field exceeds the format's 1 MiB bound. */
  HEADER_TOO_LARGE: 'HEADER_TOO_LARGE',
  /** A length, count or value in the framing or a bincode blob breaks a format rule. */
  MALFORMED: 'MALFORMED',
  /** The input ended before the format said it would. */
  TRUNCATED: 'TRUNCATED',
  /**
   * Armored text (lib/armor.ts) breaks the armor's layout: a missing or wrong BEGIN/END line, a
   * line of the wrong length, a character outside base64, misplaced padding, text after END.
   */
  ARMOR_INVALID: 'ARMOR_INVALID',
  /** A header or payload signature does not verify. */
  BAD_SIGNATURE: 'BAD_SIGNATURE',
  /** The sender named in the header differs from the copy sealed inside the encryption (a re-signed header). */
  SENDER_MISMATCH: 'SENDER_MISMATCH',
  /** The header does not list the requested recipient id. */
  UNKNOWN_RECIPIENT: 'UNKNOWN_RECIPIENT',
  /** The user secret key does not open this recipient's key capsule. */
  WRONG_KEY: 'WRONG_KEY',
  /**
   * Given a PKG's key set (candidate verifying keys with their statuses), the header verifies only
   * under a key the PKG has retired: the file was sealed and signed before a rotation whose old key
   * is now retired, and the PKG no longer issues keys that open it.
   */
  NO_MATCHING_KEY: 'NO_MATCHING_KEY',
  /** Payload authentication failed: bytes were changed, reordered, dropped or added. */
  TAMPERED: 'TAMPERED',
  /** A ciphertext in the other mode (in-memory vs streaming) was given. */
  WRONG_MODE: 'WRONG_MODE',
  /** A key string or key bytes are not a valid encoding of the expected key. */
  INVALID_KEY: 'INVALID_KEY',
  /** A policy or option object is not acceptable (bad timestamp, missing field, ...). */
  INVALID_POLICY: 'INVALID_POLICY',
  /** A value is larger than the format can carry (e.g. an in-memory message of 4 GiB). */
  TOO_LARGE: 'TOO_LARGE',
  /** The input stream failed (errored) while sealing or unsealing. */
  SOURCE_FAILED: 'SOURCE_FAILED',
  /** The output stream failed (errored or was aborted) while sealing or unsealing. */
  SINK_FAILED: 'SINK_FAILED',
  /**
   * The reader of the output went away (a download the user stopped, a tab closed): a choice,
   * not a fault of the file or of a device. Nothing that was written is complete.
   */
  CANCELLED: 'CANCELLED',
  /** An argument is of the wrong type or shape (e.g. a stream chunk that is not bytes). */
  INVALID_INPUT: 'INVALID_INPUT',
  /** An object was used after it was consumed or in the wrong state. */
  INVALID_STATE: 'INVALID_STATE',
} as const;

/** One of the stable codes of {@link ErrorCode}, as carried by `PostGuardError.code`. */
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/**
 * The base of every error the library throws (and the worker and service worker relay). Branch
 * on `code`, not on the message or the subclass; `cause` holds an underlying error where there is
 * one (a failed stream's own error, for example).
 */
export class PostGuardError extends Error {
  /** What went wrong, as a stable {@link ErrorCode}. */
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/** The bytes are not a well-formed PostGuard ciphertext (framing, bincode, lengths). */
export class FormatError extends PostGuardError {}

/** Something that was authenticated failed to verify: signature, AEAD tag, key capsule. */
export class AuthenticationError extends PostGuardError {}

/** A key, policy or option given by the caller is invalid. */
export class InputError extends PostGuardError {}

export const notPostGuard = () =>
  new FormatError(ErrorCode.NOT_POSTGUARD, 'input does not start with the PostGuard prelude');

export const truncated = (what: string) => new FormatError(ErrorCode.TRUNCATED, `input ended inside ${what}`);

export const malformed = (what: string) => new FormatError(ErrorCode.MALFORMED, what);

export const invalidKey = (what: string) => new InputError(ErrorCode.INVALID_KEY, what);

export const invalidPolicy = (what: string) => new InputError(ErrorCode.INVALID_POLICY, what);

export const tampered = (what: string) => new AuthenticationError(ErrorCode.TAMPERED, what);

export const badSignature = (what: string) => new AuthenticationError(ErrorCode.BAD_SIGNATURE, what);

/**
 * True for errors this library raised on purpose (as opposed to bugs or platform failures). Safe
 * on anything a caller threw, a Proxy whose traps throw included: false then.
 */
export function isPostGuardError(e: unknown): e is PostGuardError {
  try {
    return e instanceof PostGuardError;
  } catch {
    return false;
  }
}

/** What a thrown value says, without trusting it (its message or toString may throw too). */
export function describeThrown(thrown: unknown): string {
  try {
    const message: unknown = thrown instanceof Error ? thrown.message : String(thrown);
    return typeof message === 'string' ? message : 'a value that cannot be shown';
  } catch {
    return 'a value that cannot be shown';
  }
}
