import cors from '@fastify/cors';
import Fastify from 'fastify';
import type { FastifyBaseLogger, FastifyInstance, FastifyServerOptions } from 'fastify';
import type { PkgKeys } from 'postguard-ts/keys';
import { systemClock, type Clock } from './clock.js';
import { corsOptions } from './cors.js';
import { oneKeySet, primaryKeys, publishedEntries, type KeySet } from './keyset.js';
import type { ApiKeyStore } from './db.js';
import { errorHandler, frameworkErrorHandler, notFoundHandler } from './errors.js';
import { IdentityServerClient } from './idp/client.js';
import { ResultJwtVerifier } from './idp/jwt.js';
import { StatusStreams, type StatusStreamLimits } from './idp/status-streams.js';
import { CLIENT_HEADER, createMetrics, type PkgMetrics } from './metrics.js';
import {
  clientAddressResolver,
  clientKeyResolver,
  rateLimitPlugin,
  trustedProxies,
  type BucketStore,
  type RateLimitSettings,
} from './ratelimit/index.js';
import {
  DEFAULT_CONNECTION_LIMITS,
  clientErrorHandler,
  limitedServerFactory,
  type ConnectionLimits,
} from './connections.js';
import { auditRequests } from './audit-hook.js';
import { apiKeyRoutes } from './routes/apikey.js';
import { keyRoutes } from './routes/keys.js';
import { opsRoutes } from './routes/ops.js';
import { parametersRoutes } from './routes/parameters.js';
import { sessionRoutes } from './routes/session.js';

/**
 * The PKG as a Fastify instance. Everything it depends on comes in through `AppDeps`, so tests build
 * it with a manual clock, the real stand-in identity server, real PostgreSQL and real HTTP.
 *
 * Layout (hooks run in this order on every request):
 *   CORS (onRequest)  →  rate limiter (onRequest, /v2 only)  →  route authentication (onRequest)
 *   →  JSON parsing (64 KiB)  →  schema validation  →  handler;  metrics in onResponse.
 * Identity routes are served under /v2/irma (pg-pkg's name), /v2/request (its newer name) and /v2/idp.
 */

export const IDENTITY_PREFIXES = ['/v2/irma', '/v2/request', '/v2/idp'] as const;

/**
 * /v2/irma/* is pg-pkg's old name of /v2/request/*, deprecated upstream since 2026-07-27. Its answers say
 * so: `Deprecation` (RFC 9745, the instant as a structured date), `Sunset` (RFC 8594: the alias is kept at
 * least until then; our date, a year on) and a `Link` to the successor.
 */
export const IRMA_ALIAS_DEPRECATED = new Date('2026-07-27T00:00:00Z');
export const IRMA_ALIAS_SUNSET = new Date('2027-07-27T00:00:00Z');
export const DEFAULT_BODY_LIMIT = 64 * 1024;

export interface IdentityServerDeps {
  /** Base URL of the Yivi (IRMA) server, e.g. https://is.yivi.app. */
  url: string;
  /** Requestor token (sent as the raw Authorization value). */
  token?: string | undefined;
  /** Deadline per identity-server call in ms. 5000. */
  timeoutMs?: number;
  fetch?: typeof fetch;
}

export interface AppDeps {
  /** The four master keys (see readPkgKeys): a key set of one primary each, unless `keySet` is given. */
  keys: PkgKeys;
  /** The master key sets (server/keyset.ts); its primaries take the place of `keys`. */
  keySet?: KeySet;
  /** Last-Modified of the two public keys (their files' mtimes). Default: when the app was built. */
  keysModified?: { mpk?: Date; vk?: Date };
  identityServer: IdentityServerDeps;
  /** API-key lookups (server/db.ts); none: API keys are refused and /v2/api-key/validate is absent. */
  apiKeys?: ApiKeyStore | undefined;
  rateLimit: { settings: RateLimitSettings; store: BucketStore };
  /** Exact origins allowed to call from a browser; an entry "*" allows any. */
  allowedOrigins: readonly string[];
  /** Unix seconds; default the system clock. Drives JWT expiry, key timestamps and key-fetch backoff. */
  clock?: Clock;
  /** A pino logger, or Fastify logger options; default: no logging. */
  logger?: FastifyBaseLogger | FastifyServerOptions['logger'];
  /** Largest request body in bytes. 64 KiB. */
  bodyLimit?: number;
  /** Include Node's process metrics in /metrics. Default true. */
  processMetrics?: boolean;
  /** Where requests and keys are counted (a cluster worker passes one that reports the aggregate). */
  metrics?: PkgMetrics;
  /** Header and request deadlines, keep-alive, the socket cap (server/connections.ts). */
  connections?: Partial<ConnectionLimits>;
  /** Caps and lifetime of status-event streams (server/idp/status-streams.ts). */
  statusStreams?: Partial<StatusStreamLimits>;
  /** The `iss` the identity server's JWTs must carry; default: any (as pg-pkg). */
  jwtIssuer?: string | undefined;
  /** Refuse sessions and keys for demo-scheme (irma-demo) attributes, which anyone can self-issue. Default false. */
  refuseDemoSchemes?: boolean;
}

/** Session tokens in URLs (jwt/{token}, statusevents/{token}) are credentials of a sort: never logged. */
export const maskTokens = (url: string): string => url.replace(/[A-Z0-9]{20,}/gi, '[token]');

function loggerOptions(logger: AppDeps['logger']): Pick<FastifyServerOptions, 'logger' | 'loggerInstance'> {
  if (logger === undefined || logger === false) return { logger: false };
  if (typeof logger === 'object' && typeof (logger as FastifyBaseLogger).child === 'function') {
    return { loggerInstance: logger as FastifyBaseLogger };
  }
  const base = logger === true ? {} : (logger as Record<string, unknown>);
  return {
    logger: {
      ...base,
      serializers: {
        // Method and masked URL only: headers carry JWTs and API keys.
        req: (req: { method?: string; url?: string }) => ({ method: req.method, url: maskTokens(req.url ?? '') }),
      },
    },
  };
}

/**
 * The peers that are our reverse proxies, and so carry many clients' connections: the per-address
 * socket cap does not apply to them. With the deprecated --ratelimit-trust-forwarded-for no peer is
 * named, but the setting says every peer is a proxy.
 */
function proxyPeers(settings: RateLimitSettings): (ip: string) => boolean {
  const listed = settings.trustedProxies ?? [];
  if (listed.length > 0) {
    const proxies = trustedProxies(listed);
    return (ip) => proxies.has(ip);
  }
  return () => settings.trustForwardedFor;
}

export function buildApp(deps: AppDeps): FastifyInstance {
  const clock = deps.clock ?? systemClock;
  const app = Fastify({
    ...loggerOptions(deps.logger),
    bodyLimit: deps.bodyLimit ?? DEFAULT_BODY_LIMIT,
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    // Schemas are contracts: no coercion ("300" is not a validity), no silent stripping of unknown fields.
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, useDefaults: false, allErrors: false } },
    routerOptions: { maxParamLength: 200 },
    // HEAD only where it is cheap and useful (parameters, health): a HEAD on a key route would
    // derive a key just to throw it away.
    exposeHeadRoutes: false,
    return503OnClosing: true,
    // Over-long path segments and undecodable URLs: our envelope, not Fastify's own body.
    frameworkErrors: frameworkErrorHandler,
    serverFactory: limitedServerFactory(
      { ...DEFAULT_CONNECTION_LIMITS, ...deps.connections },
      { exemptFromAddressCap: proxyPeers(deps.rateLimit.settings) },
    ),
    clientErrorHandler,
  });
  // JSON only: a text/plain body is not a request we understand (415, not a schema error).
  app.removeContentTypeParser('text/plain');

  const idp = new IdentityServerClient(deps.identityServer);
  // One client key for the limiter and the stream caps, and one set of streams for all three prefixes.
  const clientKeyOf = clientKeyResolver(deps.rateLimit.settings);
  const streams = new StatusStreams((token, signal) => idp.statusEvents(token, signal), deps.statusStreams);
  // Closing the server ends the streams instead of waiting for their sessions to end.
  app.addHook('preClose', async () => streams.closeAll());
  const verifier = new ResultJwtVerifier({ fetchPublicKey: () => idp.publicKeyPem(), clock, issuer: deps.jwtIssuer });
  const metrics = deps.metrics ?? createMetrics({ processMetrics: deps.processMetrics ?? true });
  const builtAt = new Date(clock.now() * 1000);
  const refuseDemoSchemes = deps.refuseDemoSchemes ?? false;

  app.setErrorHandler(errorHandler);
  app.setNotFoundHandler(notFoundHandler);
  app.decorateRequest('pkgErrorCode', null);
  // Before the limiter, so that its refusals of audited routes are recorded too.
  auditRequests(app, deps.apiKeys, clientAddressResolver(deps.rateLimit.settings));

  app.register(cors, corsOptions(deps.allowedOrigins));
  app.register(rateLimitPlugin, { ...deps.rateLimit, clientKeyOf });

  const deprecation = `@${IRMA_ALIAS_DEPRECATED.getTime() / 1000}`;
  const sunset = IRMA_ALIAS_SUNSET.toUTCString();
  app.addHook('onSend', async (request, reply) => {
    const route = request.routeOptions.url;
    if (route === undefined || !route.startsWith('/v2/irma/')) return;
    const successor = (request.url.split('?', 1)[0] ?? '').replace(/^\/v2\/irma\//, '/v2/request/');
    reply
      .header('deprecation', deprecation)
      .header('sunset', sunset)
      .header('link', `<${successor}>; rel="successor-version"`);
  });

  app.addHook('onResponse', async (request, reply) => {
    const path = request.url;
    // 429s are not counted: pg-pkg's limiter sits outside its metrics layer.
    if ((path === '/v2' || path.startsWith('/v2/')) && reply.statusCode !== 429) {
      const header = request.headers[CLIENT_HEADER];
      metrics.countRequest(request.routeOptions.url, typeof header === 'string' ? header : undefined, reply.statusCode);
    }
  });

  if (deps.apiKeys !== undefined) {
    const store = deps.apiKeys;
    // With a database configured, a PKG that cannot reach it does not start.
    app.addHook('onReady', async () => {
      await store.ping();
    });
  }

  const keySet = deps.keySet ?? oneKeySet(deps.keys);
  const primaries = primaryKeys(keySet);
  app.register(opsRoutes, { metrics });
  app.register(parametersRoutes, {
    mpk: primaries.mpk,
    vk: primaries.vk,
    ibeKeys: publishedEntries(keySet.ibe),
    ibsKeys: publishedEntries(keySet.ibs),
    mpkModified: deps.keysModified?.mpk ?? builtAt,
    vkModified: deps.keysModified?.vk ?? builtAt,
  });
  for (const prefix of IDENTITY_PREFIXES) {
    app.register(sessionRoutes, { prefix, idp, streams, clientKeyOf, refuseDemoSchemes });
    app.register(keyRoutes, {
      prefix,
      msk: primaries.msk,
      sk: primaries.sk,
      ibeKeys: keySet.ibe,
      verifier,
      apiKeys: deps.apiKeys,
      clock,
      metrics,
      refuseDemoSchemes,
      budgets: deps.rateLimit.store,
    });
  }
  if (deps.apiKeys !== undefined) app.register(apiKeyRoutes, { apiKeys: deps.apiKeys });

  return app;
}
