import cors from '@fastify/cors';
import Fastify from 'fastify';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { YiviError, sendYiviError } from './errors.js';
import { keyFromPem, loadOrCreateKey } from './key.js';
import type { JwtKey } from './key.js';
import { MAX_VERSION_HEADER, MIN_VERSION_HEADER } from './protocol.js';
import { clientRoutes } from './routes/client.js';
import { knobRoutes } from './routes/knobs.js';
import { requestorRoutes } from './routes/requestor.js';
import { walletPageRoutes } from './routes/wallet-page.js';
import { SessionStore } from './sessions.js';
import { resolveSettings } from './settings.js';
import type { StandinOptions, StandinSettings } from './settings.js';
import { SseStreams } from './sse.js';

export type { StandinOptions } from './settings.js';

/**
 * A local stand-in for the Yivi (IRMA) server: the requestor API the PKG drives, the wallet and
 * frontend endpoints a phone and a browser use, and (under /standin) a simulated-wallet page and
 * test knobs. The PKG cannot tell it from `irma server` except that wallets send simulated
 * disclosures instead of Idemix proofs.
 */

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Which Yivi error a malformed body on this route becomes (irmago: requestor side vs wallet side). */
    badInput?: 'INVALID_REQUEST' | 'MALFORMED_INPUT';
  }
}

/** Any run of 20 alphanumerics in a URL is (or looks like) a session token: never log it. */
export const maskTokens = (url: string): string => url.replace(/[A-Z0-9]{20,}/gi, '[token]');

function loggerSettings(logger: StandinOptions['logger']): boolean | Record<string, unknown> {
  if (logger === undefined || logger === false) return false;
  const base = logger === true ? {} : logger;
  const serializers = (base.serializers ?? {}) as Record<string, unknown>;
  return {
    ...base,
    serializers: {
      ...serializers,
      // Only method and a masked URL: no headers (Authorization carries requestor and client tokens).
      req: (req: { method?: string; url?: string }) => ({ method: req.method, url: maskTokens(req.url ?? '') }),
    },
  };
}

function errorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  if (error instanceof YiviError) return sendYiviError(reply, error);
  const badInput = request.routeOptions.config.badInput ?? 'INVALID_REQUEST';
  if (error.validation !== undefined) return sendYiviError(reply, new YiviError(badInput, error.message));
  if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    return sendYiviError(reply, new YiviError(badInput, 'http: request body too large'));
  }
  const status = error.statusCode ?? 500;
  if (status >= 400 && status < 500) return sendYiviError(reply, new YiviError(badInput, error.message));
  request.log.error({ err: error }, 'unexpected failure');
  return sendYiviError(reply, new YiviError('INTERNAL_ERROR'));
}

function notFound(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  // The wallet router answers in Yivi's JSON; the requestor router with Go's plain text.
  if (request.url.startsWith('/irma/')) return sendYiviError(reply, { status: 404, error: 'INVALID_REQUEST' });
  return reply.code(404).type('text/plain; charset=utf-8').send('404 page not found\n');
}

async function loadKey(settings: StandinSettings): Promise<JwtKey> {
  if (settings.privateKeyPem !== undefined) return keyFromPem(settings.privateKeyPem, 'privateKeyPem');
  return loadOrCreateKey(settings.keyPath);
}

export function buildStandin(options: StandinOptions = {}): FastifyInstance {
  const settings = resolveSettings(options);
  const app = Fastify({
    logger: loggerSettings(options.logger),
    bodyLimit: settings.bodyLimit,
    // The wallet calls `{u}/` with a slash; a PKG configured with a trailing slash calls `//session/…`.
    routerOptions: { ignoreTrailingSlash: true, ignoreDuplicateSlashes: true },
    // Yivi's Go decoder never coerces: "300" is not a validity, and a string is not an array.
    ajv: { customOptions: { coerceTypes: false } },
  });

  const store = new SessionStore(settings.clock, settings.limits);
  const streams = new SseStreams({ enabled: settings.sse, openDelayMs: settings.sseOpenDelayMs });

  app.register(cors, {
    origin: '*',
    methods: ['GET', 'POST', 'DELETE'],
    // Yivi's list, plus the wallet headers so a browser page can play the wallet (real wallets are apps).
    allowedHeaders: [
      'Accept',
      'Authorization',
      'Content-Type',
      'Cache-Control',
      MIN_VERSION_HEADER,
      MAX_VERSION_HEADER,
    ],
  });
  app.setErrorHandler(errorHandler);
  app.setNotFoundHandler(notFound);

  app.register(async (scope) => {
    const key = await loadKey(settings);
    await scope.register(requestorRoutes, { store, streams, key, settings });
    await scope.register(clientRoutes, { prefix: '/irma', store, streams, settings });
    if (settings.knobs) {
      await scope.register(knobRoutes, { prefix: '/standin', store, settings });
      await scope.register(walletPageRoutes, { prefix: '/standin', store });
    }
  });

  let sweeper: NodeJS.Timeout | undefined;
  app.addHook('onReady', async () => {
    if (settings.sweepIntervalMs > 0) {
      sweeper = setInterval(() => store.sweep(), settings.sweepIntervalMs);
      sweeper.unref();
    }
  });
  // Open event streams would otherwise keep close() waiting.
  app.addHook('preClose', async () => {
    if (sweeper !== undefined) clearInterval(sweeper);
    streams.closeAll();
  });

  return app;
}
