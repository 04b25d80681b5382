import type { KeyValueStore } from './store.js';

/**
 * The PKG client's cache over a KeyValueStore: the PKG's public keys with their validators (ETag,
 * Last-Modified), and, opt-in, session JWTs and user secret keys until they expire. Entries are
 * namespaced by PKG URL. A store that fails (quota, a closed database) degrades to "not cached":
 * caching never makes a key request fail.
 */

export type ParameterKind = 'mpk' | 'vk';

export interface CachedParameters {
  publicKey: string;
  etag?: string;
  lastModified?: string;
  /** When the PKG last confirmed this key (ms since the epoch). */
  checkedAt: number;
}

export type SecretKind = 'jwt' | 'usk';

interface CachedSecret {
  value: string;
  /** ms since the epoch. */
  expiresAt: number;
}

/** Longest time a secret is kept, whatever its JWT says. */
export const MAX_SECRET_LIFETIME_MS = 24 * 3600 * 1000;
/** Secrets count as expired this long before their JWT does, so a cached JWT is never presented at its last second. */
export const EXPIRY_MARGIN_MS = 30_000;

const PREFIX = 'pg';

export class PkgCache {
  constructor(
    private readonly store: Promise<KeyValueStore>,
    private readonly namespace: string,
    private readonly now: () => number,
  ) {}

  private key(...parts: string[]): string {
    return [PREFIX, this.namespace, ...parts].join('|');
  }

  private async read<T>(key: string): Promise<T | undefined> {
    try {
      return await (await this.store).get<T>(key);
    } catch {
      return undefined;
    }
  }

  private async write(key: string, value: unknown): Promise<void> {
    try {
      await (await this.store).set(key, value);
    } catch {
      // not cached, that is all
    }
  }

  private async remove(key: string): Promise<void> {
    try {
      await (await this.store).delete(key);
    } catch {
      // an entry that cannot be deleted cannot be read either
    }
  }

  async parameters(kind: ParameterKind): Promise<CachedParameters | undefined> {
    const entry = await this.read<CachedParameters>(this.key('params', kind));
    if (typeof entry !== 'object' || entry === null || typeof entry.publicKey !== 'string') return undefined;
    return entry;
  }

  putParameters(kind: ParameterKind, entry: CachedParameters): Promise<void> {
    return this.write(this.key('params', kind), entry);
  }

  /** A cached secret that has not expired; an expired one is deleted on the way. */
  async secret(kind: SecretKind, id: string): Promise<string | undefined> {
    const key = this.key(kind, id);
    const entry = await this.read<CachedSecret>(key);
    if (
      typeof entry !== 'object' ||
      entry === null ||
      typeof entry.value !== 'string' ||
      typeof entry.expiresAt !== 'number'
    ) {
      return undefined;
    }
    if (entry.expiresAt <= this.now()) {
      await this.remove(key);
      return undefined;
    }
    return entry.value;
  }

  /** Keeps `value` until `expSeconds` (a JWT exp) minus the margin, and at most a day. */
  async putSecret(kind: SecretKind, id: string, value: string, expSeconds: number | undefined): Promise<void> {
    if (expSeconds === undefined) return;
    const now = this.now();
    const expiresAt = Math.min(expSeconds * 1000 - EXPIRY_MARGIN_MS, now + MAX_SECRET_LIFETIME_MS);
    if (expiresAt <= now) return;
    await this.write(this.key(kind, id), { value, expiresAt } satisfies CachedSecret);
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

  /** Deletes every cached JWT and user secret key of this PKG. */
  async forgetSecrets(): Promise<void> {
    await Promise.all((await this.secretKeys()).map((k) => this.remove(k)));
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
