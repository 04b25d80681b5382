import { parseArgs, type ParseArgsConfig } from 'node:util';
import { DEFAULT_CONNECTION_LIMITS, type ConnectionLimits } from './connections.js';
import { isDemoType } from './idp/schemes.js';
import { DEFAULT_STATUS_STREAM_LIMITS, type StatusStreamLimits } from './idp/status-streams.js';
import { DEFAULT_PKG_KEY_PATHS, type PkgKeyPaths } from './keyfiles.js';
import type { KeyKind } from './keyset.js';
import { DEFAULT_KEY_SET_PATH } from './keyset-file.js';
import type { RateLimitSettings } from './ratelimit/index.js';
import { trustedProxies } from './ratelimit/key.js';

/**
 * The pg-pkg command line: `gen`, `server`, `migrate`, `api-key …`, `audit list|prune`. Parsing is a pure function of argv and
 * the environment, so every rule is unit-tested; running lives in cli.ts. Each server setting has a
 * flag and (mostly) an environment twin; the flag wins. A bad value is a ConfigError naming the
 * setting, which the CLI prints on one line before exiting with code 2.
 */

export type Env = Readonly<Record<string, string | undefined>>;

export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'silent';

export interface ServerConfig {
  host: string;
  port: number;
  identityServer: { url: string; token: string | undefined };
  databaseUrl: string | undefined;
  /** Exact origins; ['*'] allows any. */
  allowedOrigins: string[];
  rateLimit: RateLimitSettings;
  emailAttribute: string;
  logLevel: LogLevel;
  keyPaths: PkgKeyPaths;
  /** The key-set file (server/keyset-file.ts); when it does not exist, the four key files are the set. */
  keySetPath: string;
  /** Processes serving HTTP; 1 runs in this process, more use node:cluster. */
  workers: number;
  redisUrl: string | undefined;
  /** When Redis fails: answer from this instance's buckets ('open'), or refuse with 503 ('closed'). */
  redisFailure: RedisFailurePolicy;
  /** Deadline of one Redis call in ms. */
  redisTimeoutMs: number;
  /** Slow-client limits (server/connections.ts). */
  connections: ConnectionLimits;
  /** Caps and lifetime of status-event streams (server/idp/status-streams.ts). */
  statusStreams: StatusStreamLimits;
  /** The `iss` the identity server's JWTs must carry; undefined: any (as pg-pkg). */
  jwtIssuer: string | undefined;
  /** Refuse sessions and keys for demo-scheme (irma-demo) attributes. */
  refuseDemoSchemes: boolean;
}

export type RedisFailurePolicy = 'open' | 'closed';

export type Command =
  | { kind: 'help'; text: string }
  /** ifMissing: a complete set of existing files is kept (exit 0) instead of refused. */
  | { kind: 'gen'; paths: PkgKeyPaths; ifMissing: boolean }
  /** migrate: bring the database schema up to date before serving, instead of refusing an old one. */
  | { kind: 'server'; config: ServerConfig; migrate: boolean }
  | { kind: 'migrate'; databaseUrl: string }
  | { kind: 'api-key-create'; databaseUrl: string; email: string; org: string }
  | { kind: 'api-key-list'; databaseUrl: string; org: string | undefined }
  | { kind: 'api-key-revoke'; databaseUrl: string; ref: { id: string } | { key: string } }
  /** perHour/perDay: a count, null to remove the budget, undefined to leave it. */
  | { kind: 'api-key-budget'; databaseUrl: string; id: string; perHour?: number | null; perDay?: number | null }
  | { kind: 'api-key-rotate'; databaseUrl: string; id: string; graceMs: number }
  | { kind: 'api-key-info'; databaseUrl: string; id: string; json: boolean }
  /** since: an instant, or how long ago (resolved when the command runs). */
  | {
      kind: 'audit-list';
      databaseUrl: string;
      since: TimeRef;
      until: TimeRef | undefined;
      keyId: string | undefined;
      limit: number;
      json: boolean;
    }
  | { kind: 'audit-prune'; databaseUrl: string; retentionDays: number }
  | { kind: 'keys'; action: KeysAction; keySetPath: string; keyPaths: PkgKeyPaths; databaseUrl: string | undefined };

/** What `pg-pkg keys …` does to the key set. */
export type KeysAction =
  | { op: 'list'; json: boolean }
  | { op: 'add'; kinds: KeyKind[]; notBefore: number | undefined; notAfter: number | undefined }
  | { op: 'promote'; id: string }
  | { op: 'retire'; id: string };

/** A point in time on the command line: an ISO 8601 date or date-time, or a duration ago (`24h`). */
export type TimeRef = { at: Date } | { agoMs: number };

/** The instant a TimeRef names, at `now` (ms). */
export const resolveTime = (ref: TimeRef, now: number): Date => ('at' in ref ? ref.at : new Date(now - ref.agoMs));

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(
    /**
     * The flag (and its environment twin) at fault, e.g. "--port" or "--allowed-origins / PKG_ALLOWED_ORIGINS";
     * undefined when the problem names it itself (the argument parser's own messages).
     */
    readonly setting: string | undefined,
    problem: string,
  ) {
    super(setting === undefined ? problem : `${setting}: ${problem}`);
  }
}

export const DEFAULT_IDENTITY_SERVER = 'https://is.yivi.app';
export const DEFAULT_EMAIL_ATTRIBUTE = 'pbdf.sidn-pbdf.email.email';
export const DEFAULT_PORT = 8080;
export const DEFAULT_HOST = '0.0.0.0';
export const DEFAULT_RATE_LIMITS = { perSecond: 10, burst: 50, sensitivePerSecond: 2, sensitiveBurst: 10 } as const;
export const DEFAULT_REDIS_TIMEOUT_MS = 250;
const MAX_WORKERS = 256;
const MAX_RATE = 1_000_000;

// ---------------------------------------------------------------------------------------------
// Help texts

export const MAIN_HELP = `Usage: pg-pkg <command> [options]

The PostGuard key generator (PKG): issues decryption and signing keys to people who prove their
identity with the Yivi app.

Commands:
  gen                  generate the master key pair (four key files; run once)
  keys list            the master key sets: ids, statuses, windows
  keys add             add master keys (decrypt-only), e.g. before a rotation
  keys promote         make a key the primary (new files are sealed / signed under it)
  keys retire          retire a key (it opens and verifies nothing any more)
  server               run the HTTP server
  migrate              create or update the database schema (API keys)
  api-key create       create an API key for a sending organisation (needs a database)
  api-key list         list the API keys and whether they are active
  api-key revoke       revoke an API key
  api-key rotate       replace an API key, the old one signing on for a grace period
  api-key budget       set an API key's budget of signing requests per hour and per day
  api-key info         show one API key: status, organisation, last use, counts, budgets
  audit list           show the audit trail (key use and api-key commands) since a time
  audit prune          delete audit rows older than the retention (default 90 days)

Run "pg-pkg <command> --help" for the options of a command.`;

export const GEN_HELP = `Usage: pg-pkg gen [options]

Writes the four master key files (mode 0600; existing files are never overwritten).

  -s, --scheme <3>              key scheme; only 3 (PostGuard v3) exists             [default: 3]
      --if-missing              keep an existing, complete set of key files (exit 0)
      --ibe-secret-path <path>  KEM master secret key                     [default: ./pkg_ibe.sec]
      --ibe-public-path <path>  KEM master public key                     [default: ./pkg_ibe.pub]
      --ibs-secret-path <path>  signing master secret key                 [default: ./pkg_ibs.sec]
      --ibs-public-path <path>  signing verifying key                     [default: ./pkg_ibs.pub]
  -h, --help                    show this help`;

export const SERVER_HELP = `Usage: pg-pkg server [options]

Options (environment variable in brackets; a flag wins over its variable):
  -H, --host <host>                        address to bind                           [default: 0.0.0.0]
  -p, --port <port>                        TCP port                                  [default: 8080]
  -i, --irma <url>                         identity (Yivi) server  [IDENTITY_SERVER] [default: https://is.yivi.app]
  -t, --irma-token <token>                 requestor token for the identity server   [IRMA_TOKEN]
  -d, --database-url <url>                 PostgreSQL for API keys (optional)        [DATABASE_URL]
      --migrate                            migrate the database schema at start; without it,
                                           a missing or old schema stops the start   [PKG_MIGRATE=true]
      --allowed-origins <list>             comma-separated origins allowed by CORS; "*" allows any
                                           (logged as a warning). Required.          [PKG_ALLOWED_ORIGINS]
      --ratelimit-per-second <n>           general rate per client IP, /v2           [PKG_RATELIMIT_PER_SECOND] [default: 10]
      --ratelimit-burst <n>                general burst                             [PKG_RATELIMIT_BURST] [default: 50]
      --ratelimit-sensitive-per-second <n> rate of key-issuing routes per client IP  [PKG_RATELIMIT_SENSITIVE_PER_SECOND] [default: 2]
      --ratelimit-sensitive-burst <n>      burst of key-issuing routes               [PKG_RATELIMIT_SENSITIVE_BURST] [default: 10]
      --ratelimit-disabled                 let every request pass the limiter        [PKG_RATELIMIT_DISABLED=true]
      --trusted-proxies <list>             addresses/CIDR ranges of our reverse proxies, comma-separated;
                                           clients are keyed on the X-Forwarded-For entry left of them
                                           (e.g. 10.0.0.0/8,127.0.0.1)               [PKG_TRUSTED_PROXIES]
      --ratelimit-trust-forwarded-for      deprecated: key on the rightmost X-Forwarded-For entry
                                           whoever sends it; use --trusted-proxies   [PKG_RATELIMIT_TRUST_FORWARDED_FOR=true]
      --redis-url <url>                    share rate limits between PKG instances   [PKG_REDIS_URL]
      --redis-failure <open|closed>        Redis down: open = this instance's own buckets (logged once,
                                           counted in /metrics); closed = 503        [PKG_REDIS_FAILURE] [default: open]
      --redis-timeout-ms <ms>              deadline of one Redis call                [PKG_REDIS_TIMEOUT_MS] [default: 250]
      --statusevents-per-client <n>        status-event streams open per client      [PKG_STATUSEVENTS_PER_CLIENT] [default: 10]
      --statusevents-max <n>               status-event streams open in all          [PKG_STATUSEVENTS_MAX] [default: 2000]
      --statusevents-max-seconds <s>       longest a status-event stream stays open  [PKG_STATUSEVENTS_MAX_SECONDS] [default: 900]
      --jwt-issuer <iss>                   the iss claim the identity server's JWTs must have
                                           (default: any, as pg-pkg)                 [PKG_JWT_ISSUER]
      --refuse-demo-schemes                refuse sessions and keys for irma-demo attributes, which
                                           anyone can issue to themselves (recommended in
                                           production)                               [PKG_REFUSE_DEMO_SCHEMES=true]
      --headers-timeout-ms <ms>            time a client has to send its headers     [PKG_HEADERS_TIMEOUT_MS] [default: 10000]
      --request-timeout-ms <ms>            time a client has to send its request     [PKG_REQUEST_TIMEOUT_MS] [default: 30000]
      --keep-alive-timeout-ms <ms>         idle keep-alive sockets are closed after  [PKG_KEEP_ALIVE_TIMEOUT_MS] [default: 5000]
      --max-connections <n>                sockets open at once, per process         [PKG_MAX_CONNECTIONS] [default: 10000]
      --max-connections-per-address <n>    sockets open at once from one client address,
                                           per process; --trusted-proxies are exempt [PKG_MAX_CONNECTIONS_PER_ADDRESS] [default: 64]
      --workers <n>                        worker processes (node:cluster)           [PKG_WORKERS] [default: 1]
      --email-attribute <type>             e-mail attribute of API-key identities    [PKG_EMAIL_ATTRIBUTE]
                                           [default: pbdf.sidn-pbdf.email.email]
      --log-level <level>                  trace|debug|info|warn|error|silent        [LOG_LEVEL, RUST_LOG] [default: info]
      --key-set <path>                     the master key sets (pg-pkg keys); while it does not
                                           exist, the four files below    [PKG_KEY_SET] [default: ./pkg_keys.json]
      --ibe-secret-path <path>             [default: ./pkg_ibe.sec]
      --ibe-public-path <path>             [default: ./pkg_ibe.pub]
      --ibs-secret-path <path>             [default: ./pkg_ibs.sec]
      --ibs-public-path <path>             [default: ./pkg_ibs.pub]
  -h, --help                               show this help`;

export const KEYS_HELP = `Usage: pg-pkg keys list [--json]
       pg-pkg keys add [--kind ibe|ibs|both] [--not-before <date>] [--not-after <date>]
       pg-pkg keys promote --id <id>
       pg-pkg keys retire --id <id>
       (each also takes --key-set <path>, the four key-file paths, and -d <url>)

The PKG's master keys as two key sets, IBE (encryption) and IBS (signing): each key has an id (the
first 8 bytes of SHA-256 over its public key, in hex) and a status: primary (new files are sealed or
signed under it; one per set), decrypt-only (still issues user keys and verifies) or retired
(nothing). The sets live in the key-set file; before the first "keys add" the four key files of
"pg-pkg gen" are read as a set of one primary each, and "keys add" writes them into the key-set file.
Running servers read the file when they start: roll every change out to every instance (see the
rotation runbook in server/README.md). With a database (-d / DATABASE_URL) every command is
recorded in the audit trail.

list: one tab-separated line per key (kind, id, status, not before, not after, added), or JSON.
add: new key pairs, decrypt-only; --not-before/--not-after limit the timestamps (the time a file
was sealed) they issue user keys for.
promote: the key becomes the primary of its set; the primary before it becomes decrypt-only.
retire: the key issues and verifies nothing any more; files sealed under it no longer open.

  --kind <ibe|ibs|both>      which set(s) to add a key to                      [default: both]
  --not-before <date>        ISO 8601 date or date-time
  --not-after <date>         ISO 8601 date or date-time
  --id <id>                  a key id, as listed (16 hex characters)
  --json                     list as one JSON object (public keys, never secrets)
  --key-set <path>           the key-set file                  [PKG_KEY_SET] [default: ./pkg_keys.json]
  --ibe-secret-path <path>   (and --ibe-public-path, --ibs-secret-path, --ibs-public-path) the four
                             key files, read while there is no key-set file
  -d, --database-url <url>   PostgreSQL, for the audit trail (optional)     [DATABASE_URL]
  -h, --help                 show this help`;

export const MIGRATE_HELP = `Usage: pg-pkg migrate [-d <url>]

Creates the tables the PKG reads (API keys) or brings them up to date, recording each migration in
pg_pkg_schema_migrations. Safe to run again, and from several instances at once.

  -d, --database-url <url>   PostgreSQL                                     [DATABASE_URL]
  -h, --help                 show this help`;

export const API_KEY_HELP = `Usage: pg-pkg api-key create --email <address> --org <name> [-d <url>]
       pg-pkg api-key list [--org <name>] [-d <url>]
       pg-pkg api-key revoke (--id <id> | --key <PG-…>) [-d <url>]
       pg-pkg api-key rotate --id <id> [--grace <duration>] [-d <url>]
       pg-pkg api-key budget --id <id> [--per-hour <n|off>] [--per-day <n|off>] [-d <url>]
       pg-pkg api-key info --id <id> [--json] [-d <url>]

create: a new API key (PG-…) for an organisation that signs with its e-mail address. The key is
printed once; only its SHA-256 hash is stored.
list: one tab-separated line per key (id, organisation, signing e-mail, status, created, expires,
last used); never the keys themselves.
revoke: the PKG refuses the key from its next request on.
rotate: prints a new key for the same organisation (same signing attributes and budgets); the old key
keeps signing for the grace period (default 24h; 0s stops it now), then stops.
budget: signing requests the key may make per hour and per day, shared by every PKG instance (off by
default; "off" removes one). Takes effect at the key's next request.
info: status, organisation, created, expires, last use, requests in the audit trail, budgets, rotation.

  --email <address>          the organisation's signing e-mail address
  --org <name>               the organisation's name
  --id <id>                  the key's id, as listed
  --key <PG-…>               the key itself
  --grace <duration>         how long the old key signs on after rotate: 30m, 24h, 7d   [default: 24h]
  --per-hour <n|off>         signing requests per hour (budget)
  --per-day <n|off>          signing requests per day (budget)
  --json                     info as one JSON object
  -d, --database-url <url>   PostgreSQL                                     [DATABASE_URL]
  -h, --help                 show this help`;

export const AUDIT_HELP = `Usage: pg-pkg audit list [--since <time>] [--until <time>] [--key-id <id>] [--limit <n>] [--json] [-d <url>]
       pg-pkg audit prune [--retention-days <n>] [-d <url>]

list: the audit trail from --since (default 24h ago), oldest first: one tab-separated line per row (time,
source, operation, outcome, error code, key id, organisation id, client address or OS user@host, user
agent), or one JSON object per line with --json. A time is an ISO 8601 date or date-time
(2026-11-28, 2026-11-28T12:00:00Z) or a duration ago: 30m, 24h, 7d.
prune: deletes the rows older than the retention, and records that it did.

  --since <time>             from this time on                                [default: 24h]
  --until <time>             before this time
  --key-id <id>              only this API key's rows
  --limit <n>                at most this many rows                           [default: 1000]
  --json                     JSON lines instead of columns
  --retention-days <n>       days kept by prune         [PKG_AUDIT_RETENTION_DAYS] [default: 90]
  -d, --database-url <url>   PostgreSQL                                     [DATABASE_URL]
  -h, --help                 show this help`;

// ---------------------------------------------------------------------------------------------
// Value parsers. Each names the setting it checks.

const DURATION_UNITS_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** A duration such as `90s`, `30m`, `24h`, `7d` (a whole number and one unit), in ms. */
export function duration(setting: string, raw: string): number {
  const match = /^(\d{1,7})([smhd])$/.exec(raw.trim());
  if (match === null)
    throw new ConfigError(setting, `expected a duration such as 30m, 24h or 7d, got ${JSON.stringify(raw)}`);
  return Number(match[1]) * DURATION_UNITS_MS[match[2] as keyof typeof DURATION_UNITS_MS];
}

function timeRef(setting: string, raw: string): TimeRef {
  const text = raw.trim();
  if (/^\d{1,7}[smhd]$/.test(text)) return { agoMs: duration(setting, text) };
  // ISO 8601 only (Date.parse takes much else); a date alone is midnight UTC.
  if (/^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/i.test(text)) {
    const at = new Date(text.length === 10 ? `${text}T00:00:00Z` : text);
    if (!Number.isNaN(at.getTime())) return { at };
  }
  throw new ConfigError(
    setting,
    `expected an ISO 8601 date or date-time, or a duration such as 24h, got ${JSON.stringify(raw)}`,
  );
}

function integer(setting: string, raw: string, min: number, max: number): number {
  if (!/^\d+$/.test(raw.trim())) throw new ConfigError(setting, `expected an integer, got ${JSON.stringify(raw)}`);
  const n = Number(raw.trim());
  if (n < min || n > max) throw new ConfigError(setting, `must be from ${min} to ${max}, got ${n}`);
  return n;
}

function boolean(setting: string, raw: string): boolean {
  const v = raw.trim().toLowerCase();
  if (['true', '1', 'yes', 'on'].includes(v)) return true;
  if (['false', '0', 'no', 'off', ''].includes(v)) return false;
  throw new ConfigError(setting, `expected true or false, got ${JSON.stringify(raw)}`);
}

function httpUrl(setting: string, raw: string): string {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new ConfigError(setting, `not a URL: ${JSON.stringify(raw)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ConfigError(setting, 'must be an http(s) URL');
  if (url.search !== '' || url.hash !== '') throw new ConfigError(setting, 'must not have a query or fragment');
  return url.href.replace(/(?<!\/)\/+$/, '');
}

function origins(setting: string, raw: string): string[] {
  const entries = raw
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '');
  if (entries.length === 0) throw new ConfigError(setting, 'is required (a comma-separated list of origins, or *)');
  if (entries.includes('*')) return ['*'];
  return entries.map((entry) => {
    let url: URL;
    try {
      url = new URL(entry);
    } catch {
      throw new ConfigError(setting, `not an origin: ${JSON.stringify(entry)}`);
    }
    const origin = url.origin;
    const ok = (url.protocol === 'http:' || url.protocol === 'https:') && (entry === origin || entry === `${origin}/`);
    if (!ok) throw new ConfigError(setting, `not an origin (scheme://host[:port]): ${JSON.stringify(entry)}`);
    return origin;
  });
}

const ATTRIBUTE_TYPE = /^[\w-]+(?:\.[\w-]+){3}$/;

function attributeType(setting: string, raw: string): string {
  const v = raw.trim();
  if (!ATTRIBUTE_TYPE.test(v))
    throw new ConfigError(
      setting,
      `not an attribute type (scheme.issuer.credential.attribute): ${JSON.stringify(raw)}`,
    );
  return v;
}

const LEVELS: Readonly<Record<string, LogLevel>> = {
  trace: 'trace',
  debug: 'debug',
  info: 'info',
  warn: 'warn',
  error: 'error',
  silent: 'silent',
  off: 'silent',
};

function logLevel(setting: string, raw: string): LogLevel {
  const level = LEVELS[raw.trim().toLowerCase()];
  if (level === undefined)
    throw new ConfigError(
      setting,
      `expected one of trace, debug, info, warn, error, silent; got ${JSON.stringify(raw)}`,
    );
  return level;
}

function redisUrl(setting: string, raw: string): string {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new ConfigError(setting, 'not a URL');
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:')
    throw new ConfigError(setting, 'must be a redis:// or rediss:// URL');
  return raw.trim();
}

function proxyList(setting: string, raw: string): string[] {
  const entries = raw
    .split(',')
    .map((e) => e.trim())
    .filter((e) => e !== '');
  if (entries.length === 0)
    throw new ConfigError(setting, 'expected a comma-separated list of addresses or CIDR ranges');
  try {
    return [...trustedProxies(entries).ranges];
  } catch (e) {
    throw new ConfigError(setting, (e as Error).message);
  }
}

function redisFailure(setting: string, raw: string): RedisFailurePolicy {
  const v = raw.trim().toLowerCase();
  if (v === 'open' || v === 'closed') return v;
  throw new ConfigError(setting, `expected open or closed, got ${JSON.stringify(raw)}`);
}

function nonEmpty(setting: string, raw: string): string {
  if (raw.trim() === '') throw new ConfigError(setting, 'must not be empty');
  return raw.trim();
}

// ---------------------------------------------------------------------------------------------
// Commands

type Values = Record<string, string | boolean | undefined>;

function parse(argv: readonly string[], options: NonNullable<ParseArgsConfig['options']>, command: string): Values {
  try {
    return parseArgs({ args: [...argv], options, strict: true, allowPositionals: false }).values as Values;
  } catch (e) {
    const message = (e as Error).message.split('\n')[0] ?? 'invalid arguments';
    throw new ConfigError(command, message);
  }
}

/** A setting from its flag, else its environment variable(s); undefined if neither is set. */
function setting(
  values: Values,
  flag: string,
  env: Env,
  ...vars: string[]
): { value: string; name: string } | undefined {
  const v = values[flag];
  if (typeof v === 'string') return { value: v, name: `--${flag}` };
  for (const name of vars) {
    const e = env[name];
    if (e !== undefined && e !== '') return { value: e, name };
  }
  return undefined;
}

const KEY_PATH_OPTIONS = {
  'ibe-secret-path': { type: 'string' },
  'ibe-public-path': { type: 'string' },
  'ibs-secret-path': { type: 'string' },
  'ibs-public-path': { type: 'string' },
} as const;

function keyPaths(values: Values): PkgKeyPaths {
  const path = (flag: string, fallback: string): string => {
    const v = values[flag];
    if (v === undefined) return fallback;
    return nonEmpty(`--${flag}`, v as string);
  };
  return {
    ibeSecret: path('ibe-secret-path', DEFAULT_PKG_KEY_PATHS.ibeSecret),
    ibePublic: path('ibe-public-path', DEFAULT_PKG_KEY_PATHS.ibePublic),
    ibsSecret: path('ibs-secret-path', DEFAULT_PKG_KEY_PATHS.ibsSecret),
    ibsPublic: path('ibs-public-path', DEFAULT_PKG_KEY_PATHS.ibsPublic),
  };
}

function keySetPath(values: Values, env: Env): string {
  const path = setting(values, 'key-set', env, 'PKG_KEY_SET');
  return path === undefined ? DEFAULT_KEY_SET_PATH : nonEmpty(path.name, path.value);
}

/** An instant given as an ISO 8601 date or date-time, in Unix seconds. */
function instant(setting: string, raw: string): number {
  const ref = /^\d{1,7}[smhd]$/.test(raw.trim()) ? undefined : timeRef(setting, raw);
  if (ref === undefined || !('at' in ref)) throw new ConfigError(setting, 'expected an ISO 8601 date or date-time');
  return Math.floor(ref.at.getTime() / 1000);
}

const KEY_ID = /^[0-9a-f]{16}$/;

function keysCommand(argv: readonly string[], env: Env): Command {
  const [sub, ...rest] = argv;
  if (sub === undefined || sub === '--help' || sub === '-h') return { kind: 'help', text: KEYS_HELP };
  if (!['list', 'add', 'promote', 'retire'].includes(sub))
    throw new ConfigError('keys', `unknown subcommand ${JSON.stringify(sub)} (expected list, add, promote or retire)`);
  const values = parse(
    rest,
    {
      ...DATABASE_OPTIONS,
      ...KEY_PATH_OPTIONS,
      'key-set': { type: 'string' },
      ...(sub === 'list' ? { json: { type: 'boolean' } } : {}),
      ...(sub === 'add'
        ? { kind: { type: 'string' }, 'not-before': { type: 'string' }, 'not-after': { type: 'string' } }
        : {}),
      ...(sub === 'promote' || sub === 'retire' ? { id: { type: 'string' } } : {}),
    },
    `keys ${sub}`,
  );
  if (values.help === true) return { kind: 'help', text: KEYS_HELP };
  const database = setting(values, 'database-url', env, 'DATABASE_URL');
  const common = {
    kind: 'keys' as const,
    keySetPath: keySetPath(values, env),
    keyPaths: keyPaths(values),
    databaseUrl: database === undefined ? undefined : nonEmpty(database.name, database.value),
  };
  const id = (): string => {
    const raw = values.id;
    if (typeof raw !== 'string') throw new ConfigError('--id', 'is required');
    const trimmed = raw.trim().toLowerCase();
    if (!KEY_ID.test(trimmed))
      throw new ConfigError('--id', `not a key id (16 hex characters, as "keys list" shows): ${JSON.stringify(raw)}`);
    return trimmed;
  };
  switch (sub) {
    case 'list':
      return { ...common, action: { op: 'list', json: values.json === true } };
    case 'add': {
      const kind = typeof values.kind === 'string' ? values.kind.trim() : 'both';
      if (!['ibe', 'ibs', 'both'].includes(kind)) throw new ConfigError('--kind', 'is ibe, ibs or both');
      const notBefore =
        typeof values['not-before'] === 'string' ? instant('--not-before', values['not-before']) : undefined;
      const notAfter =
        typeof values['not-after'] === 'string' ? instant('--not-after', values['not-after']) : undefined;
      if (notBefore !== undefined && notAfter !== undefined && notBefore > notAfter)
        throw new ConfigError('--not-after', 'is before --not-before');
      const kinds: KeyKind[] = kind === 'both' ? ['ibe', 'ibs'] : [kind as KeyKind];
      return { ...common, action: { op: 'add', kinds, notBefore, notAfter } };
    }
    default:
      return { ...common, action: { op: sub as 'promote' | 'retire', id: id() } };
  }
}

function genCommand(argv: readonly string[]): Command {
  const values = parse(
    argv,
    {
      scheme: { type: 'string', short: 's' },
      'if-missing': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
      ...KEY_PATH_OPTIONS,
    },
    'gen',
  );
  if (values.help === true) return { kind: 'help', text: GEN_HELP };
  if (values.scheme !== undefined && values.scheme !== '3') throw new ConfigError('--scheme', 'only scheme 3 exists');
  return { kind: 'gen', paths: keyPaths(values), ifMissing: values['if-missing'] === true };
}

function serverCommand(argv: readonly string[], env: Env): Command {
  const values = parse(
    argv,
    {
      host: { type: 'string', short: 'H' },
      port: { type: 'string', short: 'p' },
      irma: { type: 'string', short: 'i' },
      'irma-token': { type: 'string', short: 't' },
      'database-url': { type: 'string', short: 'd' },
      migrate: { type: 'boolean' },
      'allowed-origins': { type: 'string' },
      'ratelimit-per-second': { type: 'string' },
      'ratelimit-burst': { type: 'string' },
      'ratelimit-sensitive-per-second': { type: 'string' },
      'ratelimit-sensitive-burst': { type: 'string' },
      'ratelimit-disabled': { type: 'boolean' },
      'ratelimit-trust-forwarded-for': { type: 'boolean' },
      'trusted-proxies': { type: 'string' },
      'redis-url': { type: 'string' },
      'redis-failure': { type: 'string' },
      'redis-timeout-ms': { type: 'string' },
      'statusevents-per-client': { type: 'string' },
      'statusevents-max': { type: 'string' },
      'statusevents-max-seconds': { type: 'string' },
      'jwt-issuer': { type: 'string' },
      'refuse-demo-schemes': { type: 'boolean' },
      'headers-timeout-ms': { type: 'string' },
      'request-timeout-ms': { type: 'string' },
      'keep-alive-timeout-ms': { type: 'string' },
      'max-connections': { type: 'string' },
      'max-connections-per-address': { type: 'string' },
      workers: { type: 'string' },
      'email-attribute': { type: 'string' },
      'log-level': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
      ...KEY_PATH_OPTIONS,
      'key-set': { type: 'string' },
    },
    'server',
  );
  if (values.help === true) return { kind: 'help', text: SERVER_HELP };

  const host = setting(values, 'host', env);
  const port = setting(values, 'port', env);
  const irma = setting(values, 'irma', env, 'IDENTITY_SERVER');
  const token = setting(values, 'irma-token', env, 'IRMA_TOKEN');
  const database = setting(values, 'database-url', env, 'DATABASE_URL');
  const allowed = setting(values, 'allowed-origins', env, 'PKG_ALLOWED_ORIGINS');
  const redis = setting(values, 'redis-url', env, 'PKG_REDIS_URL');
  const workers = setting(values, 'workers', env, 'PKG_WORKERS');
  const email = setting(values, 'email-attribute', env, 'PKG_EMAIL_ATTRIBUTE');
  const level = setting(values, 'log-level', env, 'LOG_LEVEL', 'RUST_LOG');
  const proxies = setting(values, 'trusted-proxies', env, 'PKG_TRUSTED_PROXIES');
  const failure = setting(values, 'redis-failure', env, 'PKG_REDIS_FAILURE');
  const issuer = setting(values, 'jwt-issuer', env, 'PKG_JWT_ISSUER');

  const rate = (flag: string, variable: string, fallback: number): number => {
    const s = setting(values, flag, env, variable);
    return s === undefined ? fallback : integer(s.name, s.value, 1, MAX_RATE);
  };
  const limit = (flag: string, variable: string, fallback: number, min: number, max: number): number => {
    const s = setting(values, flag, env, variable);
    return s === undefined ? fallback : integer(s.name, s.value, min, max);
  };
  const maxConnections = limit(
    'max-connections',
    'PKG_MAX_CONNECTIONS',
    DEFAULT_CONNECTION_LIMITS.maxConnections,
    1,
    1_000_000,
  );
  const perAddress = setting(values, 'max-connections-per-address', env, 'PKG_MAX_CONNECTIONS_PER_ADDRESS');
  const flagOrEnv = (flag: string, variable: string): boolean => {
    if (values[flag] === true) return true;
    const e = env[variable];
    return e === undefined ? false : boolean(variable, e);
  };

  if (allowed === undefined) {
    throw new ConfigError(
      '--allowed-origins / PKG_ALLOWED_ORIGINS',
      'is required (a comma-separated list of origins, or *)',
    );
  }

  const config: ServerConfig = {
    host: host === undefined ? DEFAULT_HOST : nonEmpty(host.name, host.value),
    port: port === undefined ? DEFAULT_PORT : integer(port.name, port.value, 0, 65_535),
    identityServer: {
      url: irma === undefined ? DEFAULT_IDENTITY_SERVER : httpUrl(irma.name, irma.value),
      token: token === undefined ? undefined : nonEmpty(token.name, token.value),
    },
    databaseUrl: database === undefined ? undefined : nonEmpty(database.name, database.value),
    allowedOrigins: origins(allowed.name, allowed.value),
    rateLimit: {
      perSecond: rate('ratelimit-per-second', 'PKG_RATELIMIT_PER_SECOND', DEFAULT_RATE_LIMITS.perSecond),
      burst: rate('ratelimit-burst', 'PKG_RATELIMIT_BURST', DEFAULT_RATE_LIMITS.burst),
      sensitivePerSecond: rate(
        'ratelimit-sensitive-per-second',
        'PKG_RATELIMIT_SENSITIVE_PER_SECOND',
        DEFAULT_RATE_LIMITS.sensitivePerSecond,
      ),
      sensitiveBurst: rate(
        'ratelimit-sensitive-burst',
        'PKG_RATELIMIT_SENSITIVE_BURST',
        DEFAULT_RATE_LIMITS.sensitiveBurst,
      ),
      disabled: flagOrEnv('ratelimit-disabled', 'PKG_RATELIMIT_DISABLED'),
      trustForwardedFor: flagOrEnv('ratelimit-trust-forwarded-for', 'PKG_RATELIMIT_TRUST_FORWARDED_FOR'),
      trustedProxies: proxies === undefined ? [] : proxyList(proxies.name, proxies.value),
    },
    emailAttribute: email === undefined ? DEFAULT_EMAIL_ATTRIBUTE : attributeType(email.name, email.value),
    logLevel: level === undefined ? 'info' : logLevel(level.name, level.value),
    keyPaths: keyPaths(values),
    keySetPath: keySetPath(values, env),
    workers: workers === undefined ? 1 : integer(workers.name, workers.value, 1, MAX_WORKERS),
    redisUrl: redis === undefined ? undefined : redisUrl(redis.name, redis.value),
    redisFailure: failure === undefined ? 'open' : redisFailure(failure.name, failure.value),
    redisTimeoutMs: limit('redis-timeout-ms', 'PKG_REDIS_TIMEOUT_MS', DEFAULT_REDIS_TIMEOUT_MS, 10, 60_000),
    connections: {
      headersTimeoutMs: limit(
        'headers-timeout-ms',
        'PKG_HEADERS_TIMEOUT_MS',
        DEFAULT_CONNECTION_LIMITS.headersTimeoutMs,
        100,
        600_000,
      ),
      requestTimeoutMs: limit(
        'request-timeout-ms',
        'PKG_REQUEST_TIMEOUT_MS',
        DEFAULT_CONNECTION_LIMITS.requestTimeoutMs,
        100,
        3_600_000,
      ),
      keepAliveTimeoutMs: limit(
        'keep-alive-timeout-ms',
        'PKG_KEEP_ALIVE_TIMEOUT_MS',
        DEFAULT_CONNECTION_LIMITS.keepAliveTimeoutMs,
        100,
        600_000,
      ),
      maxConnections,
      // Given, it may not exceed the global cap; by default it is lowered to it.
      maxConnectionsPerAddress:
        perAddress === undefined
          ? Math.min(DEFAULT_CONNECTION_LIMITS.maxConnectionsPerAddress, maxConnections)
          : integer(perAddress.name, perAddress.value, 1, maxConnections),
    },
    statusStreams: {
      ...DEFAULT_STATUS_STREAM_LIMITS,
      perClient: limit(
        'statusevents-per-client',
        'PKG_STATUSEVENTS_PER_CLIENT',
        DEFAULT_STATUS_STREAM_LIMITS.perClient,
        1,
        1_000_000,
      ),
      total: limit('statusevents-max', 'PKG_STATUSEVENTS_MAX', DEFAULT_STATUS_STREAM_LIMITS.total, 1, 1_000_000),
      maxDurationMs:
        1000 *
        limit(
          'statusevents-max-seconds',
          'PKG_STATUSEVENTS_MAX_SECONDS',
          DEFAULT_STATUS_STREAM_LIMITS.maxDurationMs / 1000,
          1,
          86_400,
        ),
    },
    jwtIssuer: issuer === undefined ? undefined : nonEmpty(issuer.name, issuer.value),
    refuseDemoSchemes: flagOrEnv('refuse-demo-schemes', 'PKG_REFUSE_DEMO_SCHEMES'),
  };
  if (config.refuseDemoSchemes && isDemoType(config.emailAttribute)) {
    throw new ConfigError(
      '--email-attribute / PKG_EMAIL_ATTRIBUTE',
      'is a demo-scheme attribute, which --refuse-demo-schemes refuses: API-key signing could not work',
    );
  }
  if (config.rateLimit.trustForwardedFor && (config.rateLimit.trustedProxies?.length ?? 0) > 0) {
    throw new ConfigError(
      '--ratelimit-trust-forwarded-for / PKG_RATELIMIT_TRUST_FORWARDED_FOR',
      'cannot be combined with --trusted-proxies (which replaces it); set only --trusted-proxies',
    );
  }
  if (config.statusStreams.perClient > config.statusStreams.total) {
    throw new ConfigError(
      '--statusevents-per-client / PKG_STATUSEVENTS_PER_CLIENT',
      'must not exceed --statusevents-max',
    );
  }
  if (config.connections.requestTimeoutMs < config.connections.headersTimeoutMs) {
    throw new ConfigError('--request-timeout-ms / PKG_REQUEST_TIMEOUT_MS', 'must be at least the headers timeout');
  }
  const migrate = flagOrEnv('migrate', 'PKG_MIGRATE');
  if (migrate && config.databaseUrl === undefined)
    throw new ConfigError('--migrate / PKG_MIGRATE', 'needs a database (--database-url / DATABASE_URL)');
  return { kind: 'server', config, migrate };
}

const DATABASE_OPTIONS = {
  'database-url': { type: 'string', short: 'd' },
  help: { type: 'boolean', short: 'h' },
} as const;

function databaseUrl(values: Values, env: Env): string {
  const database = setting(values, 'database-url', env, 'DATABASE_URL');
  if (database === undefined) throw new ConfigError('--database-url / DATABASE_URL', 'is required');
  return nonEmpty(database.name, database.value);
}

function migrateCommand(argv: readonly string[], env: Env): Command {
  const values = parse(argv, DATABASE_OPTIONS, 'migrate');
  if (values.help === true) return { kind: 'help', text: MIGRATE_HELP };
  return { kind: 'migrate', databaseUrl: databaseUrl(values, env) };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** --id: a key id as `api-key list` shows it (required). */
function keyId(values: Values): string {
  const id = values.id;
  if (typeof id !== 'string') throw new ConfigError('--id', 'is required');
  if (!UUID.test(id.trim()))
    throw new ConfigError('--id', `not a key id (a UUID, as "api-key list" shows): ${JSON.stringify(id)}`);
  return id.trim().toLowerCase();
}

function apiKeyCommand(argv: readonly string[], env: Env): Command {
  const [sub, ...rest] = argv;
  if (sub === undefined || sub === '--help' || sub === '-h') return { kind: 'help', text: API_KEY_HELP };
  switch (sub) {
    case 'create': {
      const values = parse(
        rest,
        { email: { type: 'string' }, org: { type: 'string' }, ...DATABASE_OPTIONS },
        'api-key create',
      );
      if (values.help === true) return { kind: 'help', text: API_KEY_HELP };
      const url = databaseUrl(values, env);
      const email = typeof values.email === 'string' ? values.email.trim() : '';
      if (!/^[^\s@]+@[^\s@]+$/.test(email))
        throw new ConfigError('--email', 'is required and must be an e-mail address');
      const org = typeof values.org === 'string' ? values.org.trim() : '';
      if (org === '') throw new ConfigError('--org', 'is required');
      return { kind: 'api-key-create', databaseUrl: url, email, org };
    }
    case 'list': {
      const values = parse(rest, { org: { type: 'string' }, ...DATABASE_OPTIONS }, 'api-key list');
      if (values.help === true) return { kind: 'help', text: API_KEY_HELP };
      const org = typeof values.org === 'string' ? nonEmpty('--org', values.org) : undefined;
      return { kind: 'api-key-list', databaseUrl: databaseUrl(values, env), org };
    }
    case 'revoke': {
      const values = parse(
        rest,
        { id: { type: 'string' }, key: { type: 'string' }, ...DATABASE_OPTIONS },
        'api-key revoke',
      );
      if (values.help === true) return { kind: 'help', text: API_KEY_HELP };
      const url = databaseUrl(values, env);
      const { id, key } = values;
      if ((id === undefined) === (key === undefined)) throw new ConfigError('--id / --key', 'give exactly one of them');
      if (typeof id === 'string') {
        if (!UUID.test(id.trim()))
          throw new ConfigError('--id', `not a key id (a UUID, as "api-key list" shows): ${JSON.stringify(id)}`);
        return { kind: 'api-key-revoke', databaseUrl: url, ref: { id: id.trim().toLowerCase() } };
      }
      if (typeof key !== 'string' || !key.startsWith('PG-'))
        throw new ConfigError('--key', 'must be an API key (PG-…)');
      return { kind: 'api-key-revoke', databaseUrl: url, ref: { key } };
    }
    case 'rotate': {
      const values = parse(
        rest,
        { id: { type: 'string' }, grace: { type: 'string' }, ...DATABASE_OPTIONS },
        'api-key rotate',
      );
      if (values.help === true) return { kind: 'help', text: API_KEY_HELP };
      const url = databaseUrl(values, env);
      const graceMs = typeof values.grace === 'string' ? duration('--grace', values.grace) : 24 * 3_600_000;
      return { kind: 'api-key-rotate', databaseUrl: url, id: keyId(values), graceMs };
    }
    case 'budget': {
      const values = parse(
        rest,
        { id: { type: 'string' }, 'per-hour': { type: 'string' }, 'per-day': { type: 'string' }, ...DATABASE_OPTIONS },
        'api-key budget',
      );
      if (values.help === true) return { kind: 'help', text: API_KEY_HELP };
      const url = databaseUrl(values, env);
      const id = keyId(values);
      const budget = (flag: 'per-hour' | 'per-day'): number | null | undefined => {
        const raw = values[flag];
        if (typeof raw !== 'string') return undefined;
        return raw.trim() === 'off' ? null : integer(`--${flag}`, raw, 1, 1_000_000_000);
      };
      const perHour = budget('per-hour');
      const perDay = budget('per-day');
      if (perHour === undefined && perDay === undefined)
        throw new ConfigError('--per-hour / --per-day', 'give at least one (a count, or off)');
      return {
        kind: 'api-key-budget',
        databaseUrl: url,
        id,
        ...(perHour === undefined ? {} : { perHour }),
        ...(perDay === undefined ? {} : { perDay }),
      };
    }
    case 'info': {
      const values = parse(
        rest,
        { id: { type: 'string' }, json: { type: 'boolean' }, ...DATABASE_OPTIONS },
        'api-key info',
      );
      if (values.help === true) return { kind: 'help', text: API_KEY_HELP };
      const url = databaseUrl(values, env);
      return { kind: 'api-key-info', databaseUrl: url, id: keyId(values), json: values.json === true };
    }
    default:
      throw new ConfigError(
        'api-key',
        `unknown subcommand ${JSON.stringify(sub)} (expected create, list, revoke, rotate, budget or info)`,
      );
  }
}

function auditCommand(argv: readonly string[], env: Env): Command {
  const [sub, ...rest] = argv;
  if (sub === undefined || sub === '--help' || sub === '-h') return { kind: 'help', text: AUDIT_HELP };
  switch (sub) {
    case 'list': {
      const values = parse(
        rest,
        {
          since: { type: 'string' },
          until: { type: 'string' },
          'key-id': { type: 'string' },
          limit: { type: 'string' },
          json: { type: 'boolean' },
          ...DATABASE_OPTIONS,
        },
        'audit list',
      );
      if (values.help === true) return { kind: 'help', text: AUDIT_HELP };
      const url = databaseUrl(values, env);
      const keyId = values['key-id'];
      if (typeof keyId === 'string' && !UUID.test(keyId.trim()))
        throw new ConfigError('--key-id', `not a key id (a UUID, as "api-key list" shows): ${JSON.stringify(keyId)}`);
      return {
        kind: 'audit-list',
        databaseUrl: url,
        since: timeRef('--since', typeof values.since === 'string' ? values.since : '24h'),
        until: typeof values.until === 'string' ? timeRef('--until', values.until) : undefined,
        keyId: typeof keyId === 'string' ? keyId.trim().toLowerCase() : undefined,
        limit: typeof values.limit === 'string' ? integer('--limit', values.limit, 1, 1_000_000) : 1000,
        json: values.json === true,
      };
    }
    case 'prune': {
      const values = parse(rest, { 'retention-days': { type: 'string' }, ...DATABASE_OPTIONS }, 'audit prune');
      if (values.help === true) return { kind: 'help', text: AUDIT_HELP };
      const url = databaseUrl(values, env);
      const retention = setting(values, 'retention-days', env, 'PKG_AUDIT_RETENTION_DAYS');
      return {
        kind: 'audit-prune',
        databaseUrl: url,
        retentionDays: retention === undefined ? 90 : integer(retention.name, retention.value, 1, 36_500),
      };
    }
    default:
      throw new ConfigError('audit', `unknown subcommand ${JSON.stringify(sub)} (expected list or prune)`);
  }
}

/** The command that argv (without node and the script) asks for. Throws ConfigError. */
export function parseCommand(argv: readonly string[], env: Env): Command {
  const [command, ...rest] = argv;
  switch (command) {
    case undefined:
      throw new ConfigError('command', 'required (gen, server, migrate, keys, api-key or audit)');
    case '-h':
    case '--help':
    case 'help':
      return { kind: 'help', text: MAIN_HELP };
    case 'gen':
      return genCommand(rest);
    case 'server':
      return serverCommand(rest, env);
    case 'migrate':
      return migrateCommand(rest, env);
    case 'api-key':
      return apiKeyCommand(rest, env);
    case 'audit':
      return auditCommand(rest, env);
    case 'keys':
      return keysCommand(rest, env);
    default:
      throw new ConfigError(
        'command',
        `unknown command ${JSON.stringify(command)} (expected gen, server, migrate, keys, api-key or audit)`,
      );
  }
}
