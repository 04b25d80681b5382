import { Counter, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * Prometheus metrics. The family clients and dashboards know is pg-pkg's `postguard_clients`
 * counter, with the newest pg-pkg's bounded label set (server/README.md, Metrics): every /v2 request is
 * counted by matched route pattern, the client's host and client name (allow-listed, else "other"),
 * its version (sanitised, at most 64 distinct values per client) and the status. Requests the rate
 * limiter refused are not counted, as in pg-pkg. Beside it: keys issued, and Node's process metrics.
 */

export const CLIENT_HEADER = 'x-postguard-client-version';

const HOSTS: ReadonlySet<string> = new Set([
  'node',
  'browser',
  'bun',
  'deno',
  'Outlook',
  'Thunderbird',
  'dotnet',
  'unknown',
]);
const CLIENTS: ReadonlySet<string> = new Set(['pg-js', 'pg-dotnet', 'pg4ol', 'pg4tb', 'cli', 'pg-cli', 'unknown']);
const MAX_VERSIONS_PER_CLIENT = 64;
const VERSION = /^[A-Z0-9.-]{1,32}$/i;

export interface ClientLabels {
  host: string;
  client: string;
  client_version: string;
}

/**
 * Bounded labels from the `X-POSTGUARD-CLIENT-VERSION` header (`host,host_version,client,client_version`).
 * `versions` remembers which versions each client has used, so the label set cannot grow without bound.
 */
export function clientLabels(header: string | undefined, versions: Map<string, Set<string>>): ClientLabels {
  const fields = header?.split(',').map((f) => f.trim());
  if (fields?.length !== 4) return { host: 'unknown', client: 'unknown', client_version: 'unknown' };
  const [host, , client, version] = fields as [string, string, string, string];
  const hostLabel = HOSTS.has(host) ? host : 'other';
  const clientLabel = CLIENTS.has(client) ? client : 'other';
  let versionLabel = version === 'unknown' || version === 'other' ? version : VERSION.test(version) ? version : 'other';
  if (versionLabel !== 'unknown' && versionLabel !== 'other') {
    let seen = versions.get(clientLabel);
    if (seen === undefined) versions.set(clientLabel, (seen = new Set()));
    if (!seen.has(versionLabel)) {
      if (seen.size >= MAX_VERSIONS_PER_CLIENT) versionLabel = 'other';
      else seen.add(versionLabel);
    }
  }
  return { host: hostLabel, client: clientLabel, client_version: versionLabel };
}

export interface PkgMetrics {
  readonly registry: Registry;
  /** Counts one /v2 request. `route` is the matched pattern, undefined when no route matched. */
  countRequest(route: string | undefined, clientHeader: string | undefined, status: number): void;
  /** Counts one issued key. */
  countKey(kind: 'usk' | 'signing'): void;
  /** Counts one rate-limit take answered without Redis: from local buckets, or refused (503). */
  countRedisUnavailable(action: 'local' | 'refused'): void;
  contentType(): string;
  /** The exposition text: this app's metrics, then the process's. */
  text(): Promise<string>;
}

let processRegistry: Registry | undefined;

/** Node's process metrics, collected once per process however many apps it builds. */
export function processMetricsRegistry(): Registry {
  if (processRegistry === undefined) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

export function createMetrics(options: { processMetrics?: boolean } = {}): PkgMetrics {
  const registry = new Registry();
  const clients = new Counter({
    name: 'postguard_clients',
    help: 'Contains information about PostGuard clients connecting with the PKG.',
    labelNames: ['path', 'host', 'client', 'client_version', 'status'] as const,
    registers: [registry],
  });
  const keys = new Counter({
    name: 'postguard_keys_issued_total',
    help: 'Keys issued by the PKG: usk (decryption) and signing.',
    labelNames: ['kind'] as const,
    registers: [registry],
  });
  const redisUnavailable = new Counter({
    name: 'postguard_ratelimit_redis_unavailable_total',
    help: 'Rate-limit checks made while Redis was unavailable: answered from local buckets, or refused with 503.',
    labelNames: ['action'] as const,
    registers: [registry],
  });
  const versions = new Map<string, Set<string>>();
  const extra = options.processMetrics === false ? undefined : processMetricsRegistry();

  return {
    registry,
    countRequest(route, clientHeader, status) {
      clients.inc({ path: route ?? 'unknown', ...clientLabels(clientHeader, versions), status: String(status) });
    },
    countKey(kind) {
      keys.inc({ kind });
    },
    countRedisUnavailable(action) {
      redisUnavailable.inc({ action });
    },
    contentType: () => registry.contentType,
    async text() {
      const own = await registry.metrics();
      return extra === undefined ? own : `${own}\n${await extra.metrics()}`;
    },
  };
}
