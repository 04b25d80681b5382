import cluster from 'node:cluster';
import type { FastifyBaseLogger, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { PkgError, sendError } from '../errors.js';
import { BucketStoreUnavailableError, memoryBucketStore, type BucketStore } from './bucket.js';
import { clusterBucketStore } from './cluster.js';
import { clientAddress, clientKey, trustedProxies } from './key.js';
import { redisBucketStore } from './redis.js';

/**
 * The PKG's rate limiter: token buckets per client address in two tiers.
 *
 * Every request under /v2 takes a token from the client's general bucket; a request to a key-issuing
 * route then also takes one from the client's sensitive bucket (one bucket for all sensitive routes).
 * A route declares its tier where it is defined: `config: { rateLimit: 'sensitive' }` (SENSITIVE).
 * The general token is spent even when the sensitive tier refuses. CORS preflights and everything
 * outside /v2 (/health, /metrics) pass untouched. Over the limit: 429 with Retry-After.
 *
 * Where the buckets live is the store's business: one process (memoryBucketStore), the workers of one
 * node:cluster (clusterBucketStore in workers + installClusterBucketServer in the primary), or several
 * instances (redisBucketStore). processBucketStore picks the right one for the process it runs in.
 */

export {
  ALLOWED,
  BucketStoreUnavailableError,
  memoryBucketStore,
  type BucketStore,
  type MemoryBucketStore,
  type TakeResult,
  type Tier,
} from './bucket.js';
export { addressKey, clientAddress, clientKey, forwardedAddress, trustedProxies, type TrustedProxies } from './key.js';
export { clusterBucketStore, installClusterBucketServer, type ClusterBucketStoreOptions } from './cluster.js';
export { redisBucketStore, type RedisBucketStore, type RedisBucketStoreOptions } from './redis.js';

/**
 * The store for the process this runs in:
 * - with a Redis URL, Redis (in every process, workers included; the cluster primary then needs nothing);
 * - in a node:cluster worker, the primary's buckets (the primary must call installClusterBucketServer
 *   with a memoryBucketStore() before forking);
 * - otherwise this process's memory.
 */
export function processBucketStore(options: {
  redisUrl?: string | undefined;
  /** With Redis: its failure policy, call deadline and unavailability counter (redis.ts). */
  redisFailure?: 'open' | 'closed';
  redisTimeoutMs?: number;
  onRedisUnavailable?: (action: 'local' | 'refused') => void;
  logger?: Pick<FastifyBaseLogger, 'warn' | 'info'>;
}): BucketStore {
  const logger = options.logger === undefined ? {} : { logger: options.logger };
  if (options.redisUrl !== undefined) {
    return redisBucketStore(options.redisUrl, {
      ...logger,
      ...(options.redisFailure === undefined ? {} : { failure: options.redisFailure }),
      ...(options.redisTimeoutMs === undefined ? {} : { commandTimeoutMs: options.redisTimeoutMs }),
      ...(options.onRedisUnavailable === undefined ? {} : { onUnavailable: options.onRedisUnavailable }),
    });
  }
  if (cluster.isWorker) return clusterBucketStore(logger);
  return memoryBucketStore();
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route's rate-limit tier beyond the general one every /v2 request pays. */
    rateLimit?: 'sensitive';
  }
}

/** Route options for a key-issuing route (the reference PKG's set: start, key, sign/key, api-key/validate). */
export const SENSITIVE = { rateLimit: 'sensitive' } as const;

export interface RateLimitSettings {
  perSecond: number;
  burst: number;
  sensitivePerSecond: number;
  sensitiveBurst: number;
  disabled: boolean;
  /** Deprecated (pg-pkg's flag): key on the rightmost X-Forwarded-For entry, whoever the peer is. */
  trustForwardedFor: boolean;
  /** Addresses and CIDR ranges of our reverse proxies: their X-Forwarded-For entries are believed. */
  trustedProxies?: readonly string[];
}

/** How a request's client is keyed: the peer, or X-Forwarded-For as far as trusted proxies wrote it. */
export type ClientKeyOf = (request: FastifyRequest) => string | undefined;

type TrustSettings = Pick<RateLimitSettings, 'trustForwardedFor' | 'trustedProxies'>;

/** A request's peer and X-Forwarded-For, read through `pick` with the proxies `settings` trust. */
function forwardedResolver(settings: TrustSettings, pick: typeof clientKey | typeof clientAddress): ClientKeyOf {
  const proxies = settings.trustedProxies;
  const trust = proxies !== undefined && proxies.length > 0 ? trustedProxies(proxies) : settings.trustForwardedFor;
  return (request) => {
    const forwarded = request.headers['x-forwarded-for'];
    return pick(request.socket.remoteAddress, Array.isArray(forwarded) ? forwarded.join(',') : forwarded, trust);
  };
}

export const clientKeyResolver = (settings: TrustSettings): ClientKeyOf => forwardedResolver(settings, clientKey);

/** The client's whole address, found as the limiter finds its key (for the audit trail). */
export const clientAddressResolver = (settings: TrustSettings): ClientKeyOf =>
  forwardedResolver(settings, clientAddress);

/** Where clients are keyed, for the start-up log. */
export function describeClientKeying(
  settings: Pick<RateLimitSettings, 'trustForwardedFor' | 'trustedProxies'>,
): string {
  const proxies = settings.trustedProxies ?? [];
  if (proxies.length > 0) return `the X-Forwarded-For entry left of the trusted proxies (${proxies.join(', ')})`;
  return settings.trustForwardedFor
    ? 'the rightmost X-Forwarded-For entry (deprecated setting)'
    : 'the TCP peer address';
}

export interface RateLimitPluginOptions {
  settings: RateLimitSettings;
  store: BucketStore;
  /** Default: clientKeyResolver(settings). */
  clientKeyOf?: ClientKeyOf;
}

const isLimitedPath = (path: string) => path === '/v2' || path.startsWith('/v2/');

const isPreflight = (request: FastifyRequest) =>
  request.method === 'OPTIONS' && request.headers['access-control-request-method'] !== undefined;

function tooManyRequests(reply: FastifyReply, retryAfterSeconds: number) {
  const seconds = Math.max(1, retryAfterSeconds);
  return sendError(
    reply,
    new PkgError('RATE_LIMITED', `Too many requests, retry in ${seconds}s`, { retryAfterSeconds: seconds }),
  );
}

const plugin: FastifyPluginAsync<RateLimitPluginOptions> = async (app, { settings, store, clientKeyOf }) => {
  if (settings.disabled) {
    app.log.warn('rate limiting is disabled: every request passes');
    return;
  }
  app.log.info(
    `rate limiting: ${settings.perSecond}/s burst ${settings.burst}; key-issuing ${settings.sensitivePerSecond}/s ` +
      `burst ${settings.sensitiveBurst}; clients keyed on ${describeClientKeying(settings)}`,
  );
  const keyOf = clientKeyOf ?? clientKeyResolver(settings);

  app.addHook('onRequest', async (request, reply) => {
    const path = request.url.split('?', 1)[0] ?? '';
    const route = request.routeOptions.url;
    if (!(isLimitedPath(path) || (route !== undefined && isLimitedPath(route))) || isPreflight(request)) return;

    const key = keyOf(request);
    if (key === undefined) {
      // No peer address: the socket is already gone, or the PKG listens on a Unix socket without a trusted
      // proxy's X-Forwarded-For. Refusing beats pooling every such client into one bucket unannounced.
      return reply.code(500).send({ error: true, code: 'INTERNAL', message: 'could not determine the client address' });
    }

    try {
      const general = await store.take(key, 'general', settings.perSecond, settings.burst);
      if (!general.allowed) return tooManyRequests(reply, general.retryAfterSeconds);
      if (request.routeOptions.config.rateLimit !== 'sensitive') return;
      const sensitive = await store.take(key, 'sensitive', settings.sensitivePerSecond, settings.sensitiveBurst);
      if (!sensitive.allowed) return tooManyRequests(reply, sensitive.retryAfterSeconds);
    } catch (error) {
      // A store whose backend is down answers locally, or (--redis-failure closed) refuses; the store
      // has logged that once, so no line per request here.
      if (error instanceof BucketStoreUnavailableError) {
        return sendError(reply, new PkgError('RATE_LIMITER_UNAVAILABLE', undefined, { retryAfterSeconds: 1 }));
      }
      // Anything else is a bug; a bug in the limiter should not take the PKG down with it.
      request.log.error({ err: error }, 'rate limiter store failed; request let through');
    }
  });
};

/** Not encapsulated (fastify-plugin), so its hook covers every route of the app it is registered on. */
export const rateLimitPlugin = fp(plugin, { name: 'pg-pkg-ratelimit', fastify: '5.x' });
