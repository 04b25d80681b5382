import { createHash } from 'node:crypto';
import { generateKemKeys, generateSigningKeys, kemKeysMatch, signingKeysMatch, type PkgKeys } from 'postguard-ts/keys';

/**
 * The PKG's master key sets, one for the KEM (IBE: `/v2/parameters`, user secret keys) and one for
 * signing (IBS: `/v2/sign/parameters`, signing keys), in the manner of a Tink keyset: several key
 * pairs, each named by an id derived from its public key (`keyIdOf`), each with a status
 *   primary        new files are sealed (IBE) or signed (IBS) under it; exactly one per set
 *   decrypt-only   still issues user keys for files sealed under it, and verifies their signatures
 *   retired        nothing: published (public key only) so that readers can say why a file is refused
 * and an optional window: user keys under a key are issued only for timestamps (the `ts` a file was
 * sealed at) from `notBefore` to `notAfter`. The operations are pure; reading and writing the file
 * is server/keyset-file.ts.
 */

/**
 * The id of a master public key (base64) in a key set: the first 8 bytes of SHA-256 over the key's
 * serialized bytes, as 16 lowercase hex characters. Derived, never chosen, so every instance and every
 * client names a key alike; the same rule for a KEM master public key and an IBS verifying key.
 */
export function keyIdOf(publicKey: string): string {
  return createHash('sha256').update(Buffer.from(publicKey, 'base64')).digest('hex').slice(0, 16);
}

export type KeyStatus = 'primary' | 'decrypt-only' | 'retired';
export type KeyKind = 'ibe' | 'ibs';

export interface MasterKey {
  /** keyIdOf(publicKey): 16 hex characters. */
  readonly id: string;
  readonly status: KeyStatus;
  /** IBE: the master public key (896 base64 chars); IBS: the verifying key (44). */
  readonly publicKey: string;
  /** IBE: the master secret key; IBS: the IBS master secret. */
  readonly secretKey: string;
  /** Unix seconds: no user key for a timestamp before it. */
  readonly notBefore?: number | undefined;
  /** Unix seconds: no user key for a timestamp after it. */
  readonly notAfter?: number | undefined;
  /** Unix seconds the key was added (informational). */
  readonly addedAt?: number | undefined;
}

export interface KeySet {
  readonly ibe: readonly MasterKey[];
  readonly ibs: readonly MasterKey[];
}

/** A refusal of a key-set operation or of a key set that breaks a rule; `code` is stable. */
export class KeySetError extends Error {
  override readonly name = 'KeySetError';
  constructor(
    readonly code: 'UNKNOWN_KEY' | 'KEY_IS_PRIMARY' | 'KEY_RETIRED' | 'INVALID_KEY_SET',
    message: string,
  ) {
    super(message);
  }
}

export const KINDS: readonly KeyKind[] = ['ibe', 'ibs'];
export const KIND_NAMES: Readonly<Record<KeyKind, string>> = { ibe: 'IBE (encryption)', ibs: 'IBS (signing)' };

const masterKey = (publicKey: string, secretKey: string, status: KeyStatus, extra: Partial<MasterKey> = {}) => ({
  id: keyIdOf(publicKey),
  status,
  publicKey,
  secretKey,
  ...extra,
});

/** Today's four key files as a key set of one primary per kind. */
export function oneKeySet(keys: PkgKeys): KeySet {
  return { ibe: [masterKey(keys.mpk, keys.msk, 'primary')], ibs: [masterKey(keys.vk, keys.sk, 'primary')] };
}

export const primaryOf = (keys: readonly MasterKey[]): MasterKey => keys.find((k) => k.status === 'primary')!;

/** The primaries as the four keys of old (what seals and signs). */
export function primaryKeys(set: KeySet): PkgKeys {
  const ibe = primaryOf(set.ibe);
  const ibs = primaryOf(set.ibs);
  return { mpk: ibe.publicKey, msk: ibe.secretKey, vk: ibs.publicKey, sk: ibs.secretKey };
}

/** Whether a key issues user keys for a file sealed at `ts` (not retired, `ts` inside its window). */
export function issuesFor(key: MasterKey, ts: number): boolean {
  if (key.status === 'retired') return false;
  return (key.notBefore === undefined || ts >= key.notBefore) && (key.notAfter === undefined || ts <= key.notAfter);
}

/**
 * Checks the rules a loaded set must keep: every id is its public key's, ids are unique, each pair
 * matches (a public key with another's secret would issue keys nobody can use), exactly one primary
 * per kind, windows in order. Throws INVALID_KEY_SET naming the first broken rule.
 */
export function checkKeySet(set: KeySet): KeySet {
  const invalid = (message: string) => new KeySetError('INVALID_KEY_SET', message);
  const seen = new Set<string>();
  for (const kind of KINDS) {
    const keys = set[kind];
    if (!Array.isArray(keys) || keys.length === 0) throw invalid(`no ${KIND_NAMES[kind]} keys`);
    const primaries = keys.filter((k) => k.status === 'primary').length;
    if (primaries !== 1) throw invalid(`${primaries} primary ${KIND_NAMES[kind]} keys; exactly one is needed`);
    for (const key of keys) {
      if (!['primary', 'decrypt-only', 'retired'].includes(key.status))
        throw invalid(`key ${key.id}: unknown status ${JSON.stringify(key.status)}`);
      if (keyIdOf(key.publicKey) !== key.id) throw invalid(`key ${key.id}: the id is not its public key's`);
      if (seen.has(key.id)) throw invalid(`key ${key.id} appears twice`);
      seen.add(key.id);
      const matches =
        kind === 'ibe' ? kemKeysMatch(key.publicKey, key.secretKey) : signingKeysMatch(key.publicKey, key.secretKey);
      if (!matches) throw invalid(`key ${key.id}: the secret key does not belong to the public key`);
      for (const bound of [key.notBefore, key.notAfter, key.addedAt])
        if (bound !== undefined && !(Number.isSafeInteger(bound) && bound >= 0))
          throw invalid(`key ${key.id}: a time is not Unix seconds`);
      if (key.notBefore !== undefined && key.notAfter !== undefined && key.notBefore > key.notAfter)
        throw invalid(`key ${key.id}: notBefore is after notAfter`);
    }
  }
  return set;
}

export interface AddOptions {
  kinds: readonly KeyKind[];
  /** Unix seconds now. */
  now: number;
  notBefore?: number | undefined;
  notAfter?: number | undefined;
}

/** New key pairs, decrypt-only (never primary: promotion is a step of its own, after the roll-out). */
export function addKeys(
  set: KeySet,
  options: AddOptions,
): { set: KeySet; added: Array<{ kind: KeyKind; key: MasterKey }> } {
  const window = { notBefore: options.notBefore, notAfter: options.notAfter, addedAt: options.now };
  const added: Partial<Record<KeyKind, MasterKey>> = {};
  for (const kind of options.kinds) {
    const generated = kind === 'ibe' ? generateKemKeys() : generateSigningKeys();
    const [publicKey, secretKey] = 'mpk' in generated ? [generated.mpk, generated.msk] : [generated.vk, generated.sk];
    added[kind] = masterKey(publicKey, secretKey, 'decrypt-only', window);
  }
  const next = {
    ibe: added.ibe === undefined ? set.ibe : [...set.ibe, added.ibe],
    ibs: added.ibs === undefined ? set.ibs : [...set.ibs, added.ibs],
  };
  const list = KINDS.flatMap((kind) => (added[kind] === undefined ? [] : [{ kind, key: added[kind] }]));
  return { set: checkKeySet(next), added: list };
}

function find(set: KeySet, id: string): { kind: KeyKind; key: MasterKey } {
  for (const kind of KINDS) {
    const key = set[kind].find((k) => k.id === id);
    if (key !== undefined) return { kind, key };
  }
  throw new KeySetError('UNKNOWN_KEY', `no key with id ${id} in the key set`);
}

const replace = (set: KeySet, kind: KeyKind, keys: MasterKey[]): KeySet =>
  kind === 'ibe' ? { ibe: keys, ibs: set.ibs } : { ibe: set.ibe, ibs: keys };

/** Makes a decrypt-only key the primary of its kind; the primary before it becomes decrypt-only. */
export function promoteKey(set: KeySet, id: string): { set: KeySet; kind: KeyKind; previous: string | undefined } {
  const { kind, key } = find(set, id);
  if (key.status === 'retired')
    throw new KeySetError('KEY_RETIRED', `key ${id} is retired; add a new key instead of reviving it`);
  if (key.status === 'primary') return { set, kind, previous: undefined };
  const previous = primaryOf(set[kind]).id;
  const keys = set[kind].map((k) =>
    k.id === id
      ? { ...k, status: 'primary' as const }
      : k.status === 'primary'
        ? { ...k, status: 'decrypt-only' as const }
        : k,
  );
  return { set: checkKeySet(replace(set, kind, keys)), kind, previous };
}

/** Retires a key that is not the primary: it issues and verifies nothing any more. */
export function retireKey(set: KeySet, id: string): { set: KeySet; kind: KeyKind; changed: boolean } {
  const { kind, key } = find(set, id);
  if (key.status === 'primary')
    throw new KeySetError('KEY_IS_PRIMARY', `key ${id} is the primary; promote another key first`);
  if (key.status === 'retired') return { set, kind, changed: false };
  const keys = set[kind].map((k) => (k.id === id ? { ...k, status: 'retired' as const } : k));
  return { set: checkKeySet(replace(set, kind, keys)), kind, changed: true };
}

/** A key as the parameters routes publish it: no secret. */
export interface PublishedKeyEntry {
  id: string;
  publicKey: string;
  status: KeyStatus;
  notBefore: number | null;
  notAfter: number | null;
}

export const publishedEntries = (keys: readonly MasterKey[]): PublishedKeyEntry[] =>
  keys.map((k) => ({
    id: k.id,
    publicKey: k.publicKey,
    status: k.status,
    notBefore: k.notBefore ?? null,
    notAfter: k.notAfter ?? null,
  }));
