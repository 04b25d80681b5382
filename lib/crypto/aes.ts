/**
 * AES-128-GCM as PostGuard uses it: 16-byte keys, 12-byte nonces, no AAD, the 16-byte tag appended
 * to the ciphertext. The implementation is behind the platform seam '#aes' (see package.json
 * "imports"): WebCrypto in browsers (aes-portable.ts); in Node, synchronous node:crypto, except
 * for sealing a whole message, which goes to WebCrypto (aes-node.ts says why). Both export
 * `importAesKey`, `aesGcmSeal`, `aesGcmSealPieces` (the same bytes in one or more pieces, for a
 * stream's segments) and `aesGcmOpen` with these types.
 */

export const AES_KEY_BYTES = 16;
export const GCM_IV_BYTES = 12;
export const GCM_TAG_BYTES = 16;

/**
 * A key made by the platform's `importAesKey` (a CryptoKey, or a node:crypto KeyObject in a
 * wrapper); only that platform's functions accept it.
 */
export type AesKey = object;

export function checkAesKeyLength(raw: Uint8Array): void {
  if (raw.length !== AES_KEY_BYTES) throw new RangeError(`AES-128 key must be 16 bytes, got ${raw.length}`);
}
