import type { KeyCandidate } from '../key-candidates.js';
import { PkgClientError, PkgClientErrorCode } from './errors.js';
import { deviceKeyBox, type SealedSecret, type SecretBox, type SecretTier } from './secret-box.js';
import type { KeyValueStore } from './store.js';

/**
 * The PKG client's cache over a KeyValueStore: the PKG's public keys with their validators (ETag,
 * Last-Modified), and, opt-in, session JWTs and user secret keys until they expire (their JWT's
 * exp or the next 04:00 local time, whichever is first), sealed under the device's wrapping key
 * (secret-box.ts) or, opted in, a passkey's (passkey.ts): the store never holds them in the clear.
 * Entries are namespaced by PKG URL. A store that fails (quota, a closed database) degrades to
 * "not cached": a store never makes a key request fail. A passkey that gives no key does, typed
 * (passkey.ts), since the user chose that tier and must hear why nothing was remembered.
 */

export type ParameterKind = 'mpk' | 'vk';

export interface CachedParameters {
  publicKey: string;
  /** The PKG's key set as it publishes it beside `publicKey` (absent from a PKG without one). */
  keys?: KeyCandidate[];
  etag?: string;
  lastModified?: string;
  /** When the PKG last confirmed this key (ms since the epoch). */
  checkedAt: number;
}

export type SecretKind = 'jwt' | 'usk';

interface CachedSecret {
  /** The secret, sealed under the wrapping key, bound to the entry's name. */
  sealed: SealedSecret;
  /** ms since the epoch. */
  expiresAt: number;
}

/** The next 04:00 local time after `now` (ms): no secret is kept past it, whatever its JWT says (today's rule). */
export function next4am(now: number): number {
  const next = new Date(now);
  next.setHours(4, 0, 0, 0);
  if (next.getTime() <= now) next.setDate(next.getDate() + 1);
  return next.getTime();
}
/** Secrets count as expired this long before their JWT does, so a cached JWT is never presented at its last second. */
export const EXPIRY_MARGIN_MS = 30_000;

const PREFIX = 'pg';

export class PkgCache {
  private readonly boxes: Partial<Record<SecretTier, SecretBox>>;
  private box: SecretBox;

  constructor(
    private readonly store: Promise<KeyValueStore>,
    private readonly namespace: string,
    private readonly now: () => number,
    boxes: Partial<Record<SecretTier, SecretBox>> = {},
  ) {
    this.boxes = { device: deviceKeyBox(store, this.key('device-key')), ...boxes };
    this.box = this.boxes.device!;
  }

  /** The tier new secrets are sealed under and old ones opened with. */
  get tier(): SecretTier {
    return this.box.tier;
  }

  /** Seals and opens with `tier`'s box from now on; entries of the other tier then read as absent. */
  useTier(tier: SecretTier): void {
    const box = this.boxes[tier];
    if (box === undefined) throw new PkgClientError(PkgClientErrorCode.INVALID_ARGUMENT, `no ${tier} tier here`);
    this.box = box;
  }

  /** The name a value of this cache is stored under (`pg|<PKG URL>|…parts`). */
  key(...parts: string[]): string {
    return [PREFIX, this.namespace, ...parts].join('|');
  }

  async read<T>(key: string): Promise<T | undefined> {
    try {
      return await (await this.store).get<T>(key);
    } catch {
      return undefined;
    }
  }

  async write(key: string, value: unknown): Promise<void> {
    try {
      await (await this.store).set(key, value);
    } catch {
      // not cached, that is all
    }
  }

  async remove(key: string): Promise<void> {
    try {
      await (await this.store).delete(key);
    } catch {
      // an entry that cannot be deleted cannot be read either
    }
  }

  async parameters(kind: ParameterKind): Promise<CachedParameters | undefined> {
    const entry = await this.read<CachedParameters>(this.key('params', kind));
    if (typeof entry !== 'object' || entry === null || typeof entry.publicKey !== 'string') return undefined;
    // An entry written by another version: its key set, if any, is asked for again.
    if (entry.keys !== undefined && !Array.isArray(entry.keys)) return undefined;
    return entry;
  }

  putParameters(kind: ParameterKind, entry: CachedParameters): Promise<void> {
    return this.write(this.key('params', kind), entry);
  }

  /** A cached secret that has not expired; an expired one is deleted on the way. */
  async secret(kind: SecretKind, id: string): Promise<string | undefined> {
    const key = this.key(kind, id);
    const entry = await this.read<CachedSecret>(key);
    if (typeof entry !== 'object' || entry === null || typeof entry.expiresAt !== 'number') return undefined;
    if (entry.expiresAt <= this.now()) {
      await this.remove(key);
      return undefined;
    }
    // The passkey tier throws here when its passkey gives no key: the caller hears why.
    const value = await this.box.open(entry.sealed, key);
    // Not ours, moved, changed, another tier's, or its wrapping key is gone: useless, so not kept either.
    if (value === undefined) await this.remove(key);
    return value;
  }

  /** Keeps `value`, sealed, until `expSeconds` (a JWT exp) minus the margin, and at most until the next 04:00. */
  async putSecret(kind: SecretKind, id: string, value: string, expSeconds: number | undefined): Promise<void> {
    if (expSeconds === undefined) return;
    const now = this.now();
    const expiresAt = Math.min(expSeconds * 1000 - EXPIRY_MARGIN_MS, next4am(now));
    if (expiresAt <= now) return;
    const key = this.key(kind, id);
    let sealed: SealedSecret;
    try {
      sealed = await this.box.seal(value, key);
    } catch {
      // No wrapping key (no WebCrypto, a store that refuses keys, a passkey that gave none): not
      // cached, never in the clear nor under another tier's key.
      return;
    }
    await this.write(key, { sealed, expiresAt } satisfies CachedSecret);
    await this.sweep();
  }

  forgetSecret(kind: SecretKind, id: string): Promise<void> {
    return this.remove(this.key(kind, id));
  }

  private async secretKeys(): Promise<string[]> {
    try {
      const all = await (await this.store).keys();
      const jwt = this.key('jwt', '');
      const usk = this.key('usk', '');
      return all.filter((k) => k.startsWith(jwt) || k.startsWith(usk));
    } catch {
      return [];
    }
  }

  /**
   * Deletes every cached JWT and user secret key of this PKG, and the wrapping keys they were
   * sealed under (the device's from the store, a passkey's from memory): nothing of them is left,
   * not even a ciphertext that a key could open.
   */
  async forgetSecrets(): Promise<void> {
    await Promise.all((await this.secretKeys()).map((k) => this.remove(k)));
    await Promise.all(Object.values(this.boxes).map((box) => box.forget().catch(() => undefined)));
  }

  /** Asks the current tier for its wrapping key now (the passkey's one prompt), by sealing nothing. */
  async unlock(): Promise<void> {
    await this.box.seal('', this.key('unlock'));
  }

  /** Deletes expired secrets, so key material does not linger in storage after it is useless. */
  async sweep(): Promise<void> {
    const now = this.now();
    for (const key of await this.secretKeys()) {
      const entry = await this.read<CachedSecret>(key);
      if (
        typeof entry !== 'object' ||
        entry === null ||
        !(typeof entry.expiresAt === 'number' && entry.expiresAt > now)
      ) {
        await this.remove(key);
      }
    }
  }
}
