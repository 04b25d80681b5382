import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closedPort, recordingLogger, startTcpProxy } from '../db/testing.js';
import { BucketStoreUnavailableError } from './bucket.js';
import { redisBucketStore, type RedisBucketStore } from './redis.js';

const REDIS_URL = process.env['TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379';

const until = async (condition: () => boolean, what: string) => {
  const deadline = Date.now() + 10_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
};

const allowedOf = async (takes: Array<Promise<{ allowed: boolean }>>) =>
  (await Promise.all(takes)).filter((r) => r.allowed).length;

describe('redisBucketStore', () => {
  // A prefix per run keeps concurrent runs (and other engineers) out of each other's buckets.
  const keyPrefix = `pg-pkg-test:${randomBytes(6).toString('hex')}:`;
  let raw: Redis;
  const stores: RedisBucketStore[] = [];
  const open = (url = REDIS_URL, extra: Parameters<typeof redisBucketStore>[1] = {}) => {
    const store = redisBucketStore(url, { keyPrefix, ...extra });
    stores.push(store);
    return store;
  };

  beforeAll(() => {
    raw = new Redis(REDIS_URL);
  });
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    const leftovers = await raw.keys(`${keyPrefix}*`);
    if (leftovers.length > 0) await raw.del(...leftovers);
    raw.disconnect();
  });

  it('lets two instances share one bucket', async () => {
    const one = open();
    const two = open();
    await until(() => one.shared && two.shared, 'both stores are connected');
    const takes = [];
    for (let i = 0; i < 10; i++) takes.push((i % 2 === 0 ? one : two).take('198.51.100.1', 'general', 1, 5));
    expect(await allowedOf(takes)).toBe(5);
    expect(await two.take('198.51.100.1', 'general', 1, 5)).toMatchObject({ allowed: false, retryAfterSeconds: 1 });
    // Another client and the other tier are separate buckets.
    expect((await one.take('198.51.100.2', 'general', 1, 5)).allowed).toBe(true);
    expect((await one.take('198.51.100.1', 'sensitive', 1, 1)).allowed).toBe(true);
    expect((await two.take('198.51.100.1', 'sensitive', 1, 1)).allowed).toBe(false);
  });

  it('stores one exact instant per bucket, with a TTL that ends when the bucket is full again', async () => {
    const store = open();
    await until(() => store.shared, 'connected');
    await store.take('198.51.100.3', 'general', 10, 3);
    await store.take('198.51.100.3', 'general', 10, 3);
    const key = `${keyPrefix}general:198.51.100.3`;
    // The full instant in whole µs of Redis time, written out in full (no exponent, no fraction).
    expect(await raw.get(key)).toMatch(/^\d{16}$/);
    const ttl = await raw.pttl(key);
    expect(ttl).toBeGreaterThan(100);
    expect(ttl).toBeLessThanOrEqual(200);
  });

  it('lets full buckets vanish, and refills at the configured rate', async () => {
    const store = open();
    await until(() => store.shared, 'connected');
    const key = `${keyPrefix}general:198.51.100.4`;
    expect(await allowedOf([1, 2, 3].map(() => store.take('198.51.100.4', 'general', 20, 2)))).toBe(2);
    expect(await raw.exists(key)).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 150)); // 2 tokens at 20/s: full after 100 ms
    expect(await raw.exists(key)).toBe(0);
    expect(await allowedOf([1, 2, 3].map(() => store.take('198.51.100.4', 'general', 20, 2)))).toBe(2);
  });

  it('answers from local buckets when Redis cannot be reached, and says so once', async () => {
    const { lines, logger } = recordingLogger();
    const store = open(`redis://127.0.0.1:${await closedPort()}`, { logger });
    await until(() => lines.length > 0, 'the failure is logged');
    expect(store.shared).toBe(false);
    // Still a limit, per instance: burst 2.
    expect(await allowedOf([1, 2, 3].map(() => store.take('198.51.100.5', 'general', 1, 2)))).toBe(2);
    await new Promise((resolve) => setTimeout(resolve, 300)); // a few reconnect attempts
    expect(lines).toEqual([['warn', expect.stringContaining('ECONNREFUSED')]]);
  });

  it('moves to local buckets when Redis goes away and back to the shared ones when it returns', async () => {
    const proxy = await startTcpProxy(Number(new URL(REDIS_URL).port || 6379), new URL(REDIS_URL).hostname);
    const { lines, logger } = recordingLogger();
    const viaProxy = open(`redis://127.0.0.1:${proxy.port}`, { logger });
    const direct = open();
    try {
      await until(() => viaProxy.shared && direct.shared, 'connected');
      expect(lines).toEqual([]); // connecting at start-up is not an outage
      expect((await viaProxy.take('198.51.100.6', 'general', 1, 2)).allowed).toBe(true);

      await proxy.down();
      await until(() => !viaProxy.shared, 'the outage is noticed');
      // The shared bucket has one token left, but the local fallback starts full: 2 more, then refused.
      expect(await allowedOf([1, 2, 3].map(() => viaProxy.take('198.51.100.6', 'general', 1, 2)))).toBe(2);
      expect(lines).toHaveLength(1);
      expect(lines[0]?.[0]).toBe('warn');

      await proxy.up();
      await until(() => viaProxy.shared, 'Redis is used again');
      expect(lines).toHaveLength(2);
      expect(lines[1]).toEqual(['info', expect.stringContaining('back')]);
      // Shared again: the instance behind the proxy and a direct one drain the same bucket.
      const shared = await allowedOf([
        viaProxy.take('198.51.100.7', 'general', 1, 3),
        direct.take('198.51.100.7', 'general', 1, 3),
        viaProxy.take('198.51.100.7', 'general', 1, 3),
        direct.take('198.51.100.7', 'general', 1, 3),
      ]);
      expect(shared).toBe(3);
    } finally {
      await proxy.close();
    }
  });

  it('answers locally when Redis stops replying, without making every request wait', async () => {
    const proxy = await startTcpProxy(Number(new URL(REDIS_URL).port || 6379), new URL(REDIS_URL).hostname);
    const { lines, logger } = recordingLogger();
    const store = open(`redis://127.0.0.1:${proxy.port}`, { logger, commandTimeoutMs: 100, retryAfterMs: 60_000 });
    try {
      await until(() => store.shared, 'connected');
      proxy.stall(); // the connection stays up, but nothing comes back
      let started = performance.now();
      expect((await store.take('198.51.100.8', 'general', 1, 2)).allowed).toBe(true);
      expect(performance.now() - started).toBeGreaterThanOrEqual(90);
      expect(store.shared).toBe(false);
      expect(lines).toEqual([['warn', expect.stringContaining('timed out')]]);
      // Within retryAfterMs the next takes do not wait for Redis again.
      started = performance.now();
      expect((await store.take('198.51.100.8', 'general', 1, 2)).allowed).toBe(true);
      expect((await store.take('198.51.100.8', 'general', 1, 2)).allowed).toBe(false);
      expect(performance.now() - started).toBeLessThan(90);
      // A fresh connection ends the local period at once.
      await proxy.down();
      await proxy.up();
      await until(() => store.shared, 'reconnected');
      expect((await store.take('198.51.100.9', 'general', 1, 2)).allowed).toBe(true);
      expect(await raw.exists(`${keyPrefix}general:198.51.100.9`)).toBe(1);
    } finally {
      await proxy.close();
    }
  });

  it('failure closed: refuses while Redis is unreachable, counts each refusal, and says so once', async () => {
    const { lines, logger } = recordingLogger();
    const actions: string[] = [];
    const store = open(`redis://127.0.0.1:${await closedPort()}`, {
      logger,
      failure: 'closed',
      onUnavailable: (a) => actions.push(a),
    });
    await until(() => lines.length > 0, 'the failure is logged');
    for (let i = 0; i < 3; i++) {
      await expect(store.take('198.51.100.10', 'general', 1, 2)).rejects.toBeInstanceOf(BucketStoreUnavailableError);
    }
    expect(actions).toEqual(['refused', 'refused', 'refused']);
    await new Promise((resolve) => setTimeout(resolve, 300)); // a few reconnect attempts
    expect(lines).toEqual([['warn', expect.stringContaining('refusing')]]);
  });

  it('failure closed: a Redis that stops replying is refused after the call deadline, not waited for', async () => {
    const proxy = await startTcpProxy(Number(new URL(REDIS_URL).port || 6379), new URL(REDIS_URL).hostname);
    const actions: string[] = [];
    const store = open(`redis://127.0.0.1:${proxy.port}`, {
      failure: 'closed',
      commandTimeoutMs: 100,
      onUnavailable: (a) => actions.push(a),
    });
    try {
      await until(() => store.shared, 'connected');
      expect((await store.take('198.51.100.11', 'general', 1, 2)).allowed).toBe(true);
      proxy.stall();
      const started = performance.now();
      await expect(store.take('198.51.100.11', 'general', 1, 2)).rejects.toBeInstanceOf(BucketStoreUnavailableError);
      const waited = performance.now() - started;
      expect(waited).toBeGreaterThanOrEqual(90);
      expect(waited).toBeLessThan(1000);
      expect(actions).toEqual(['refused']);
    } finally {
      await proxy.close();
    }
  });

  it('failure open counts every take answered locally', async () => {
    const actions: string[] = [];
    const store = open(`redis://127.0.0.1:${await closedPort()}`, { onUnavailable: (a) => actions.push(a) });
    expect(await allowedOf([1, 2, 3].map(() => store.take('198.51.100.12', 'general', 1, 2)))).toBe(2);
    expect(actions).toEqual(['local', 'local', 'local']);
  });
});
