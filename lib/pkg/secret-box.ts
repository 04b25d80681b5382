import type { CryptoKeyLike } from '../web-types.js';
import type { KeyValueStore } from './store.js';

/**
 * Secrets at rest, never in the clear: what the PKG client caches (session JWTs, user secret keys)
 * and what an upload keeper keeps (the storage service's recovery token) go to storage only as
 * AES-256-GCM ciphertexts under a wrapping key, each bound (as additional data) to the name it is
 * stored under, so an entry copied under another name does not open.
 *
 * Two tiers of wrapping key. The device tier's is a WebCrypto key made non-extractable and kept in
 * the same store (IndexedDB in browsers): script in the page can use it but not read it, and a copy
 * of the origin's files without the browser's own key store has only ciphertext. It goes with the
 * site's data. The passkey tier's (passkey.ts) is derived from a passkey's PRF output and never
 * stored at all. What each does not protect against is written in docs/security.md ("Keys at rest").
 */

/** A secret as stored: the nonce and the ciphertext (with its tag). Structured-cloneable. */
export interface SealedSecret {
  /** The format's version. */
  v: 1;
  /** The AES-GCM nonce, 12 random bytes. */
  iv: Uint8Array;
  /** The ciphertext and its 16-byte tag. */
  data: Uint8Array;
  /**
   * Which wrapping key sealed it (not secret): `'passkey:<credential id>'` for the passkey tier;
   * absent for the device tier, whose entries were written before there was a second tier.
   */
  by?: string;
}

/** Which kind of wrapping key a {@link SecretBox} seals under. */
export type SecretTier = 'device' | 'passkey';

/** Seals and opens secrets under one wrapping key. */
export interface SecretBox {
  /** Which wrapping key: the device's (`'device'`) or one derived from a passkey (`'passkey'`). */
  readonly tier: SecretTier;
  /** `plain` sealed, bound to `context` (the name it is stored under). */
  seal(plain: string, context: string): Promise<SealedSecret>;
  /**
   * The secret, or undefined when `sealed` is not one of ours, was moved, changed, or the key is
   * gone. The passkey tier throws a `PkgClientError` when the passkey cannot give its key
   * (`PASSKEY_FAILED`, `PRF_UNAVAILABLE`) or `sealed` is another passkey's (`PASSKEY_MISMATCH`).
   */
  open(sealed: unknown, context: string): Promise<string | undefined>;
  /** Deletes the wrapping key: whatever was sealed under it can never be opened again. */
  forget(): Promise<void>;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/** Whether `value` has the shape of a {@link SealedSecret}. */
export const isSealedSecret = (value: unknown): value is SealedSecret =>
  typeof value === 'object' &&
  value !== null &&
  (value as SealedSecret).v === 1 &&
  (value as SealedSecret).iv instanceof Uint8Array &&
  (value as SealedSecret).iv.length === 12 &&
  (value as SealedSecret).data instanceof Uint8Array &&
  (value as SealedSecret).data.length >= 16 &&
  ((value as SealedSecret).by === undefined || typeof (value as SealedSecret).by === 'string');

/** `plain` sealed with AES-GCM under `key`, bound to `context`: what every tier stores. */
export async function sealUnder(key: CryptoKeyLike, plain: string, context: string): Promise<SealedSecret> {
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const data = await crypto.subtle.encrypt(
    { name: 'AES-GCM', iv, additionalData: encoder.encode(context) },
    key as CryptoKey,
    encoder.encode(plain),
  );
  return { v: 1, iv, data: new Uint8Array(data) };
}

/** What {@link sealUnder} sealed, or undefined when it does not open under `key` bound to `context`. */
export async function openUnder(
  key: CryptoKeyLike,
  sealed: SealedSecret,
  context: string,
): Promise<string | undefined> {
  try {
    const plain = await crypto.subtle.decrypt(
      { name: 'AES-GCM', iv: sealed.iv as Uint8Array<ArrayBuffer>, additionalData: encoder.encode(context) },
      key as CryptoKey,
      sealed.data as Uint8Array<ArrayBuffer>,
    );
    return decoder.decode(plain);
  } catch {
    return undefined;
  }
}

/** The store key the device's wrapping key lives under. */
export const DEVICE_KEY_NAME = 'pg|device-key';

/**
 * The device tier over `store`: a non-extractable AES-GCM key made on first use and kept in the
 * store under `name`. Two tabs that make one at the same moment: the later wins, and what the
 * other sealed reads as absent (a cache miss), never as wrong.
 */
export function deviceKeyBox(store: KeyValueStore | Promise<KeyValueStore>, name = DEVICE_KEY_NAME): SecretBox {
  let key: Promise<CryptoKey> | undefined;
  const load = async (create: boolean): Promise<CryptoKey | undefined> => {
    const kv = await store;
    const kept = await kv.get<unknown>(name);
    if (kept instanceof CryptoKey && kept.algorithm.name === 'AES-GCM' && !kept.extractable) return kept;
    if (!create) return undefined;
    const made = await crypto.subtle.generateKey({ name: 'AES-GCM', length: 256 }, false, ['encrypt', 'decrypt']);
    await kv.set(name, made);
    return made;
  };
  const current = (): Promise<CryptoKey> => {
    const pending = (key ??= load(true).then((k) => k!));
    pending.catch(() => {
      if (key === pending) key = undefined;
    });
    return pending;
  };
  return {
    tier: 'device',
    async seal(plain, context) {
      return sealUnder(await current(), plain, context);
    },
    async open(sealed, context) {
      // Another tier's entry is never opened here: no fallback from a passkey to this key.
      if (!isSealedSecret(sealed) || sealed.by !== undefined) return undefined;
      try {
        const k = key !== undefined ? await key : await load(false);
        if (k === undefined) return undefined;
        key ??= Promise.resolve(k);
        return await openUnder(k, sealed, context);
      } catch {
        return undefined;
      }
    },
    async forget() {
      key = undefined;
      await (await store).delete(name);
    },
  };
}

/**
 * A box over a wrapping key that comes from elsewhere (a key file, the environment): `load` is
 * called on first use and its key kept; a failed load is not kept, so the next use tries again.
 * Unlike `open`'s other failures, a failed load rejects: no key is not the same as a wrong entry.
 */
export function keyBox(load: () => Promise<CryptoKeyLike>): SecretBox & { ready(): Promise<void> } {
  let key: Promise<CryptoKeyLike> | undefined;
  const current = (): Promise<CryptoKeyLike> => {
    const pending = (key ??= load());
    pending.catch(() => {
      if (key === pending) key = undefined;
    });
    return pending;
  };
  return {
    tier: 'device',
    async ready() {
      await current();
    },
    async seal(plain, context) {
      return sealUnder(await current(), plain, context);
    },
    async open(sealed, context) {
      if (!isSealedSecret(sealed) || sealed.by !== undefined) return undefined;
      return openUnder(await current(), sealed, context);
    },
    async forget() {
      key = undefined;
    },
  };
}
