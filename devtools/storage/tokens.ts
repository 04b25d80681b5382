import { createHash, randomBytes, timingSafeEqual, type Hash } from 'node:crypto';

/**
 * Cryptify's rolling token chain. Each accepted chunk moves the upload to the token
 * hex(SHA-256(<previous token as ASCII hex text> ‖ <chunk bytes>)), so a client can only
 * append the chunk that follows the one the server last acknowledged.
 */

/** 32 random bytes as lowercase hex (the init token and the recovery token). */
export const randomToken = (): string => randomBytes(32).toString('hex');

/** Starts the hash of the token that follows `previous`; feed it the chunk bytes, then `digest('hex')`. */
export const chainHasher = (previous: string): Hash => createHash('sha256').update(previous, 'utf8');

export function nextToken(previous: string, chunk: Uint8Array): string {
  return chainHasher(previous).update(chunk).digest('hex');
}

/** Constant-time comparison of a presented token with the expected one (lengths are not secret). */
export function tokensEqual(presented: string, expected: string): boolean {
  const a = Buffer.from(presented, 'utf8');
  const b = Buffer.from(expected, 'utf8');
  return a.length === b.length && timingSafeEqual(a, b);
}
