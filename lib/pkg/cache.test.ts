import { describe, expect, it } from 'vitest';
import { EXPIRY_MARGIN_MS, MAX_SECRET_LIFETIME_MS, PkgCache } from './cache.js';
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
    expect(await store.keys()).toEqual([]);
  });

  it('keeps nothing without an exp or already (nearly) expired; at most a day', async () => {
    const { cache, clock, store } = setup();
    await cache.putSecret('usk', 'a', 'K', undefined);
    await cache.putSecret('usk', 'b', 'K', exp(clock, 30));
    expect(await store.keys()).toEqual([]);
    await cache.putSecret('usk', 'c', 'K', exp(clock, 10 * 86_400));
    clock.advance(MAX_SECRET_LIFETIME_MS - 1);
    expect(await cache.secret('usk', 'c')).toBe('K');
    clock.advance(1);
    expect(await cache.secret('usk', 'c')).toBeUndefined();
  });

  it('a new entry sweeps expired ones, so dead key material does not linger', async () => {
    const { cache, clock, store } = setup();
    await cache.putSecret('usk', 'old', 'K1', exp(clock, 60));
    clock.advance(60_000);
    await cache.putSecret('usk', 'new', 'K2', exp(clock, 600));
    expect((await store.keys()).map((k) => k.split('|').at(-1))).toEqual(['new']);
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

  it('the memory store keeps copies, not the caller objects', async () => {
    const store = memoryStore();
    const value = { a: 1 };
    await store.set('k', value);
    value.a = 2;
    expect(await store.get('k')).toEqual({ a: 1 });
  });
});
