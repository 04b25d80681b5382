import type { FastifyRequest } from 'fastify';
import { DEFAULT_JWT_ISSUER } from './jwt.js';
import { resolveKeyPath } from './key.js';
import type { Clock, StoreLimits } from './sessions.js';

/** Options of `buildStandin`. Every field is optional; the defaults are irmago's. */
export interface StandinOptions {
  /**
   * Base URL at which wallets and browsers reach this server. The session pointer becomes
   * `<publicUrl>/irma/session/<clientToken>` (irmago appends `irma/` unless the URL already ends in it).
   * Default: taken from each POST /session request's own Host, which suits loopback tests and local use.
   */
  publicUrl?: string;
  /** Pre-shared requestor token. When set, POST /session needs `Authorization: <token>` (no "Bearer"). */
  requestorToken?: string;
  /** RSA private key (PEM, PKCS#1 or PKCS#8) for result JWTs; takes precedence over `keyPath`. */
  privateKeyPem?: string;
  /** Where the persistent key lives; default $STANDIN_KEY_PATH, else `.keys/standin-jwt.pem` under cwd. */
  keyPath?: string;
  /** Time source in Unix seconds; default the system clock. */
  clock?: Clock;
  /** Seconds of inactivity before a session times out (also the INITIALIZED wait without `timeout`). 900. */
  maxSessionLifetime?: number;
  /** Seconds a finished session stays readable. 300. */
  sessionResultLifetime?: number;
  /** Most live sessions kept at once. 10000. */
  maxSessions?: number;
  /** Most sessions in progress (not finished) at once; beyond, POST /session fails. 1000. */
  maxPendingSessions?: number;
  /** JWT `iss`; '' leaves the claim out, as irmago does. Default "irmaserver". */
  jwtIssuer?: string;
  /** Production mode: requests go to wallets without `devMode: true`. Default false (irmago's dev default). */
  production?: boolean;
  /** Serve statusevents (SSE). When false they answer 500 SSE_DISABLED, like irmago without --sse. Default true. */
  sse?: boolean;
  /** Milliseconds before the SSE `open` event. 200 (irmago). */
  sseOpenDelayMs?: number;
  /** Milliseconds between timeout sweeps (they also push TIMEOUT to SSE listeners); 0 disables. 1000. */
  sweepIntervalMs?: number;
  /** Send `frontendRequest.pairingHint` when irmago would. Set false for automated runs. Default true. */
  pairingHint?: boolean;
  /** Serve the stand-in's own routes under /standin (knobs, session list, wallet page). Default true. */
  knobs?: boolean;
  /** When given, requests naming any other attribute id are refused with 400, as a scheme would. */
  knownAttributes?: readonly string[];
  /** Largest request body in bytes. 1 MiB. */
  bodyLimit?: number;
  /** Fastify/pino logger settings. Default false. URLs are logged with session tokens masked. */
  logger?: boolean | Record<string, unknown>;
}

export interface StandinSettings {
  publicUrl: string | undefined;
  requestorToken: string | undefined;
  privateKeyPem: string | undefined;
  keyPath: string;
  clock: Clock;
  limits: StoreLimits;
  jwtIssuer: string;
  devMode: boolean;
  sse: boolean;
  sseOpenDelayMs: number;
  sweepIntervalMs: number;
  pairingHint: boolean;
  knobs: boolean;
  knownAttributes: ReadonlySet<string> | undefined;
  bodyLimit: number;
}

export const systemClock: Clock = { now: () => Math.floor(Date.now() / 1000) };

function nonNegative(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value < 0) {
    throw new RangeError(`standin option ${name} must be a non-negative number`);
  }
  return value;
}

export function resolveSettings(options: StandinOptions): StandinSettings {
  if (options.requestorToken !== undefined && options.requestorToken === '') {
    throw new RangeError('standin option requestorToken must not be empty (leave it out for no authentication)');
  }
  return {
    publicUrl: options.publicUrl === undefined ? undefined : normalizePublicUrl(options.publicUrl),
    requestorToken: options.requestorToken,
    privateKeyPem: options.privateKeyPem,
    keyPath: resolveKeyPath(options.keyPath),
    clock: options.clock ?? systemClock,
    limits: {
      maxSessionLifetime: nonNegative('maxSessionLifetime', options.maxSessionLifetime, 15 * 60),
      sessionResultLifetime: nonNegative('sessionResultLifetime', options.sessionResultLifetime, 5 * 60),
      maxSessions: nonNegative('maxSessions', options.maxSessions, 10_000),
      maxPendingSessions: nonNegative('maxPendingSessions', options.maxPendingSessions, 1000),
    },
    jwtIssuer: options.jwtIssuer ?? DEFAULT_JWT_ISSUER,
    devMode: options.production !== true,
    sse: options.sse ?? true,
    sseOpenDelayMs: nonNegative('sseOpenDelayMs', options.sseOpenDelayMs, 200),
    sweepIntervalMs: nonNegative('sweepIntervalMs', options.sweepIntervalMs, 1000),
    pairingHint: options.pairingHint ?? true,
    knobs: options.knobs ?? true,
    knownAttributes: options.knownAttributes === undefined ? undefined : new Set(options.knownAttributes),
    bodyLimit: nonNegative('bodyLimit', options.bodyLimit, 1 << 20),
  };
}

/** irmago's treatment of its `url` setting: end it in a slash, then in `irma/`. */
export function normalizePublicUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new RangeError(`standin publicUrl is not an absolute URL: ${url}`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new RangeError(`standin publicUrl must be http(s): ${url}`);
  }
  let base = `${parsed.origin}${parsed.pathname}`;
  if (!base.endsWith('/')) base += '/';
  if (!base.endsWith('irma/')) base += 'irma/';
  return base;
}

/** The session pointer URL for a client token. */
export function sessionUrl(settings: StandinSettings, request: FastifyRequest, clientToken: string): string {
  const base = settings.publicUrl ?? normalizePublicUrl(`${request.protocol}://${request.host}`);
  return `${base}session/${clientToken}`;
}
