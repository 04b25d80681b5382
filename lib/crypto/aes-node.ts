import { createCipheriv, createDecipheriv, createSecretKey, webcrypto, type KeyObject } from 'node:crypto';
import { ownedBytes } from '../owned-bytes.js';
import { checkAesKeyLength, GCM_TAG_BYTES, type AesKey } from './aes.js';

/**
 * AES-128-GCM in Node. Measured on a 2-core machine over 256 MiB streams (bench/run.ts):
 * - A stream's segments are sealed and opened in place with node:crypto (OpenSSL with AES-NI,
 *   ~3 GB/s on one core). Since SHAKE128 moved to a thread of its own (segment-hasher-node.ts),
 *   this thread has time for it, and WebCrypto cost more than it saved (a copy of each input, a
 *   round trip through the event loop, a pool that shares the two cores): sealStream went from
 *   257 to 343 MB/s with nothing else changed.
 * - A whole message in memory (`seal`) still goes to WebCrypto: it may be large, and there the
 *   pool keeps the event loop free while it runs.
 */

class NodeAesKey {
  constructor(
    readonly key: KeyObject,
    readonly cryptoKey: webcrypto.CryptoKey,
  ) {}
}

const unwrap = (key: AesKey): NodeAesKey => {
  if (!(key instanceof NodeAesKey)) throw new TypeError('expected an AES key made by this module');
  return key;
};

export async function importAesKey(raw: Uint8Array): Promise<AesKey> {
  checkAesKeyLength(raw);
  const cryptoKey = await webcrypto.subtle.importKey('raw', raw, 'AES-GCM', false, ['encrypt']);
  return new NodeAesKey(createSecretKey(raw), cryptoKey);
}

/** Ciphertext followed by the 16-byte tag. */
export async function aesGcmSeal(key: AesKey, iv: Uint8Array, plaintext: Uint8Array): Promise<Uint8Array> {
  const { cryptoKey } = unwrap(key);
  return new Uint8Array(await webcrypto.subtle.encrypt({ name: 'AES-GCM', iv }, cryptoKey, plaintext));
}

/**
 * A segment's ciphertext and then its tag, as two pieces: node:crypto hands out the ciphertext in
 * a buffer of its own, and joining the two would allocate and copy every byte once more.
 */
export function aesGcmSealPieces(key: AesKey, iv: Uint8Array, plaintext: Uint8Array): Promise<readonly Uint8Array[]> {
  try {
    const cipher = createCipheriv('aes-128-gcm', unwrap(key).key, iv);
    const ciphertext = cipher.update(plaintext);
    cipher.final();
    return Promise.resolve([ciphertext, cipher.getAuthTag()]);
  } catch (e) {
    return Promise.reject(e as Error);
  }
}

/** The plaintext, or `undefined` when the tag does not authenticate the input. */
export function aesGcmOpen(key: AesKey, iv: Uint8Array, sealed: Uint8Array): Promise<Uint8Array | undefined> {
  if (sealed.length < GCM_TAG_BYTES) return Promise.resolve(undefined);
  let decipher;
  try {
    decipher = createDecipheriv('aes-128-gcm', unwrap(key).key, iv);
    decipher.setAuthTag(sealed.subarray(sealed.length - GCM_TAG_BYTES));
  } catch (e) {
    return Promise.reject(e as Error);
  }
  // Not authentic until final() accepts the tag; dropped unread if it does not.
  const plaintext = decipher.update(sealed.subarray(0, sealed.length - GCM_TAG_BYTES));
  try {
    decipher.final();
  } catch {
    // Only the tag check fails here: key, nonce and tag lengths were accepted above.
    return Promise.resolve(undefined);
  }
  // Its buffer may be transferred later (to the hashing thread, to a page): one it owns whole.
  const bytes = ownedBytes(plaintext);
  return Promise.resolve(bytes === plaintext ? new Uint8Array(bytes.buffer, 0, bytes.length) : bytes);
}
