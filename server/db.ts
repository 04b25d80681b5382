import { createHash, randomBytes } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import pg from 'pg';
import { ErrorCode, InputError } from 'postguard-ts';
import { insertAudit, type AuditEntry } from './audit.js';

/**
 * API keys for server-to-server signing: the PKG's read-only view of the business service's database.
 *
 * A key is `PG-<opaque>`; the database holds only the lowercase hex SHA-256 of the whole string. A key is
 * valid while its row exists, has not expired, is not revoked and its organisation's status is `active`
 * (a `suspended` or `pending` organisation's keys are refused as unknown ones are). The organisation
 * behind it decides the signing identity through the key's `signing_attrs` flags.
 */

export const DEFAULT_EMAIL_ATTRIBUTE = 'pbdf.sidn-pbdf.email.email';
export const ORGANISATION_NAME_ATTRIBUTE = 'pbdf.pbdf.kvk.displayName';
export const PHONE_ATTRIBUTE = 'pbdf.sidn-pbdf.mobilenumber.mobilenumber';
export const KVK_NUMBER_ATTRIBUTE = 'pbdf.pbdf.kvk.kvkNumber';

/** The `signing_attrs` flags a key may carry. */
export const SIGNING_FLAGS = ['email', 'orgName', 'phone', 'kvkNumber'] as const;
export type SigningFlag = (typeof SIGNING_FLAGS)[number];

export interface ApiKeyRecord {
  /** business_api_keys.id as text (a uuid): the key's id, as `api-key list` shows it. */
  keyId: string;
  /** organizations.id as text (a uuid): the tenant, e.g. for storage quotas. */
  tenantId: string;
  /** The organisation's name when it signs with it (`orgName` flag and a non-empty name), else null. */
  organisationName: string | null;
  publicAttributes: Array<{ t: string; v: string }>;
  /** Always empty: the business schema has no private attributes. */
  privateAttributes: Array<{ t: string; v: string }>;
  /** Signing requests allowed per hour and per day (null: no budget), and whose counters they spend. */
  budgets: KeyBudgets;
}

export interface KeyBudgets {
  perHour: number | null;
  perDay: number | null;
  /** The id the counters are kept under: the key's own, or its predecessor's after a rotation. */
  counter: string;
}

/** PostgreSQL could not answer (down, unreachable, timed out, or the query failed). */
export class DatabaseUnavailableError extends Error {
  readonly code = 'DATABASE_UNAVAILABLE';

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'DatabaseUnavailableError';
  }
}

/** Why a key that is not accepted was refused (for the audit trail; the client hears only API_KEY_INVALID). */
export type ApiKeyRefusal = 'unknown' | 'expired' | 'revoked' | 'organisation-inactive';

/** A lookup's full answer: the record, or the refusal and, when the key exists, its ids. */
export type ApiKeyResolution =
  { ok: true; record: ApiKeyRecord } | { ok: false; reason: ApiKeyRefusal; keyId: string | null; orgId: string | null };

export interface ApiKeyStore {
  /** As lookup, with the reason of a refusal and the ids of a key that exists. Throws DatabaseUnavailableError. */
  resolve(apiKey: string): Promise<ApiKeyResolution>;
  /**
   * The key's record, or undefined for an unknown, expired or revoked key, or one whose organisation is
   * not `active`. Throws DatabaseUnavailableError.
   */
  lookup(apiKey: string): Promise<ApiKeyRecord | undefined>;
  /** Resolves when the database answers; throws DatabaseUnavailableError. */
  ping(): Promise<void>;
  /**
   * Appends one row to the audit trail (server/audit.ts) in the background: a failed write is logged,
   * never fails the request it records. `settled()` waits for the writes begun so far.
   */
  audit(entry: AuditEntry): void;
  settled(): Promise<void>;
  close(): Promise<void>;
}

export interface ApiKeyStoreOptions {
  /** Attribute type of the e-mail in API-key signing identities (PKG_EMAIL_ATTRIBUTE). */
  emailAttribute: string;
  /** Connections in the pool (default 5, as the reference PKG). */
  poolSize?: number;
  /** Give up connecting after this long (default 2 s). */
  connectionTimeoutMs?: number;
  /** Give up on a query after this long (default 5 s; enforced by the server and, +1 s, by the client). */
  statementTimeoutMs?: number;
  logger?: Pick<FastifyBaseLogger, 'warn'>;
}

/** Lowercase hex SHA-256 of the whole key string, as the business service stores it. */
export function apiKeyHash(apiKey: string): string {
  return createHash('sha256').update(apiKey, 'utf8').digest('hex');
}

/** One row of the lookup query. */
export interface ApiKeyRow {
  key_id: string;
  budget_per_hour?: number | null;
  budget_per_day?: number | null;
  budget_key?: string | null;
  tenant_id: string;
  signing_email: string | null;
  name: string | null;
  phone: string | null;
  kvk_number: string | null;
  signing_attrs: unknown;
}

// The row whatever its state, and the state decided in the same statement (one clock: the database's).
const LOOKUP = `
  SELECT k.id::text AS key_id, o.id::text AS tenant_id, o.signing_email, o.name, u.phone, o.kvk_number,
         k.signing_attrs, c.budget_per_hour, c.budget_per_day, c.budget_key::text AS budget_key,
         CASE WHEN k.revoked_at IS NOT NULL THEN 'revoked' WHEN k.expires_at <= now() THEN 'expired'
              WHEN o.status IS DISTINCT FROM 'active' THEN 'organisation-inactive' END AS refusal
  FROM business_api_keys k
  JOIN organizations o ON o.id = k.org_id
  LEFT JOIN users u ON u.id = o.contact_user_id
  LEFT JOIN pg_pkg_api_key_controls c ON c.key_id = k.id
  WHERE k.key_hash = $1`;

const TOUCH = 'UPDATE business_api_keys SET last_used_at = now() WHERE key_hash = $1';

/**
 * The signing identity a key yields: each enabled attribute with a non-empty value, all public, in the
 * reference order (e-mail, organisation name, phone, KvK number). A flag counts only if it is `true`.
 */
export function apiKeyRecord(row: ApiKeyRow, emailAttribute: string): ApiKeyRecord {
  const flags = signingFlags(row.signing_attrs);
  const enabled = (flag: SigningFlag, value: string | null): value is string =>
    flags[flag] === true && value !== null && value !== '';
  const publicAttributes: Array<{ t: string; v: string }> = [];
  if (enabled('email', row.signing_email)) publicAttributes.push({ t: emailAttribute, v: row.signing_email });
  if (enabled('orgName', row.name)) publicAttributes.push({ t: ORGANISATION_NAME_ATTRIBUTE, v: row.name });
  if (enabled('phone', row.phone)) publicAttributes.push({ t: PHONE_ATTRIBUTE, v: row.phone });
  if (enabled('kvkNumber', row.kvk_number)) publicAttributes.push({ t: KVK_NUMBER_ATTRIBUTE, v: row.kvk_number });
  return {
    keyId: row.key_id,
    tenantId: row.tenant_id,
    organisationName: enabled('orgName', row.name) ? row.name : null,
    publicAttributes,
    privateAttributes: [],
    budgets: {
      perHour: row.budget_per_hour ?? null,
      perDay: row.budget_per_day ?? null,
      counter: row.budget_key ?? row.key_id,
    },
  };
}

function signingFlags(value: unknown): Record<string, unknown> {
  // jsonb arrives parsed; a json-in-text column arrives as a string.
  let parsed = value;
  if (typeof value === 'string') {
    try {
      parsed = JSON.parse(value);
    } catch {
      return {};
    }
  }
  return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)
    ? (parsed as Record<string, unknown>)
    : {};
}

/**
 * A pooled store. The pool never needs a restart: connections that break are dropped (idle ones through
 * the pool's 'error' event, busy ones when their query fails) and new ones are opened on demand, so the
 * store answers again as soon as PostgreSQL does.
 */
export function createApiKeyStore(databaseUrl: string, options: ApiKeyStoreOptions): ApiKeyStore {
  const statementTimeoutMs = options.statementTimeoutMs ?? 5000;
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max: options.poolSize ?? 5,
    connectionTimeoutMillis: options.connectionTimeoutMs ?? 2000,
    idleTimeoutMillis: 30_000,
    statement_timeout: statementTimeoutMs,
    // The client-side deadline also covers a server that stopped answering altogether.
    query_timeout: statementTimeoutMs + 1000,
    keepAlive: true,
    application_name: 'pg-pkg',
  });
  // An idle connection that dies emits 'error' on the pool; unheard, it would crash the process.
  pool.on('error', (error) => options.logger?.warn(`API-key database connection lost: ${error.message}`));

  const touches = new Set<Promise<unknown>>();
  const query = async <R extends pg.QueryResultRow>(text: string, values: unknown[]) => {
    try {
      return await pool.query<R>(text, values);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      throw new DatabaseUnavailableError(`API-key database unavailable: ${reason}`, { cause: error });
    }
  };

  const background = (work: Promise<unknown>, what: string) => {
    // Best effort: a failed bookkeeping write must not fail the request it records.
    const tracked: Promise<unknown> = work
      .catch((error: Error) => options.logger?.warn(`could not ${what}: ${error.message}`))
      .finally(() => touches.delete(tracked));
    touches.add(tracked);
  };

  const resolve = async (apiKey: string): Promise<ApiKeyResolution> => {
    const hash = apiKeyHash(apiKey);
    const row = (await query<ApiKeyRow & { refusal: ApiKeyRefusal | null }>(LOOKUP, [hash])).rows[0];
    if (row === undefined) return { ok: false, reason: 'unknown', keyId: null, orgId: null };
    if (row.refusal !== null) return { ok: false, reason: row.refusal, keyId: row.key_id, orgId: row.tenant_id };
    background(pool.query(TOUCH, [hash]), 'record API-key use');
    return { ok: true, record: apiKeyRecord(row, options.emailAttribute) };
  };

  return {
    resolve,
    async lookup(apiKey) {
      const resolution = await resolve(apiKey);
      return resolution.ok ? resolution.record : undefined;
    },
    async ping() {
      await query('SELECT 1', []);
    },
    audit(entry) {
      background(insertAudit(pool, entry), 'write the audit trail');
    },
    async settled() {
      while (touches.size > 0) await Promise.allSettled([...touches]);
    },
    async close() {
      await Promise.allSettled([...touches]);
      await pool.end();
    },
  };
}

export interface NewApiKey {
  /** The organisation's signing e-mail (the value of the e-mail attribute when `email` is enabled). */
  email: string;
  /** Organisation name; the organisation is created when no organisation has this name. */
  org: string;
  /** Default: one year from now. A past date is accepted (the key is then dead on arrival). */
  expiresAt?: Date;
  /** Which attributes the key signs with. Default `{ email: true }`. Unknown flag names are refused. */
  signingAttrs?: Record<string, boolean>;
}

/**
 * Issues a new API key: `PG-` + base64url of 32 random bytes. Only its hash is stored; the returned key
 * cannot be recovered later, so print it once. Refuses (InputError, INVALID_INPUT) an existing
 * organisation whose signing e-mail differs, rather than silently changing what its other keys sign as.
 * Throws DatabaseUnavailableError when PostgreSQL cannot be reached.
 */
export async function createApiKey(databaseUrl: string, input: NewApiKey): Promise<string> {
  return (await issueApiKey(databaseUrl, input)).key;
}

/** A key just issued: the key itself (shown once) and the ids it is known by from now on. */
export interface IssuedApiKey {
  key: string;
  id: string;
  orgId: string;
}

/** createApiKey, also answering the new key's id and its organisation's. */
export async function issueApiKey(databaseUrl: string, input: NewApiKey): Promise<IssuedApiKey> {
  const email = input.email.trim();
  const org = input.org.trim();
  if (email === '') throw new InputError(ErrorCode.INVALID_INPUT, 'the signing e-mail address is empty');
  if (org === '') throw new InputError(ErrorCode.INVALID_INPUT, 'the organisation name is empty');
  const expiresAt = input.expiresAt ?? new Date(Date.now() + 365 * 24 * 3600 * 1000);
  if (Number.isNaN(expiresAt.getTime())) throw new InputError(ErrorCode.INVALID_INPUT, 'expiresAt is not a valid date');
  const signingAttrs = input.signingAttrs ?? { email: true };
  for (const [flag, on] of Object.entries(signingAttrs)) {
    if (!(SIGNING_FLAGS as readonly string[]).includes(flag) || typeof on !== 'boolean') {
      throw new InputError(
        ErrorCode.INVALID_INPUT,
        `signing attribute flag ${JSON.stringify(flag)} is not one of ${SIGNING_FLAGS.join(', ')} with a boolean value`,
      );
    }
  }

  const apiKey = `PG-${randomBytes(32).toString('base64url')}`;
  return withClient(databaseUrl, async (client) => {
    await client.query('BEGIN');
    try {
      const found = await client.query<{ id: string; signing_email: string }>(
        'SELECT id::text, signing_email FROM organizations WHERE name = $1 FOR UPDATE',
        [org],
      );
      let orgId = found.rows[0]?.id;
      if (orgId === undefined) {
        const created = await client.query<{ id: string }>(
          'INSERT INTO organizations (name, signing_email) VALUES ($1, $2) RETURNING id::text',
          [org, email],
        );
        orgId = created.rows[0]?.id;
      } else if (found.rows[0]?.signing_email !== email) {
        throw new InputError(
          ErrorCode.INVALID_INPUT,
          `organisation ${JSON.stringify(org)} already signs as ${JSON.stringify(found.rows[0]?.signing_email)}`,
        );
      }
      const inserted = await client.query<{ id: string }>(
        'INSERT INTO business_api_keys (org_id, key_hash, signing_attrs, expires_at) VALUES ($1, $2, $3, $4) RETURNING id::text',
        [orgId, apiKeyHash(apiKey), JSON.stringify(signingAttrs), expiresAt],
      );
      await client.query('COMMIT');
      return { key: apiKey, id: inserted.rows[0]!.id, orgId: orgId! };
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
  });
}

/** The key's own state; `org-<status>` when the key is live but its organisation is not `active`. */
export type ApiKeyStatus = 'active' | 'expired' | 'revoked' | `org-${string}`;

/** What `pg-pkg api-key list` shows of a key: never the key (unknown here) nor its hash. */
export interface ApiKeyListing {
  /** business_api_keys.id: what `api-key revoke --id` takes. */
  id: string;
  organisation: string;
  signingEmail: string;
  status: ApiKeyStatus;
  createdAt: Date;
  expiresAt: Date;
  revokedAt: Date | null;
  lastUsedAt: Date | null;
}

/** Every API key, oldest first; with `org`, only that organisation's. Throws DatabaseUnavailableError. */
export async function listApiKeys(databaseUrl: string, filter: { org?: string } = {}): Promise<ApiKeyListing[]> {
  return withClient(databaseUrl, async (client) => {
    const result = await client.query<ApiKeyListing>(
      `SELECT k.id::text AS id, o.name AS organisation, o.signing_email AS "signingEmail",
              CASE WHEN k.revoked_at IS NOT NULL THEN 'revoked' WHEN k.expires_at <= now() THEN 'expired'
                   WHEN o.status IS DISTINCT FROM 'active' THEN 'org-' || coalesce(o.status, 'null') ELSE 'active' END AS status,
              k.created_at AS "createdAt", k.expires_at AS "expiresAt", k.revoked_at AS "revokedAt", k.last_used_at AS "lastUsedAt"
       FROM business_api_keys k JOIN organizations o ON o.id = k.org_id
       WHERE $1::text IS NULL OR o.name = $1
       ORDER BY k.created_at, k.id`,
      [filter.org?.trim() ?? null],
    );
    return result.rows;
  });
}

/** A key by its row id (as listed) or by the key itself (hashed here; for a key whose id is not at hand). */
export type ApiKeyRef = { id: string } | { key: string };

export type RevokeOutcome =
  { outcome: 'revoked' | 'already-revoked'; id: string; orgId: string } | { outcome: 'unknown' };

/**
 * Revokes a key from now on: the PKG refuses it at its next lookup (there is no cache). Revoking twice
 * keeps the first time. Throws DatabaseUnavailableError.
 */
export async function revokeApiKey(databaseUrl: string, ref: ApiKeyRef): Promise<RevokeOutcome> {
  const [column, value] = 'id' in ref ? ['id', ref.id] : ['key_hash', apiKeyHash(ref.key)];
  return withClient(databaseUrl, async (client) => {
    // One statement: the row as it was, and whether this call is the one that revoked it.
    const result = await client.query<{ id: string; org_id: string; revoked_before: boolean }>(
      `WITH target AS (SELECT id, org_id, revoked_at IS NOT NULL AS revoked_before FROM business_api_keys WHERE ${column} = $1),
            done AS (UPDATE business_api_keys k SET revoked_at = now() FROM target t WHERE k.id = t.id AND NOT t.revoked_before)
       SELECT id::text, org_id::text, revoked_before FROM target`,
      [value],
    );
    const row = result.rows[0];
    if (row === undefined) return { outcome: 'unknown' };
    return { outcome: row.revoked_before ? 'already-revoked' : 'revoked', id: row.id, orgId: row.org_id };
  });
}

/**
 * One short-lived connection (for the CLI and migrations, where a pool is not worth it). A failure to
 * connect is a DatabaseUnavailableError; errors of `use` propagate as they are.
 */
export async function withClient<T>(databaseUrl: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  let client: pg.Client;
  try {
    client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5000 });
    client.on('error', () => undefined); // reported through the failing query instead
    await client.connect();
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new DatabaseUnavailableError(`cannot connect to the database: ${reason}`, { cause: error });
  }
  try {
    return await use(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}
