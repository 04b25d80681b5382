/**
 * AES-128-GCM through WebCrypto (browsers and Node alike). In Node, subtle calls run on the
 * libuv thread pool, so several segments in flight use several cores.
 * AAD is always empty and the tag is 16 bytes, appended: the only shape PostGuard uses.
 */

export const AES_KEY_BYTES = 16;
export const GCM_IV_BYTES = 12;
export const GCM_TAG_BYTES = 16;

const subtle = (): SubtleCrypto => {
  const s = globalThis.crypto?.subtle;
  if (!s) throw new Error('WebCrypto (crypto.subtle) is not available in this environment');
  return s;
};

export function importAesKey(raw: Uint8Array): Promise<CryptoKey> {
  if (raw.length !== AES_KEY_BYTES) throw new RangeError(`AES-128 key must be 16 bytes, got ${raw.length}`);
  return subtle().importKey('raw', raw as Uint8Array<ArrayBuffer>, 'AES-GCM', false, ['encrypt', 'decrypt']);
}

/** Ciphertext followed by the 16-byte tag. */
export async function aesGcmSeal(key: CryptoKey, iv: Uint8Array, plaintext: Uint8Array): Promise<Uint8Array> {
  const out = await subtle().encrypt(
    { name: 'AES-GCM', iv: iv as Uint8Array<ArrayBuffer> },
    key,
    plaintext as Uint8Array<ArrayBuffer>,
  );
  return new Uint8Array(out);
}

/** The plaintext, or `undefined` when the tag does not authenticate the input. */
export async function aesGcmOpen(key: CryptoKey, iv: Uint8Array, sealed: Uint8Array): Promise<Uint8Array | undefined> {
  if (sealed.length < GCM_TAG_BYTES) return undefined;
  try {
    const out = await subtle().decrypt(
      { name: 'AES-GCM', iv: iv as Uint8Array<ArrayBuffer> },
      key,
      sealed as Uint8Array<ArrayBuffer>,
    );
    return new Uint8Array(out);
  } catch (e) {
    if ((e as { name?: string })?.name === 'OperationError') return undefined;
    throw e;
  }
}
