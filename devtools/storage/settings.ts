import type { Clock } from './sessions.js';
import { systemClock } from './sessions.js';

/** Options of `buildStorage`. Every field is optional; the defaults are Cryptify's. */
export interface StorageOptions {
  /** Where uploads are stored, one file per UUID. Default: a fresh temporary directory, removed on close. */
  dataDir?: string;
  /** Largest chunk a PUT may carry, in bytes. 5 000 000. */
  chunkSize?: number;
  /** Largest upload without a validated API key. 5 000 000 000. */
  perUploadLimit?: number;
  /** Bytes one sender may finalize within the rolling window, without an API key. 5 000 000 000. */
  rollingLimit?: number;
  /** The same two limits for uploads whose init carried a validated API key. 100 000 000 000 each. */
  apiKeyPerUploadLimit?: number;
  apiKeyRollingLimit?: number;
  /** The rolling window in seconds. 14 days. */
  rollingWindowSeconds?: number;
  /** Seconds without activity after which an upload session is forgotten. 3600. */
  sessionTtlSeconds?: number;
  /** Seconds from init within which an upload must be finalized, else it and its file are dropped. 86 400. */
  unfinalizedTtlSeconds?: number;
  /** Unfinalized uploads held at once; init beyond answers 503. 1000. */
  maxUnfinalizedUploads?: number;
  /** Time source in Unix seconds. Default the system clock. */
  clock?: Clock;
  /** The PKG's verifying key (base64): finalize then checks the header signature, as Cryptify does. */
  verifyingKey?: string;
  /**
   * The PKG. Without `verifyingKey`, the key is fetched from `{pkgUrl}/v2/sign/parameters` when the
   * server starts; `Bearer PG-…` keys sent to init are checked at `{pkgUrl}/v2/api-key/validate`.
   */
  pkgUrl?: string;
  /** How long start-up keeps trying to fetch the verifying key. 30 000 ms. */
  pkgStartupTimeoutMs?: number;
  /** The attribute type that carries the sender's e-mail. `pbdf.sidn-pbdf.email.email`. */
  emailAttribute?: string;
  /**
   * Where the links in notification mails lead. `https://postguard.eu`. An origin gives Cryptify's
   * `<origin>/download?uuid=…&recipient=…`; a page (a URL with a path, e.g. an app's
   * `…/receive.html`) gets `?uuid=…&recipient=…` itself. A function is asked at each finalize (pg-dev
   * links to this server's own /standin/receive page, whose port it learns only once it listens).
   */
  publicUrl?: string | (() => string);
  /** CORS origins: `true` for any (default), or a pattern the whole Origin must match. */
  allowedOrigins?: true | RegExp;
  /** Serve the stand-in's own routes under /standin (outbox, fault injection). Default true. */
  knobs?: boolean;
  /**
   * Behave like Cryptify's current release where the stand-in is otherwise kinder to developers:
   * CORS exposes only `cryptifytoken` (a cross-origin page cannot read Content-Range), and a
   * rolling-window 413 does not reveal the sender's usage. Default false; `pg-dev` runs strict.
   */
  strict?: boolean;
  /** Milliseconds between sweeps of idle sessions; 0 disables (they are still dropped on access). 60 000. */
  sweepIntervalMs?: number;
  /** Fastify/pino logger settings. Default false. Tokens and upload UUIDs are never logged. */
  logger?: boolean | Record<string, unknown>;
}

export interface StorageSettings {
  dataDir: string | undefined;
  chunkSize: number;
  perUploadLimit: number;
  rollingLimit: number;
  apiKeyPerUploadLimit: number;
  apiKeyRollingLimit: number;
  rollingWindowSeconds: number;
  sessionTtlSeconds: number;
  unfinalizedTtlSeconds: number;
  maxUnfinalizedUploads: number;
  clock: Clock;
  verifyingKey: string | undefined;
  pkgUrl: string | undefined;
  pkgStartupTimeoutMs: number;
  emailAttribute: string;
  publicUrl: string | (() => string);
  allowedOrigins: true | RegExp;
  knobs: boolean;
  strict: boolean;
  sweepIntervalMs: number;
}

export const DEFAULT_EMAIL_ATTRIBUTE = 'pbdf.sidn-pbdf.email.email';

function positiveInteger(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value <= 0)
    throw new RangeError(`storage option ${name} must be a positive integer`);
  return value;
}

function nonNegative(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value < 0)
    throw new RangeError(`storage option ${name} must be a non-negative number`);
  return value;
}

function httpUrl(name: string, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new RangeError(`storage option ${name} must be an absolute http(s) URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new RangeError(`storage option ${name} must be an absolute http(s) URL`);
  }
  return value.replace(/(?<!\/)\/+$/, '');
}

export function resolveSettings(options: StorageOptions): StorageSettings {
  if (options.emailAttribute !== undefined && options.emailAttribute === '') {
    throw new RangeError('storage option emailAttribute must not be empty');
  }
  return {
    dataDir: options.dataDir,
    chunkSize: positiveInteger('chunkSize', options.chunkSize, 5_000_000),
    perUploadLimit: positiveInteger('perUploadLimit', options.perUploadLimit, 5_000_000_000),
    rollingLimit: positiveInteger('rollingLimit', options.rollingLimit, 5_000_000_000),
    apiKeyPerUploadLimit: positiveInteger('apiKeyPerUploadLimit', options.apiKeyPerUploadLimit, 100_000_000_000),
    apiKeyRollingLimit: positiveInteger('apiKeyRollingLimit', options.apiKeyRollingLimit, 100_000_000_000),
    rollingWindowSeconds: positiveInteger('rollingWindowSeconds', options.rollingWindowSeconds, 14 * 24 * 3600),
    sessionTtlSeconds: nonNegative('sessionTtlSeconds', options.sessionTtlSeconds, 3600),
    unfinalizedTtlSeconds: positiveInteger('unfinalizedTtlSeconds', options.unfinalizedTtlSeconds, 86_400),
    maxUnfinalizedUploads: positiveInteger('maxUnfinalizedUploads', options.maxUnfinalizedUploads, 1000),
    clock: options.clock ?? systemClock,
    verifyingKey: options.verifyingKey,
    pkgUrl: httpUrl('pkgUrl', options.pkgUrl),
    pkgStartupTimeoutMs: nonNegative('pkgStartupTimeoutMs', options.pkgStartupTimeoutMs, 30_000),
    emailAttribute: options.emailAttribute ?? DEFAULT_EMAIL_ATTRIBUTE,
    publicUrl:
      typeof options.publicUrl === 'function'
        ? options.publicUrl
        : (httpUrl('publicUrl', options.publicUrl) ?? 'https://postguard.eu'),
    allowedOrigins: options.allowedOrigins ?? true,
    knobs: options.knobs ?? true,
    strict: options.strict ?? false,
    sweepIntervalMs: nonNegative('sweepIntervalMs', options.sweepIntervalMs, 60_000),
  };
}
