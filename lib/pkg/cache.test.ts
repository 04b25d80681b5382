import { describe, expect, it } from 'vitest';
import { EXPIRY_MARGIN_MS, PkgCache, next4am } from './cache.js';
import { memoryStore } from './store.js';

describe('PkgCache secrets', () => {
  const setup = () => {
    const store = memoryStore();
    let now = 1_000_000_000_000;
    const clock = { now: () => now, advance: (ms: number) => (now += ms) };
    return { store, clock, cache: new PkgCache(Promise.resolve(store), 'https://pkg.a', clock.now) };
  };
  const exp = (clock: { now(): number }, seconds: number) => Math.floor(clock.now() / 1000) + seconds;

  it('keeps a secret until its exp minus the margin, then deletes it from the store', async () => {
    const { cache, clock, store } = setup();
    await cache.putSecret('jwt', 'alice', 'J', exp(clock, 120));
    clock.advance(120_000 - EXPIRY_MARGIN_MS - 1);
    expect(await cache.secret('jwt', 'alice')).toBe('J');
    clock.advance(1);
    expect(await cache.secret('jwt', 'alice')).toBeUndefined();
    expect((await store.keys()).filter((k) => !k.endsWith('device-key'))).toEqual([]);
  });

  it('keeps nothing without an exp or already (nearly) expired; at most until the next 04:00', async () => {
    const { cache, clock, store } = setup();
    await cache.putSecret('usk', 'a', 'K', undefined);
    await cache.putSecret('usk', 'b', 'K', exp(clock, 30));
    expect((await store.keys()).filter((k) => !k.endsWith('device-key'))).toEqual([]);
    const fourAm = next4am(clock.now());
    expect(new Date(fourAm).getHours()).toBe(4);
    expect(fourAm - clock.now()).toBeLessThanOrEqual(86_400_000);
    await cache.putSecret('usk', 'c', 'K', exp(clock, 10 * 86_400));
    clock.advance(fourAm - clock.now() - 1);
    expect(await cache.secret('usk', 'c')).toBe('K');
    clock.advance(1);
    expect(await cache.secret('usk', 'c')).toBeUndefined();
  });

  it('a new entry sweeps expired ones, so dead key material does not linger', async () => {
    const { cache, clock, store } = setup();
    await cache.putSecret('usk', 'old', 'K1', exp(clock, 60));
    clock.advance(60_000);
    await cache.putSecret('usk', 'new', 'K2', exp(clock, 600));
    expect((await store.keys()).map((k) => k.split('|').at(-1)).filter((k) => k !== 'device-key')).toEqual(['new']);
  });

  it('forgetting touches only this PKG and only secrets; garbage entries read as absent', async () => {
    const { cache, clock, store } = setup();
    const other = new PkgCache(Promise.resolve(store), 'https://pkg.b', clock.now);
    await cache.putSecret('jwt', 'x', 'J', exp(clock, 600));
    await cache.putSecret('usk', 'x', 'K', exp(clock, 600));
    await cache.putParameters('mpk', { publicKey: 'M', checkedAt: 1 });
    await other.putSecret('jwt', 'x', 'J2', exp(clock, 600));
    await cache.forgetSecrets();
    expect(await cache.secret('jwt', 'x')).toBeUndefined();
    expect(await cache.secret('usk', 'x')).toBeUndefined();
    expect(await cache.parameters('mpk')).toEqual({ publicKey: 'M', checkedAt: 1 });
    expect(await other.secret('jwt', 'x')).toBe('J2');
    await store.set('pg|https://pkg.a|jwt|y', { value: 5, expiresAt: 'never' });
    await store.set('pg|https://pkg.a|params|vk', 'not an object');
    expect(await cache.secret('jwt', 'y')).toBeUndefined();
    expect(await cache.parameters('vk')).toBeUndefined();
  });

  it('a secret is stored sealed under a non-extractable key: no byte of it in the store, moved or changed it does not open', async () => {
    const { cache, clock, store } = setup();
    const secret = 'eyJhbGciOiJFUzI1NiJ9.a-session-jwt.signature';
    await cache.putSecret('jwt', 'alice', secret, exp(clock, 600));
    const names = await store.keys();
    const dump = JSON.stringify(await Promise.all(names.map(async (k) => [k, await store.get(k)])), (_, v: unknown) =>
      v instanceof Uint8Array ? Buffer.from(v).toString('latin1') : v,
    );
    expect(dump).not.toContain('a-session-jwt');
    const wrapping = await store.get<CryptoKey>('pg|https://pkg.a|device-key');
    expect(wrapping).toBeInstanceOf(CryptoKey);
    expect(wrapping!.extractable).toBe(false);
    await expect(crypto.subtle.exportKey('raw', wrapping!)).rejects.toThrow();

    const entry = await store.get<{ sealed: { data: Uint8Array } }>('pg|https://pkg.a|jwt|alice');
    await store.set('pg|https://pkg.a|jwt|mallory', entry);
    expect(await cache.secret('jwt', 'mallory')).toBeUndefined();
    entry!.sealed.data[0]! ^= 1;
    await store.set('pg|https://pkg.a|jwt|alice', entry);
    expect(await cache.secret('jwt', 'alice')).toBeUndefined();
    expect(await store.get('pg|https://pkg.a|jwt|alice')).toBeUndefined();
  });

  it('forgetting deletes the wrapping key too: nothing is left, and a copy made before cannot be opened', async () => {
    const { cache, clock, store } = setup();
    await cache.putSecret('usk', 'bob', 'USK', exp(clock, 600));
    const copy = await store.get('pg|https://pkg.a|usk|bob');
    await cache.forgetSecrets();
    expect(await store.keys()).toEqual([]);
    await store.set('pg|https://pkg.a|usk|bob', copy);
    expect(await cache.secret('usk', 'bob')).toBeUndefined();
    // The next secret gets a new wrapping key.
    await cache.putSecret('usk', 'bob', 'USK2', exp(clock, 600));
    expect(await cache.secret('usk', 'bob')).toBe('USK2');
  });

  it('the memory store keeps copies, not the caller objects', async () => {
    const store = memoryStore();
    const value = { a: 1 };
    await store.set('k', value);
    value.a = 2;
    expect(await store.get('k')).toEqual({ a: 1 });
  });
});
