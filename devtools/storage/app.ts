import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import cors from '@fastify/cors';
import Fastify from 'fastify';
import type { FastifyInstance } from 'fastify';
import type { StorageContext } from './context.js';
import { Faults } from './faults.js';
import { Outbox } from './outbox.js';
import { fetchVerifyingKey } from './pkg.js';
import { GENERIC_INTERNAL_ERROR, sendText } from './replies.js';
import { downloadRoutes } from './routes/download.js';
import { limitsRoutes } from './routes/limits.js';
import { standinRoutes } from './routes/standin.js';
import { uploadRoutes } from './routes/upload.js';
import { SessionStore } from './sessions.js';
import { resolveSettings, type StorageOptions } from './settings.js';
import { UsageLedger } from './usage.js';

export type { StorageOptions } from './settings.js';
export type { OutboxMail } from './outbox.js';

/**
 * A stand-in for Cryptify, PostGuard's file store, for development and tests: the upload
 * protocol with Cryptify's checks, limits and statuses, files streamed to a data directory, and
 * notification e-mails recorded in an outbox (GET /standin/outbox) instead of sent.
 */

/** UUIDs in a URL are capabilities (anyone holding one can download): never log them. */
export const maskIds = (url: string): string => url.replace(/[0-9a-f]{8}-[0-9a-f-]{27}/gi, '[uuid]');

function loggerSettings(logger: StorageOptions['logger']): boolean | Record<string, unknown> {
  if (logger === undefined || logger === false) return false;
  const base = logger === true ? {} : logger;
  return {
    ...base,
    serializers: {
      ...((base.serializers ?? {}) as Record<string, unknown>),
      req: (req: { method?: string; url?: string }) => ({ method: req.method, url: maskIds(req.url ?? '') }),
    },
  };
}

/** Cryptify's CORS request headers, finalize's proof of possession among them (a browser could not send it otherwise). */
const ALLOWED_HEADERS = [
  'Authorization',
  'Content-Type',
  'Content-Range',
  'CryptifyToken',
  'Range',
  'X-Cryptify-Source',
  'X-Recovery-Token',
  'X-POSTGUARD-CLIENT-VERSION',
  'X-PostGuard-Proof',
];

/**
 * Cryptify exposes only the token, so a cross-origin page sees a download's status and
 * Content-Length but not its Content-Range. Outside strict mode the range headers are exposed
 * too, a convenience for development that a client must not come to rely on.
 */
const exposedHeaders = (strict: boolean): string[] =>
  strict ? ['cryptifytoken'] : ['cryptifytoken', 'content-range', 'accept-ranges'];

export function buildStorage(options: StorageOptions = {}): FastifyInstance {
  const settings = resolveSettings(options);
  let ownedDir: string | undefined;
  let dataDir = settings.dataDir;
  if (dataDir === undefined) {
    ownedDir = mkdtempSync(join(tmpdir(), 'pg-storage-'));
    dataDir = ownedDir;
  } else {
    mkdirSync(dataDir, { recursive: true });
  }

  const ctx: StorageContext = {
    settings,
    store: new SessionStore(settings.clock, settings.sessionTtlSeconds, {
      unfinalizedTtlSeconds: settings.unfinalizedTtlSeconds,
      maxUnfinalized: settings.maxUnfinalizedUploads,
      // An upload that can no longer be finished leaves no partial file behind.
      onExpired: (uuid) => void rm(join(ctx.dataDir, uuid), { force: true }).catch(() => undefined),
    }),
    usage: new UsageLedger(settings.rollingWindowSeconds),
    outbox: new Outbox(settings.publicUrl),
    faults: new Faults(),
    dataDir,
    verifyingKey: settings.verifyingKey,
  };

  const app = Fastify({
    logger: loggerSettings(options.logger),
    routerOptions: { maxParamLength: 256 },
    // Unknown or mistyped fields in the stand-in's own JSON are errors, not silently dropped or coerced.
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false } },
  });

  app.register(cors, {
    origin: settings.allowedOrigins === true ? true : settings.allowedOrigins,
    methods: ['GET', 'POST', 'PUT', 'DELETE'],
    allowedHeaders: ALLOWED_HEADERS,
    exposedHeaders: exposedHeaders(settings.strict),
    maxAge: 86_400,
  });

  app.setErrorHandler((error, request, reply) => {
    const status = (error as { statusCode?: number }).statusCode ?? 500;
    if (status >= 400 && status < 500) return sendText(reply, status, (error as Error).message);
    request.log.error({ err: error }, 'unexpected failure');
    return sendText(reply, 500, GENERIC_INTERNAL_ERROR);
  });
  app.setNotFoundHandler((_request, reply) => sendText(reply, 404));

  app.register(async () => {
    if (ctx.verifyingKey === undefined && settings.pkgUrl !== undefined) {
      ctx.verifyingKey = await fetchVerifyingKey(settings.pkgUrl, settings.pkgStartupTimeoutMs);
    }
  });
  app.get('/health', async (_request, reply) => sendText(reply, 200, 'OK'));
  app.register(async (scope) => limitsRoutes(scope, ctx));
  app.register(async (scope) => uploadRoutes(scope, ctx));
  app.register(async (scope) => downloadRoutes(scope, ctx));
  if (settings.knobs) app.register(async (scope) => standinRoutes(scope, ctx), { prefix: '/standin' });

  let sweeper: NodeJS.Timeout | undefined;
  app.addHook('onReady', async () => {
    if (settings.sweepIntervalMs > 0) {
      sweeper = setInterval(() => ctx.store.sweep(), settings.sweepIntervalMs);
      sweeper.unref();
    }
  });
  // Hung chunk requests would keep the server from closing.
  app.addHook('preClose', async () => ctx.faults.release());
  app.addHook('onClose', async () => {
    if (sweeper !== undefined) clearInterval(sweeper);
    if (ownedDir !== undefined) rmSync(ownedDir, { recursive: true, force: true });
  });

  dataDirs.set(app, dataDir);
  return app;
}

const dataDirs = new WeakMap<FastifyInstance, string>();

/** The directory uploads go to (for tests that look at the files). */
export function storageDataDir(app: FastifyInstance): string {
  const dir = dataDirs.get(app);
  if (dir === undefined) throw new Error('not a storage app');
  return dir;
}
