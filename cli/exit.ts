import { ErrorCode, isPostGuardError } from 'postguard-ts';
import { PkgClientErrorCode, isPkgClientError } from 'postguard-ts/pkg';

/**
 * pg-cli's exit codes: what a script can rely on (cli/README.md lists them). One code per thing a
 * caller would handle differently: fix the command line, fix the files, retry later, talk to the
 * PKG's operator, scan again, try another identity, get a fresh copy of the file.
 */
export const Exit = {
  OK: 0,
  /** A bug or an unexpected platform failure. */
  INTERNAL: 1,
  /** The command line is wrong: unknown flag, missing argument, bad JSON, unknown recipient. */
  USAGE: 2,
  /** A file problem: input missing, unreadable or not a PostGuard file; output exists or cannot be written. */
  FILE: 3,
  /** The PKG could not be reached or failed (network, timeout, 5xx, 429, an answer that breaks its API). */
  PKG_UNAVAILABLE: 4,
  /** The PKG refused the request (401 for an API key, another 4xx). */
  PKG_REFUSED: 5,
  /** The identity session did not complete: cancelled, timed out, or the disclosure was not valid. */
  SESSION: 6,
  /** The disclosed identity's key does not open the file (the wrong person or the wrong values). */
  WRONG_KEY: 7,
  /** The ciphertext is damaged or was changed: authentication failed, truncated, malformed. */
  DAMAGED: 8,
  /** Interrupted by SIGINT (Ctrl-C) or SIGTERM: 128 + the signal number. */
  SIGINT: 130,
  SIGTERM: 143,
} as const;

export type ExitCode = (typeof Exit)[keyof typeof Exit];

/** A failure the CLI reports as one line and an exit code. */
export class CliError extends Error {
  constructor(
    readonly exitCode: ExitCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'CliError';
  }
}

export const usage = (message: string) => new CliError(Exit.USAGE, message);
export const fileProblem = (message: string, cause?: unknown) => new CliError(Exit.FILE, message, { cause });

const LIBRARY_EXITS: Record<ErrorCode, ExitCode> = {
  NOT_POSTGUARD: Exit.FILE,
  UNSUPPORTED_VERSION: Exit.FILE,
  WRONG_MODE: Exit.FILE,
  SOURCE_FAILED: Exit.FILE,
  SINK_FAILED: Exit.FILE,
  // The output's reader went away (a pipe closed early): the output is incomplete.
  CANCELLED: Exit.FILE,
  HEADER_TOO_LARGE: Exit.DAMAGED,
  MALFORMED: Exit.DAMAGED,
  TRUNCATED: Exit.DAMAGED,
  BAD_SIGNATURE: Exit.DAMAGED,
  SENDER_MISMATCH: Exit.DAMAGED,
  TAMPERED: Exit.DAMAGED,
  ARMOR_INVALID: Exit.DAMAGED,
  WRONG_KEY: Exit.WRONG_KEY,
  // The file is under a master key the PKG has retired: no key it issues will open it.
  NO_MATCHING_KEY: Exit.WRONG_KEY,
  UNKNOWN_RECIPIENT: Exit.USAGE,
  INVALID_POLICY: Exit.USAGE,
  TOO_LARGE: Exit.USAGE,
  // A key that does not decode came from the PKG (we never take keys on the command line).
  INVALID_KEY: Exit.PKG_UNAVAILABLE,
  INVALID_INPUT: Exit.INTERNAL,
  INVALID_STATE: Exit.INTERNAL,
};

const PKG_EXITS: Record<PkgClientErrorCode, ExitCode> = {
  PKG_UNAVAILABLE: Exit.PKG_UNAVAILABLE,
  RATE_LIMITED: Exit.PKG_UNAVAILABLE,
  BAD_RESPONSE: Exit.PKG_UNAVAILABLE,
  UNAUTHORIZED: Exit.PKG_REFUSED,
  PKG_REJECTED: Exit.PKG_REFUSED,
  SESSION_CANCELLED: Exit.SESSION,
  SESSION_TIMEOUT: Exit.SESSION,
  NOT_VALID: Exit.SESSION,
  // Only our own abort (a signal) aborts PKG calls; main.ts turns that into 130/143.
  ABORTED: Exit.INTERNAL,
  INVALID_ARGUMENT: Exit.USAGE,
  // The CLI asks the PKG for a key every time: it has no key cache, so these do not reach it.
  NOT_CACHED: Exit.SESSION,
  PRF_UNAVAILABLE: Exit.INTERNAL,
  PASSKEY_FAILED: Exit.INTERNAL,
  PASSKEY_MISMATCH: Exit.INTERNAL,
};

/** The one line and exit code for any failure. */
export function describeFailure(error: unknown): { exitCode: ExitCode; message: string } {
  if (error instanceof CliError) return { exitCode: error.exitCode, message: error.message };
  if (isPostGuardError(error)) {
    // A file we read or write failed under the library: our own error says which file and why.
    if (
      (error.code === ErrorCode.SOURCE_FAILED || error.code === ErrorCode.SINK_FAILED) &&
      error.cause instanceof CliError
    ) {
      return { exitCode: error.cause.exitCode, message: error.cause.message };
    }
    const exitCode = LIBRARY_EXITS[error.code] ?? Exit.INTERNAL;
    return { exitCode, message: libraryMessage(error.code, error.message) };
  }
  if (isPkgClientError(error)) {
    return { exitCode: PKG_EXITS[error.code] ?? Exit.INTERNAL, message: pkgMessage(error.code, error.message) };
  }
  const text = error instanceof Error ? error.message : String(error);
  return { exitCode: Exit.INTERNAL, message: `unexpected failure: ${text}` };
}

function libraryMessage(code: ErrorCode, detail: string): string {
  switch (code) {
    case ErrorCode.WRONG_KEY:
      return 'the key for the identity you disclosed does not open this file (wrong recipient or wrong attribute values)';
    case ErrorCode.NO_MATCHING_KEY:
      return `the PKG no longer opens this file (${code}): ${detail}`;
    case ErrorCode.TRUNCATED:
      return `the encrypted file is incomplete (${code}): ${detail}; it was cut short in transfer or on disk, so get it again`;
    case ErrorCode.SENDER_MISMATCH:
      return `the sender named in the file is not the one who sealed it (${code}): someone re-signed its header; do not trust it`;
    case ErrorCode.TAMPERED:
    case ErrorCode.ARMOR_INVALID:
    case ErrorCode.BAD_SIGNATURE:
    case ErrorCode.MALFORMED:
    case ErrorCode.HEADER_TOO_LARGE:
      return `the encrypted file is damaged or was changed (${code}): ${detail}`;
    case ErrorCode.NOT_POSTGUARD:
      return 'the input is not a PostGuard encrypted file';
    case ErrorCode.WRONG_MODE:
      return "the file was sealed in PostGuard's in-memory mode; pg-cli reads streaming-mode files, as PostGuard's pg-cli does";
    default:
      return `${detail} (${code})`;
  }
}

function pkgMessage(code: PkgClientErrorCode, detail: string): string {
  switch (code) {
    case PkgClientErrorCode.PKG_UNAVAILABLE:
      return `the PKG is unavailable: ${detail}`;
    case PkgClientErrorCode.UNAUTHORIZED:
      return `the PKG refused the credential (an unknown, expired or revoked API key, or a session JWT it does not accept): ${detail}`;
    case PkgClientErrorCode.SESSION_CANCELLED:
      return 'the identity session was cancelled';
    case PkgClientErrorCode.SESSION_TIMEOUT:
      return 'the identity session timed out';
    default:
      return `${detail} (${code})`;
  }
}
