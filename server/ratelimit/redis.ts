import type { FastifyBaseLogger } from 'fastify';
import { Redis } from 'ioredis';
import {
  ALLOWED,
  BucketStoreUnavailableError,
  atLeastOne,
  memoryBucketStore,
  refused,
  tokenIntervalUs,
  type BucketStore,
  type TakeResult,
  type Tier,
} from './bucket.js';

/**
 * Buckets in Redis, shared by every PKG instance behind a load balancer.
 *
 * Each bucket is one key holding the instant (Redis server time, ms) at which it is full again, with a
 * TTL that ends at that instant: full buckets vanish by themselves. A Lua script does read-decide-write
 * atomically and reads the clock from Redis, so instances with skewed clocks still agree.
 *
 * When Redis is unreachable or slow (no reply within `commandTimeoutMs`), the `failure` policy decides:
 * - 'open' (default): takes are answered from a local memory store, so limits keep holding per instance
 *   instead of failing closed (an outage of a cache would take the PKG down) or not at all (no limit on key
 *   issuance). While Redis is down, clients get up to N times their allowance across N instances.
 * - 'closed': takes reject with BucketStoreUnavailableError and the PKG answers 503, for deployments where
 *   N times the allowance is worse than an outage.
 * Either way the switch is logged once each way, and each take answered without Redis is reported to
 * `onUnavailable` (a metric). ioredis keeps reconnecting in the background and the shared buckets are used
 * again as soon as it is ready; after a timeout on a live connection, Redis is tried again after
 * `retryAfterMs`. Until the first connection is made, takes are answered locally (or refused) without a
 * warning.
 */

// KEYS[1] the bucket; ARGV[1] µs between tokens; ARGV[2] burst. Returns {allowed, µs to wait}.
// The rule of gcraTake (bucket.ts), in whole microseconds of Redis time: exact in Lua's doubles
// (1.7e15 < 2^53); '%.0f' because tostring would print them in 14 significant digits.
const TAKE_SCRIPT = `
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local backlog = math.max((tonumber(redis.call('GET', KEYS[1]) or '0') or 0) - now, 0)
local headroom = (burst - 1) * interval
if backlog > headroom then
  return {0, backlog - headroom}
end
backlog = backlog + interval
redis.call('SET', KEYS[1], string.format('%.0f', now + backlog), 'PX', math.ceil(backlog / 1000))
return {1, 0}
`;

export interface RedisBucketStoreOptions {
  /** Prefix of every bucket key (default `pg-pkg:ratelimit:`). */
  keyPrefix?: string;
  /** A take that Redis has not answered by then is answered locally (default 250 ms). */
  commandTimeoutMs?: number;
  /** After a failed or timed-out command, answer locally this long before trying Redis again (default 1 s). */
  retryAfterMs?: number;
  /** Answers while Redis does not (default: a memory store); unused with failure 'closed'. */
  fallback?: BucketStore;
  /** What a take does while Redis is unavailable: answer locally ('open', default) or reject ('closed'). */
  failure?: 'open' | 'closed';
  /** Called for every take answered without Redis: 'local' (open) or 'refused' (closed). */
  onUnavailable?: (action: 'local' | 'refused') => void;
  logger?: Pick<FastifyBaseLogger, 'warn' | 'info'>;
}

export interface RedisBucketStore extends BucketStore {
  /** True while takes go to Redis; false while the local fallback answers. */
  readonly shared: boolean;
}

type TakeCommand = (key: string, intervalUs: number, burst: number) => Promise<[number, number]>;

export function redisBucketStore(url: string, options: RedisBucketStoreOptions = {}): RedisBucketStore {
  const prefix = options.keyPrefix ?? 'pg-pkg:ratelimit:';
  const fallback = options.fallback ?? memoryBucketStore();
  const log = options.logger;
  const client = new Redis(url, {
    // Fail fast instead of queueing: a queued take would hold its request until Redis returns.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: options.commandTimeoutMs ?? 250,
    connectTimeout: 1000,
    retryStrategy: (attempt) => Math.min(attempt * 100, 1000),
  });
  client.defineCommand('pgRateLimitTake', { numberOfKeys: 1, lua: TAKE_SCRIPT });
  const take = (client as unknown as { pgRateLimitTake: TakeCommand }).pgRateLimitTake.bind(client);

  const retryAfterMs = options.retryAfterMs ?? 1000;
  // 'connecting' until the first connection: takes are answered locally then, without a warning.
  let mode: 'connecting' | 'shared' | 'local' = 'connecting';
  // A connection can stay up while Redis hangs; then only a deadline notices, and one is enough: for
  // retryAfterMs requests skip Redis instead of each waiting out its own timeout.
  let localUntil = 0;
  const closed = options.failure === 'closed';
  const toLocal = (why: string) => {
    if (mode !== 'local') {
      log?.warn(
        `rate limiter: Redis ${why}; ` +
          (closed
            ? 'refusing /v2 requests with 503 until it is back (--redis-failure closed)'
            : "using this instance's own buckets until it is back"),
      );
    }
    mode = 'local';
    localUntil = performance.now() + retryAfterMs;
  };
  const toShared = () => {
    if (mode === 'local') log?.info('rate limiter: Redis is back; using the shared buckets');
    mode = 'shared';
    localUntil = 0;
  };
  // Without an 'error' listener ioredis reports every failed reconnect on stderr.
  client.on('error', (error: Error) => toLocal(`failed (${error.message})`));
  client.on('ready', toShared);

  const withoutRedis = (key: string, tier: Tier, ratePerSecond: number, burst: number): Promise<TakeResult> => {
    options.onUnavailable?.(closed ? 'refused' : 'local');
    if (closed) return Promise.reject(new BucketStoreUnavailableError('Redis is unavailable'));
    return fallback.take(key, tier, ratePerSecond, burst);
  };

  return {
    get shared() {
      return mode === 'shared' && client.status === 'ready';
    },
    async take(key, tier, ratePerSecond, burst): Promise<TakeResult> {
      if (client.status !== 'ready') {
        if (mode === 'shared') toLocal(`connection lost (${client.status})`);
        return withoutRedis(key, tier, ratePerSecond, burst);
      }
      if (performance.now() < localUntil) return withoutRedis(key, tier, ratePerSecond, burst);
      try {
        const [allowed, waitUs] = await take(
          `${prefix}${tier}:${key}`,
          tokenIntervalUs(ratePerSecond),
          Math.floor(atLeastOne(burst)),
        );
        toShared();
        return allowed === 1 ? ALLOWED : refused(waitUs);
      } catch (error) {
        toLocal(`failed (${error instanceof Error ? error.message : String(error)})`);
        return withoutRedis(key, tier, ratePerSecond, burst);
      }
    },
    async close() {
      client.disconnect();
      await fallback.close();
    },
  };
}
