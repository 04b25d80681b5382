/**
 * postguard-ts/keys: keys as they cross APIs: padded standard base64 of the reference encodings
 * (MPK 896 chars, MSK 684, USK 768, verifying key 44, IBS master secret 44, signing key 128);
 * master key generation and user key extraction for the PKG; pg-pkg's four key files; and parse
 * caches for the format layer, so that a key string used again is not decoded and validated again.
 *
 * @module postguard-ts/keys
 */
import { fromBase64, toBase64 } from './base64.js';
import {
  cgwkvSetup,
  extractUsk as cgwkvExtractUsk,
  kemKeysMatch as cgwkvKeysMatch,
  parseMasterPublicKey,
  parseUserSecretKey,
  validateMasterSecretKey,
  MPK_BYTES,
  MSK_BYTES,
  USK_BYTES,
  type MasterPublicKey,
  type UserSecretKey,
} from './crypto/cgwkv.js';
import {
  ggKeygen,
  ggPublicKeyOf,
  ggSetup,
  parseSigningKey,
  parseVerifyingKey,
  validateGgSecretKey,
  GG_PUBLIC_KEY_BYTES,
  GG_SECRET_KEY_BYTES,
  GG_SIGNING_KEY_BYTES,
  type GgSigningKey,
  type GgVerifyingKey,
} from './crypto/gg.js';
import { invalidKey, isPostGuardError } from './errors.js';
import { kemIdentity, signingIdentity } from './identity.js';
import { normalizePolicy } from './policy.js';

// ---------------------------------------------------------------------------------------------
// Generation and extraction

/** A fresh CGWKV master key pair (the PKG's pkg_ibe.pub / pkg_ibe.sec). */
export function generateKemKeys(): { mpk: string; msk: string } {
  const { mpk, msk } = cgwkvSetup();
  return { mpk: toBase64(mpk), msk: toBase64(msk) };
}

/** A fresh GG master key pair (pkg_ibs.pub / pkg_ibs.sec): vk = z·B, sk = z. */
export function generateSigningKeys(): { vk: string; sk: string } {
  const { pk, sk } = ggSetup();
  return { vk: toBase64(pk), sk: toBase64(sk) };
}

/** The user secret key (768 base64 chars) for a policy `{ts, con: [{t, v?}]}` with real values. */
export function extractUsk(msk: string, policy: unknown): string {
  const id = kemIdentity(normalizePolicy(policy));
  return toBase64(cgwkvExtractUsk(fromBase64(msk, 'master secret key', MSK_BYTES), id));
}

/** The signing key (128 base64 chars) for a policy, under the IBS master secret `sk`. */
export function extractSigningKey(sk: string, policy: unknown): string {
  const id = signingIdentity(normalizePolicy(policy));
  return toBase64(ggKeygen(fromBase64(sk, 'IBS master secret key', GG_SECRET_KEY_BYTES), id));
}

/** The verifying key (44 base64 chars) that belongs to an IBS master secret. */
export function verifyingKeyOf(sk: string): string {
  return toBase64(ggPublicKeyOf(fromBase64(sk, 'IBS master secret key', GG_SECRET_KEY_BYTES)));
}

/** Whether a master public key and a master secret key form a pair. */
export function kemKeysMatch(mpk: string, msk: string): boolean {
  return cgwkvKeysMatch(masterPublicKeyFromBase64(mpk), fromBase64(msk, 'master secret key', MSK_BYTES));
}

/** Whether a verifying key belongs to an IBS master secret. */
export function signingKeysMatch(vk: string, sk: string): boolean {
  const expected = fromBase64(verifyingKeyOf(sk), 'verifying key');
  const actual = fromBase64(vk, 'verifying key', GG_PUBLIC_KEY_BYTES);
  return expected.every((b, i) => b === actual[i]);
}

// ---------------------------------------------------------------------------------------------
// Parse caches, for public keys only. Parsed keys are immutable, so sharing them is safe; a few
// entries suffice because an application talks to one PKG. Secrets (user secret keys, signing
// keys) are never kept here: the library holds a secret only as long as the call that was given
// it, and a caller that wants keys kept says so (PkgClient's opt-in key cache, with its expiry).

class LruCache<V> {
  private readonly map = new Map<string, V>();
  constructor(private readonly capacity: number) {}

  get(key: string, make: () => V): V {
    const hit = this.map.get(key);
    if (hit !== undefined) {
      this.map.delete(key);
      this.map.set(key, hit);
      return hit;
    }
    const value = make();
    this.map.set(key, value);
    if (this.map.size > this.capacity) this.map.delete(this.map.keys().next().value!);
    return value;
  }

  clear(): void {
    this.map.clear();
  }
}

const mpkCache = new LruCache<MasterPublicKey>(4);
const vkCache = new LruCache<GgVerifyingKey>(8);

/** Runs a parser, naming the caller's field in the error when one was given. */
function parseAs<T>(what: string | undefined, parse: () => T): T {
  try {
    return parse();
  } catch (e) {
    if (what !== undefined && isPostGuardError(e)) throw invalidKey(`${what}: ${e.message}`);
    throw e;
  }
}

function cached<T>(cache: LruCache<T>, value: unknown, what: string | undefined, decode: () => T): T {
  if (typeof value !== 'string') throw invalidKey(`${what ?? 'key'}: expected a base64 string, got ${typeof value}`);
  return cache.get(value, () => parseAs(what, decode));
}

/** The parsed master public key for a base64 string (896 chars), cached by string. */
export function masterPublicKeyFromBase64(mpk: unknown, what?: string): MasterPublicKey {
  return cached(mpkCache, mpk, what, () => parseMasterPublicKey(fromBase64(mpk, 'master public key', MPK_BYTES)));
}

function parsed<T>(value: unknown, what: string | undefined, decode: () => T): T {
  if (typeof value !== 'string') throw invalidKey(`${what ?? 'key'}: expected a base64 string, got ${typeof value}`);
  return parseAs(what, decode);
}

const preparedKeys = new WeakMap<PreparedUserSecretKey, UserSecretKey>();

/**
 * A user secret key parsed once (its points decoded and checked, their pairing lines prepared),
 * for a caller that opens several files with the same key: pass it to `unseal` instead of the
 * base64 string. The library keeps no parsed secret of its own; this object is the caller's, and
 * the key is gone when the caller drops it.
 */
export class PreparedUserSecretKey {
  private constructor() {}

  /** @internal */
  static wrap(key: UserSecretKey): PreparedUserSecretKey {
    const prepared = new PreparedUserSecretKey();
    preparedKeys.set(prepared, key);
    return prepared;
  }
}

/** Parses and prepares a user secret key (768 base64 chars) for reuse; see PreparedUserSecretKey. */
export function prepareUserSecretKey(usk: string): PreparedUserSecretKey {
  return PreparedUserSecretKey.wrap(userSecretKeyFromBase64(usk, 'usk'));
}

/** The parsed user secret key for a base64 string (768 chars), or a prepared one; strings are not cached (a secret). */
export function userSecretKeyFromBase64(usk: unknown, what?: string): UserSecretKey {
  if (usk instanceof PreparedUserSecretKey) return preparedKeys.get(usk)!;
  return parsed(usk, what, () => parseUserSecretKey(fromBase64(usk, 'user secret key', USK_BYTES)));
}

/** The parsed IBS verifying key for a base64 string (44 chars), cached by string. */
export function verifyingKeyFromBase64(vk: unknown, what?: string): GgVerifyingKey {
  return cached(vkCache, vk, what, () => parseVerifyingKey(fromBase64(vk, 'verifying key', GG_PUBLIC_KEY_BYTES)));
}

/** The parsed signing key for a base64 string (128 chars); not cached (a secret). */
export function signingKeyFromBase64(key: unknown, what?: string): GgSigningKey {
  return parsed(key, what, () => parseSigningKey(fromBase64(key, 'signing key', GG_SIGNING_KEY_BYTES)));
}

/** Drops the cached parsed public keys (tests; a PKG whose keys were rotated). */
export function clearKeyCaches(): void {
  mpkCache.clear();
  vkCache.clear();
}

// ---------------------------------------------------------------------------------------------
// pg-pkg key files. `pg-pkg gen` writes the raw IBE encodings (pkg_ibe.pub 672 bytes,
// pkg_ibe.sec 512) and bincode of the IBS keys, which is their raw 32 bytes (pkg_ibs.pub,
// pkg_ibs.sec), each created exclusively with mode 0600.

/** The PKG's four master keys, as base64 strings. */
export interface PkgKeys {
  /** CGWKV master public key. */
  mpk: string;
  /** CGWKV master secret key. */
  msk: string;
  /** IBS verifying key. */
  vk: string;
  /** IBS master secret key. */
  sk: string;
}

/** The four key files' contents. */
export interface PkgKeyFiles {
  /** pkg_ibe.pub: the master public key. */
  ibePublic: Uint8Array;
  /** pkg_ibe.sec: the master secret key. */
  ibeSecret: Uint8Array;
  /** pkg_ibs.pub: the verifying key. */
  ibsPublic: Uint8Array;
  /** pkg_ibs.sec: the IBS master secret key. */
  ibsSecret: Uint8Array;
}

/** A fresh set of PKG master keys. */
export function generatePkgKeys(): PkgKeys {
  const kem = generateKemKeys();
  const ibs = generateSigningKeys();
  return { mpk: kem.mpk, msk: kem.msk, vk: ibs.vk, sk: ibs.sk };
}

const FILE_LABELS: Readonly<Record<keyof PkgKeyFiles, string>> = {
  ibePublic: 'IBE public key file',
  ibeSecret: 'IBE secret key file',
  ibsPublic: 'IBS public key file',
  ibsSecret: 'IBS secret key file',
};

/** The file contents for a set of keys (each key is validated on the way). */
export function encodePkgKeyFiles(keys: PkgKeys): PkgKeyFiles {
  const files: PkgKeyFiles = {
    ibePublic: fromBase64(keys.mpk, 'master public key', MPK_BYTES),
    ibeSecret: fromBase64(keys.msk, 'master secret key', MSK_BYTES),
    ibsPublic: fromBase64(keys.vk, 'verifying key', GG_PUBLIC_KEY_BYTES),
    ibsSecret: fromBase64(keys.sk, 'IBS master secret key', GG_SECRET_KEY_BYTES),
  };
  validateFiles(files);
  return files;
}

/**
 * Keys from file contents: every key is fully validated, and the public keys must belong to the
 * secret ones (a PKG started with mismatched files would issue keys nobody can use).
 * INVALID_KEY naming the file otherwise.
 */
export function decodePkgKeyFiles(files: PkgKeyFiles): PkgKeys {
  const sizes: Record<keyof PkgKeyFiles, number> = {
    ibePublic: MPK_BYTES,
    ibeSecret: MSK_BYTES,
    ibsPublic: GG_PUBLIC_KEY_BYTES,
    ibsSecret: GG_SECRET_KEY_BYTES,
  };
  for (const name of Object.keys(sizes) as Array<keyof PkgKeyFiles>) {
    const content = files[name];
    if (!(content instanceof Uint8Array)) throw invalidKey(`${FILE_LABELS[name]}: missing`);
    if (content.length !== sizes[name]) {
      throw invalidKey(`${FILE_LABELS[name]}: expected ${sizes[name]} bytes, got ${content.length}`);
    }
  }
  validateFiles(files);
  return {
    mpk: toBase64(files.ibePublic),
    msk: toBase64(files.ibeSecret),
    vk: toBase64(files.ibsPublic),
    sk: toBase64(files.ibsSecret),
  };
}

function validateFiles(files: PkgKeyFiles): void {
  const mpk = parseAs(FILE_LABELS.ibePublic, () => parseMasterPublicKey(files.ibePublic));
  parseAs(FILE_LABELS.ibeSecret, () => validateMasterSecretKey(files.ibeSecret));
  parseAs(FILE_LABELS.ibsPublic, () => parseVerifyingKey(files.ibsPublic));
  parseAs(FILE_LABELS.ibsSecret, () => validateGgSecretKey(files.ibsSecret));
  if (!cgwkvKeysMatch(mpk, files.ibeSecret)) {
    throw invalidKey('IBE public key file: does not belong to the IBE secret key file');
  }
  const vk = ggPublicKeyOf(files.ibsSecret);
  if (!vk.every((b, i) => b === files.ibsPublic[i])) {
    throw invalidKey('IBS public key file: does not belong to the IBS secret key file');
  }
}
