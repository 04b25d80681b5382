import { checkAesKeyLength, GCM_TAG_BYTES, type AesKey } from './aes.js';

/**
 * AES-128-GCM through WebCrypto, for browsers and any runtime without node:crypto. The work runs
 * off the calling thread, so several segments in flight use several cores.
 */

const subtle = (): SubtleCrypto => {
  const s = globalThis.crypto?.subtle;
  if (!s) throw new Error('WebCrypto (crypto.subtle) is not available in this environment');
  return s;
};

export async function importAesKey(raw: Uint8Array): Promise<AesKey> {
  checkAesKeyLength(raw);
  return subtle().importKey('raw', raw as Uint8Array<ArrayBuffer>, 'AES-GCM', false, ['encrypt', 'decrypt']);
}

/** Ciphertext followed by the 16-byte tag. */
export async function aesGcmSeal(key: AesKey, iv: Uint8Array, plaintext: Uint8Array): Promise<Uint8Array> {
  const out = await subtle().encrypt(
    { name: 'AES-GCM', iv: iv as Uint8Array<ArrayBuffer> },
    key as CryptoKey,
    plaintext as Uint8Array<ArrayBuffer>,
  );
  return new Uint8Array(out);
}

/** Ciphertext ‖ tag as pieces to write in order: here one. */
export async function aesGcmSealPieces(
  key: AesKey,
  iv: Uint8Array,
  plaintext: Uint8Array,
): Promise<readonly Uint8Array[]> {
  return [await aesGcmSeal(key, iv, plaintext)];
}

/** The plaintext, or `undefined` when the tag does not authenticate the input. */
export async function aesGcmOpen(key: AesKey, iv: Uint8Array, sealed: Uint8Array): Promise<Uint8Array | undefined> {
  if (sealed.length < GCM_TAG_BYTES) return undefined;
  try {
    const out = await subtle().decrypt(
      { name: 'AES-GCM', iv: iv as Uint8Array<ArrayBuffer> },
      key as CryptoKey,
      sealed as Uint8Array<ArrayBuffer>,
    );
    return new Uint8Array(out);
  } catch (e) {
    if ((e as { name?: string })?.name === 'OperationError') return undefined;
    throw e;
  }
}
