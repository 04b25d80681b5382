import { ErrorCode, isPostGuardError } from '../lib/errors.js';
import type { RegisterRequest } from './sw-protocol.js';

/**
 * What the decrypter's responses say besides their bodies: the headers of a plaintext answer
 * (its name, type, and how much of it was verified), and the JSON error answered before any
 * byte, with the HTTP status for its code.
 */

/** `attachment; filename="ascii"; filename*=UTF-8''percent-encoded` (RFC 6266 / 8187). */
export function contentDisposition(disposition: 'attachment' | 'inline', filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]/g, '_').replace(/["\\]/g, '_');
  const encoded = encodeURIComponent(filename).replace(
    /['()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
  return `${disposition}; filename="${ascii}"; filename*=UTF-8''${encoded}`;
}

/** The most UTF-8 bytes of a saved name (what common file systems allow). */
export const MAX_FILENAME_BYTES = 255;

/**
 * `name` cut to at most {@link MAX_FILENAME_BYTES} UTF-8 bytes at a code-point boundary (never
 * inside a surrogate pair), keeping a short extension when it is cut.
 */
function cutName(name: string): string {
  const bytes = (text: string) => new TextEncoder().encode(text).length;
  if (bytes(name) <= MAX_FILENAME_BYTES) return name;
  const dot = name.lastIndexOf('.');
  const ext = dot > 0 && name.length - dot <= 16 ? name.slice(dot) : '';
  let budget = MAX_FILENAME_BYTES - bytes(ext);
  let out = '';
  for (const ch of ext === '' ? name : name.slice(0, dot)) {
    budget -= bytes(ch);
    if (budget < 0) break;
    out += ch;
  }
  return out + ext;
}

/** A file name a browser can save: no path separators, control characters, lone surrogates or empty names. */
export function safeFilename(name: unknown): string {
  const base = (typeof name === 'string' ? name : '').split(/[/\\]/).pop() ?? '';
  const cleaned = cutName(
    base
      .replace(/\p{Cc}/gu, '') // C0 and C1 controls, DEL
      .replace(/\p{Cs}/gu, '\uFFFD') // a lone surrogate cannot be encoded (encodeURIComponent throws)
      .trim(),
  );
  return cleaned === '' || cleaned === '.' || cleaned === '..' ? 'download' : cleaned;
}

/**
 * How much of what a response carries was verified, in its `x-postguard-verified` header:
 * complete, every byte and the sender's signature before the response was sent; streaming,
 * verified as it is sent (the body errors on a failure); segments, a range, each segment
 * authenticated under the file's key, the sender not.
 */
export type Verified = 'complete' | 'streaming' | 'segments';

/** The headers every successful answer carries. */
export function plaintextHeaders(r: RegisterRequest, verified: Verified, acceptRanges: boolean): Headers {
  return new Headers({
    'content-type': r.contentType ?? 'application/octet-stream',
    'content-disposition': contentDisposition(r.disposition ?? 'attachment', safeFilename(r.filename)),
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
    // A decrypted HTML or SVG file previewed inline must not run script in the app's origin.
    'content-security-policy': 'sandbox',
    'referrer-policy': 'no-referrer',
    'x-postguard-verified': verified,
    // A media element seeks only in a response that says it may.
    'accept-ranges': acceptRanges ? 'bytes' : 'none',
  });
}

export const errorResponse = (
  status: number,
  code: string,
  message: string,
  extra: Record<string, string> = {},
): Response =>
  new Response(JSON.stringify({ error: code, message }), {
    status,
    headers: { 'content-type': 'application/json', 'x-postguard-error': code, 'cache-control': 'no-store', ...extra },
  });

/** HTTP status for a failure before the body started. */
function statusFor(error: unknown): number {
  if (!isPostGuardError(error)) return 502;
  switch (error.code) {
    case ErrorCode.UNKNOWN_RECIPIENT:
    case ErrorCode.WRONG_KEY:
    case ErrorCode.INVALID_KEY:
      return 403;
    case ErrorCode.SOURCE_FAILED:
      return 502;
    default:
      return 422;
  }
}

/** A failure before any byte, as an HTTP error with its code: no download at all. */
export const failureResponse = (error: unknown): Response =>
  errorResponse(
    statusFor(error),
    isPostGuardError(error) ? error.code : 'SOURCE_FAILED',
    (error as Error)?.message ?? String(error),
  );

export const unknownDownload = (): Response =>
  errorResponse(404, 'UNKNOWN_DOWNLOAD', 'no such download (unknown, already used, or expired)');
