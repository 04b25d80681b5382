import cluster from 'node:cluster';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { AggregatorRegistry } from 'prom-client';
import type { PkgKeys } from 'postguard-ts/keys';
import type { PkgKeyPaths } from './keyfiles.js';
import { primaryKeys, KeySetError, type KeySet } from './keyset.js';
import { loadKeySet } from './keyset-file.js';
import { isPostGuardError } from 'postguard-ts';
import { buildApp } from './app.js';
import { ConfigError, type ServerConfig } from './config.js';
import { createApiKeyStore, type ApiKeyStore } from './db.js';
import { createMetrics, processMetricsRegistry, type PkgMetrics } from './metrics.js';
import {
  installClusterBucketServer,
  memoryBucketStore,
  processBucketStore,
  type BucketStore,
} from './ratelimit/index.js';

/**
 * Running `pg-pkg server`: load and check the keys, connect what is configured, listen, and shut down
 * gracefully on SIGINT/SIGTERM. With `--workers N` (N > 1) the process becomes a node:cluster primary
 * that checks the configuration once, forks N workers that share the port, keeps one set of rate-limit
 * buckets for all of them (unless Redis holds them) and aggregates their metrics for /metrics.
 */

const SHUTDOWN_GRACE_MS = 5000;

export interface LoadedKeys {
  /** The primaries (what seals and signs). */
  keys: PkgKeys;
  keySet: KeySet;
  modified: { mpk: Date; vk: Date };
}

const FILE_FLAGS: ReadonlyArray<[keyof PkgKeyPaths, string, string]> = [
  ['ibeSecret', '--ibe-secret-path', 'IBE secret key file'],
  ['ibePublic', '--ibe-public-path', 'IBE public key file'],
  ['ibsSecret', '--ibs-secret-path', 'IBS secret key file'],
  ['ibsPublic', '--ibs-public-path', 'IBS public key file'],
];

/**
 * The key set (server/keyset-file.ts: the key-set file, else the four key files), checked; a missing or
 * bad file is a ConfigError naming its flag.
 */
export async function loadKeys(paths: PkgKeyPaths, keySetPath: string): Promise<LoadedKeys> {
  try {
    const { set, modified } = await loadKeySet(keySetPath, paths);
    return { keys: primaryKeys(set), keySet: set, modified };
  } catch (e) {
    if (e instanceof KeySetError) throw new ConfigError('--key-set / PKG_KEY_SET', `${keySetPath}: ${e.message}`);
    const errno = e as NodeJS.ErrnoException;
    if (errno.path === keySetPath)
      throw new ConfigError('--key-set / PKG_KEY_SET', `cannot read ${keySetPath} (${errno.code})`);
    if (typeof errno.path === 'string') {
      const flag = FILE_FLAGS.find(([name]) => paths[name] === errno.path)?.[1] ?? 'key files';
      const reason =
        errno.code === 'ENOENT' ? 'no such file (run "pg-pkg gen" first)' : `cannot read ${errno.path} (${errno.code})`;
      throw new ConfigError(flag, reason);
    }
    if (isPostGuardError(e)) {
      const flag = FILE_FLAGS.find(([, , label]) => e.message.startsWith(label))?.[1] ?? 'key files';
      throw new ConfigError(flag, e.message);
    }
    throw e;
  }
}

/** A startup failure that is not a configuration error (exit code 1). */
export class StartupError extends Error {
  override readonly name = 'StartupError';
}

export interface RunningServer {
  app: FastifyInstance;
  url: string;
  close(): Promise<void>;
}

type Log = Pick<FastifyBaseLogger, 'warn' | 'info' | 'error'>;

/** A logger that forwards to one created later (the app's), so stores built before it can log. */
function lateLogger(): { log: Log; attach(target: Log): void } {
  let target: Log | undefined;
  const forward =
    (level: keyof Log) =>
    (...args: unknown[]): void => {
      (target?.[level] as ((...a: unknown[]) => void) | undefined)?.(...args);
    };
  return {
    log: { warn: forward('warn'), info: forward('info'), error: forward('error') },
    attach: (t) => void (target = t),
  };
}

function displayHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

interface ServeOptions {
  /** In a cluster worker: the metrics text comes from the primary's aggregate. */
  metrics?: PkgMetrics;
  store?: BucketStore;
}

/** Builds and starts one PKG in this process. */
export async function serve(config: ServerConfig, options: ServeOptions = {}): Promise<RunningServer> {
  const { keys, keySet, modified } = await loadKeys(config.keyPaths, config.keySetPath);
  const late = lateLogger();
  const metrics = options.metrics ?? createMetrics({ processMetrics: true });
  const store =
    options.store ??
    processBucketStore({
      redisUrl: config.redisUrl,
      redisFailure: config.redisFailure,
      redisTimeoutMs: config.redisTimeoutMs,
      onRedisUnavailable: (action) => metrics.countRedisUnavailable(action),
      logger: late.log,
    });
  let apiKeys: ApiKeyStore | undefined;
  if (config.databaseUrl !== undefined) {
    apiKeys = createApiKeyStore(config.databaseUrl, { emailAttribute: config.emailAttribute, logger: late.log });
  }
  const app = buildApp({
    keys,
    keySet,
    keysModified: modified,
    identityServer: config.identityServer,
    apiKeys,
    rateLimit: { settings: config.rateLimit, store },
    allowedOrigins: config.allowedOrigins,
    connections: config.connections,
    statusStreams: config.statusStreams,
    jwtIssuer: config.jwtIssuer,
    refuseDemoSchemes: config.refuseDemoSchemes,
    logger: { level: config.logLevel },
    metrics,
  });
  late.attach(app.log);

  const releaseStores = async (): Promise<void> => {
    await Promise.allSettled([store.close(), apiKeys?.close()]);
  };

  if (config.allowedOrigins.includes('*')) {
    app.log.warn('CORS allows any origin (PKG_ALLOWED_ORIGINS=*); set an explicit list of origins in production');
  } else {
    app.log.info(`CORS allows ${config.allowedOrigins.join(', ')}`);
  }
  app.log.info(
    `identity server ${config.identityServer.url}${config.identityServer.token === undefined ? '' : ' (with requestor token)'}`,
  );
  app.log.info(apiKeys === undefined ? 'no database: API keys are disabled' : 'API keys enabled');
  if (config.refuseDemoSchemes) app.log.info('demo-scheme attributes (irma-demo) are refused');
  if (config.rateLimit.trustForwardedFor) {
    app.log.warn(
      '--ratelimit-trust-forwarded-for is deprecated: it believes X-Forwarded-For from anyone who reaches the PKG; ' +
        'set --trusted-proxies to the addresses of your reverse proxies instead',
    );
  }

  try {
    await app.listen({ host: config.host, port: config.port });
  } catch (e) {
    await app.close().catch(() => undefined);
    await releaseStores();
    const error = e as NodeJS.ErrnoException;
    if (error.name === 'DatabaseUnavailableError')
      throw new StartupError(`cannot reach the API-key database: ${error.message}`);
    if (error.code === 'EADDRINUSE') throw new StartupError(`port ${config.port} on ${config.host} is in use`);
    if (error.code === 'EADDRNOTAVAIL' || error.code === 'ENOTFOUND')
      throw new StartupError(`cannot bind ${config.host}`);
    throw e;
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : config.port;
  const url = `http://${displayHost(config.host)}:${port}`;

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      // Requests in flight get a grace period; then whatever is left (idle sockets, slow clients) is cut.
      const timer = setTimeout(() => app.server.closeAllConnections(), SHUTDOWN_GRACE_MS);
      timer.unref();
      await app.close();
      clearTimeout(timer);
      await releaseStores();
    })();
    return closing;
  };
  return { app, url, close };
}

// ---------------------------------------------------------------------------------------------
// Cluster

const METRICS_REQUEST = 'pg-pkg/metrics-request';
const METRICS_REPLY = 'pg-pkg/metrics-reply';

interface MetricsRequest {
  protocol: typeof METRICS_REQUEST;
  id: number;
}
interface MetricsReply {
  protocol: typeof METRICS_REPLY;
  id: number;
  text?: string;
  error?: string;
}

/** A worker's metrics: counted locally, reported as the aggregate of all workers (asked of the primary). */
function workerMetrics(): PkgMetrics {
  const local = createMetrics({ processMetrics: true });
  AggregatorRegistry.setRegistries([local.registry, processMetricsRegistry()]);
  // Constructing one installs prom-client's listener that answers the primary's collection requests.
  new AggregatorRegistry();
  let next = 0;
  const pending = new Map<number, (reply: MetricsReply) => void>();
  process.on('message', (message: unknown) => {
    const reply = message as MetricsReply;
    if (reply?.protocol !== METRICS_REPLY) return;
    pending.get(reply.id)?.(reply);
    pending.delete(reply.id);
  });
  return {
    ...local,
    text: () =>
      new Promise<string>((resolve, reject) => {
        const id = next++;
        const timer = setTimeout(() => {
          pending.delete(id);
          reject(new Error('the primary did not send the aggregated metrics in time'));
        }, 6000);
        pending.set(id, (reply) => {
          clearTimeout(timer);
          if (reply.text !== undefined) resolve(reply.text);
          else reject(new Error(reply.error ?? 'metrics aggregation failed'));
        });
        process.send?.({ protocol: METRICS_REQUEST, id } satisfies MetricsRequest);
      }),
  };
}

function installMetricsAggregator(): void {
  const aggregator = new AggregatorRegistry();
  cluster.on('message', (worker, message: unknown) => {
    const request = message as MetricsRequest;
    if (request?.protocol !== METRICS_REQUEST) return;
    aggregator.clusterMetrics().then(
      (text) => worker.send({ protocol: METRICS_REPLY, id: request.id, text } satisfies MetricsReply),
      (error: Error) =>
        worker.send({ protocol: METRICS_REPLY, id: request.id, error: error.message } satisfies MetricsReply),
    );
  });
}

export interface Io {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
}

/**
 * The cluster primary: checks what can be checked once (keys, database), forks the workers, restarts
 * a worker that dies (unless that happens over and over), and stops them all on SIGINT/SIGTERM.
 * Resolves with the exit code once the cluster is down.
 */
export async function runPrimary(config: ServerConfig, io: Io): Promise<number> {
  await loadKeys(config.keyPaths, config.keySetPath);
  if (config.databaseUrl !== undefined) {
    const store = createApiKeyStore(config.databaseUrl, { emailAttribute: config.emailAttribute });
    try {
      await store.ping();
    } catch (e) {
      throw new StartupError(`cannot reach the API-key database: ${(e as Error).message}`);
    } finally {
      await store.close();
    }
  }
  if (config.redisUrl === undefined) installClusterBucketServer(cluster, memoryBucketStore());
  installMetricsAggregator();

  return new Promise<number>((resolve) => {
    let listening = 0;
    let stopping = false;
    const restarts: number[] = [];
    const stop = (code: number): void => {
      if (stopping) return;
      stopping = true;
      const workers = Object.values(cluster.workers ?? {});
      if (workers.length === 0) return resolve(code);
      let left = workers.length;
      const force = setTimeout(() => workers.forEach((w) => w?.process.kill('SIGKILL')), SHUTDOWN_GRACE_MS + 2000);
      for (const worker of workers) {
        worker?.once('exit', () => {
          if (--left === 0) {
            clearTimeout(force);
            resolve(code);
          }
        });
        worker?.process.kill('SIGTERM');
      }
    };
    const fork = (): void => {
      const worker = cluster.fork();
      worker.once('listening', (address) => {
        if (++listening === config.workers) {
          const port = typeof address.port === 'number' ? address.port : config.port;
          io.stdout.write(
            `pg-pkg listening on http://${displayHost(config.host)}:${port} (${config.workers} workers)\n`,
          );
        }
      });
    };
    cluster.on('exit', (worker, code, signal) => {
      if (stopping) return;
      if (listening < config.workers) {
        // A worker that cannot start will not start on a retry either.
        io.stderr.write(`pg-pkg: a worker failed to start (exit ${code ?? signal})\n`);
        stop(1);
        return;
      }
      const now = Date.now();
      restarts.push(now);
      while (restarts.length > 0 && restarts[0]! < now - 60_000) restarts.shift();
      if (restarts.length > 5) {
        io.stderr.write('pg-pkg: workers keep dying; giving up\n');
        stop(1);
        return;
      }
      io.stderr.write(`pg-pkg: worker ${worker.id} died (${code ?? signal}); starting another\n`);
      listening--;
      fork();
    });
    process.once('SIGINT', () => stop(0));
    process.once('SIGTERM', () => stop(0));
    for (let i = 0; i < config.workers; i++) fork();
  });
}

/** A cluster worker: one PKG, rate limits through the primary (or Redis), metrics aggregated. */
export async function runWorker(config: ServerConfig): Promise<RunningServer> {
  const server = await serve(config, { metrics: workerMetrics() });
  const stop = (): void => {
    server.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', stop);
  // The terminal's Ctrl-C reaches every process of the group; the primary decides, workers just stop.
  process.once('SIGINT', stop);
  return server;
}
