/**
 * Error codes (library, PKG client, worker, service worker) turned into text for people. Every
 * failure the demo shows goes through `describeError`, so a code never reaches the screen bare.
 */

export interface ErrorText {
  /** One sentence: what happened. */
  title: string;
  /** What it means or what to do. */
  hint: string;
  /** The stable code, shown small for support questions. */
  code: string | undefined;
}

const TEXTS: Record<string, [string, string]> = {
  // The file (lib/errors.ts)
  NOT_POSTGUARD: [
    'This is not a PostGuard file.',
    'Pick the .enc file you received; other files cannot be decrypted here.',
  ],
  UNSUPPORTED_VERSION: [
    'This file was made by a newer PostGuard version.',
    'Ask the sender to use a current PostGuard version, or update this app.',
  ],
  HEADER_TOO_LARGE: ['This file is damaged: its header is impossibly large.', 'Ask the sender for the file again.'],
  MALFORMED: ['This file is damaged: its structure is broken.', 'Ask the sender for the file again.'],
  TRUNCATED: [
    'This file is incomplete: it ends before the encrypted data does.',
    'The download was stopped and marked as failed; do not use any partial file. Ask the sender for the complete file.',
  ],
  BAD_SIGNATURE: [
    "The sender's signature does not verify.",
    'The file was changed, or it was not signed by the key it claims. Do not trust it.',
  ],
  SENDER_MISMATCH: [
    'The sender named on this file is not the one who sealed it.',
    "Someone signed the file's header again under another name. Do not trust it.",
  ],
  UNKNOWN_RECIPIENT: ['This file was not encrypted for that recipient.', 'Pick one of the recipients the file lists.'],
  WRONG_KEY: [
    'Your key does not open this file.',
    'The identity you proved is not the one the file was encrypted for (check the e-mail address and any extra attributes), or the cached key belongs to someone else. Try again with a new scan.',
  ],
  NO_MATCHING_KEY: [
    'This file was sealed under a key this PKG no longer uses.',
    'The PKG retired the key this file was sealed under, so nobody can get a key to open it here. Ask the sender to encrypt it again.',
  ],
  TAMPERED: [
    'This file was changed after it was encrypted.',
    'The download was stopped and marked as failed; do not use any partial file. Ask the sender for the file again.',
  ],
  ARMOR_INVALID: [
    'This encrypted text is damaged: it is not a complete PostGuard block.',
    'Copy the whole block again, from the BEGIN line to the END line, without changing it.',
  ],
  WRONG_MODE: [
    'This file uses a mode this page cannot stream.',
    'Files sealed in memory open only up to the in-memory size limit.',
  ],
  INVALID_KEY: [
    'A key has the wrong format.',
    'The PKG or the cache returned something that is not a key; forget cached keys and try again.',
  ],
  INVALID_POLICY: ['The recipients or attributes are not valid.', 'Check the e-mail addresses and attribute values.'],
  TOO_LARGE: ['The file is too large for this mode.', 'Encrypt it as a file instead of as text.'],
  SOURCE_FAILED: [
    'The file could not be read.',
    'It may have been moved or changed while it was being read. Pick it again.',
  ],
  SINK_FAILED: [
    'The output was interrupted.',
    'The browser stopped writing the file (a full disk, or it refused the download).',
  ],
  CANCELLED: ['The download was cancelled.', 'Nothing was saved; press Download to start again.'],
  INVALID_INPUT: ['Something unexpected was given to the encryption library.', 'Reload the page and try again.'],
  INVALID_STATE: ['This action expired or was already used.', 'Start it again.'],
  // The PKG client (lib/pkg/errors.ts)
  PKG_UNAVAILABLE: ['The key server (PKG) cannot be reached.', 'Check your connection, or try again in a moment.'],
  RATE_LIMITED: ['The key server is asking us to slow down.', 'Wait a moment and try again.'],
  UNAUTHORIZED: [
    'The key server refused the credential.',
    'Start again; if it happens again, the key server may not accept this identity.',
  ],
  PKG_REJECTED: ['The key server refused the request.', 'See the detail below.'],
  BAD_RESPONSE: ['The key server answered something unexpected.', 'It may be misconfigured; try again later.'],
  SESSION_CANCELLED: ['The Yivi session was cancelled.', 'Start again when you are ready to scan.'],
  SESSION_TIMEOUT: ['The Yivi session timed out.', 'Start again and scan the QR code within a few minutes.'],
  NOT_VALID: ['The Yivi app did not prove what was asked.', 'Disclose the requested attributes with the right values.'],
  ABORTED: ['Stopped.', 'Nothing was changed.'],
  INVALID_ARGUMENT: ['The request is not valid.', 'Check what you filled in.'],
  NOT_CACHED: ['No remembered key for this file.', 'Get your key with Yivi.'],
  PRF_UNAVAILABLE: [
    'This passkey cannot protect remembered keys.',
    'Your browser or authenticator does not support the passkey extension it needs (PRF). Remember keys on this device instead, or try another authenticator.',
  ],
  PASSKEY_FAILED: [
    'Your passkey did not unlock the remembered keys.',
    'The prompt was cancelled or timed out, the authenticator is not here, or no passkey is set up. Try again, set one up, or forget the remembered keys.',
  ],
  PASSKEY_MISMATCH: [
    'The remembered keys belong to another passkey.',
    'Use the passkey you set them up with, or forget the remembered keys.',
  ],
  // The decrypting service worker (worker/sw-core.ts)
  UNKNOWN_DOWNLOAD: ['This download link expired or was already used.', 'Press the button again.'],
  // The demo itself
  NO_SERVICE_WORKER: [
    'Streaming downloads are not available in this browser window.',
    'Files are assembled in the browser instead; very large files may not fit.',
  ],
  DOWNLOAD_FAILED: ['The download failed.', 'Try again.'],
};

/** The code of a library, PKG-client or demo error (errors from the worker keep theirs). */
export function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

export function describeError(error: unknown): ErrorText {
  const code = errorCode(error);
  const known = code === undefined ? undefined : TEXTS[code];
  if (known !== undefined) {
    let hint = known[1];
    const serverCode = (error as { serverCode?: unknown }).serverCode;
    if (code === 'PKG_REJECTED' && typeof serverCode === 'string') hint = `The key server says ${serverCode}.`;
    const retryAfter = (error as { retryAfter?: unknown }).retryAfter;
    if (code === 'RATE_LIMITED' && typeof retryAfter === 'number') hint = `Try again in ${retryAfter} seconds.`;
    return { title: known[0], hint, code };
  }
  const message = error instanceof Error ? error.message : String(error);
  return { title: 'Something went wrong.', hint: message, code };
}

/** A demo error with a code from the table above. */
export class DemoError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'DemoError';
  }
}
