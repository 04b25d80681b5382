/**
 * Session tokens in Yivi's format: 20 characters drawn uniformly from [a-zA-Z0-9].
 * Browser-safe (WebCrypto only), because the simulated wallet also needs a random client token.
 */

const ALPHANUMERIC = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
export const TOKEN_LENGTH = 20;

/**
 * Yivi checks path tokens with an unanchored match (any run of 20 alphanumerics passes, and a longer
 * string then fails the lookup as an unknown session). We keep that distinction: 400 INVALID_REQUEST
 * for the former, 400 SESSION_UNKNOWN for the latter.
 */
export const passesTokenCheck = (s: string): boolean => /[A-Z0-9]{20}/i.test(s);

/** Uniform over the alphabet: bytes at or above the largest multiple of 62 are redrawn. */
export function randomToken(length = TOKEN_LENGTH, alphabet = ALPHANUMERIC): string {
  const bound = 256 - (256 % alphabet.length);
  let out = '';
  const buf = new Uint8Array(32);
  while (out.length < length) {
    globalThis.crypto.getRandomValues(buf);
    for (const b of buf) {
      if (b < bound) out += alphabet[b % alphabet.length]!;
      if (out.length === length) break;
    }
  }
  return out;
}

/** A 4-digit PIN pairing code. */
export const randomPairingCode = (): string => randomToken(4, '0123456789');
