import { hostname, userInfo } from 'node:os';
import type pg from 'pg';
import { withClient } from './db.js';

/**
 * The PKG's audit trail: one append-only table of our own, `pg_pkg_audit` (migration 3), beside the
 * business service's tables and never in them. A row is written
 * - by the server for every request to an audited route (signing keys, API-key validation), allowed or
 *   refused, refusals by the rate limiter and the per-key budgets included: time, operation, outcome,
 *   error code, key id and organisation id (when the key is known), client address and user agent;
 * - by `pg-pkg` for every `api-key` command and every `audit prune`: who ran it (the OS user) and from
 *   where (the host, and the SSH client when there is one).
 * Never key material: no API key, no hash of one, no issued key, no JWT. The table refuses UPDATE and
 * TRUNCATE, and DELETE outside `pruneAudit` (a trigger; the database role is the real guard, see
 * server/README.md).
 */

export const AUDIT_TABLE = 'pg_pkg_audit';

/** The longest user agent kept (longer ones are cut; it is the client's own text). */
export const USER_AGENT_MAX = 512;

export interface AuditEntry {
  /** `http` for a request, `command` for a pg-pkg command. */
  source: 'http' | 'command';
  /** `sign/key`, `api-key/validate`; `api-key create`, `api-key rotate`, `audit prune`, … */
  operation: string;
  outcome: 'allowed' | 'refused';
  /** The PKG error code of a refused request, or the command's (e.g. UNKNOWN_KEY). */
  errorCode?: string | null;
  keyId?: string | null;
  orgId?: string | null;
  clientAddress?: string | null;
  userAgent?: string | null;
  osUser?: string | null;
  host?: string | null;
  /** Anything else worth keeping (the route, the credential kind, a refusal's reason, a command's options). */
  details?: Record<string, unknown>;
}

export interface AuditRow extends Required<Omit<AuditEntry, 'details'>> {
  id: string;
  at: Date;
  details: Record<string, unknown>;
}

const INSERT = `INSERT INTO ${AUDIT_TABLE}
  (source, operation, outcome, error_code, key_id, org_id, client_address, user_agent, os_user, host, details)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`;

// Control characters would break `audit list`'s columns and terminals; they are not worth keeping.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/g;

const clean = (value: string | null | undefined, max = 256): string | null =>
  value === undefined || value === null ? null : value.replace(CONTROL, ' ').slice(0, max);

/** Appends one row. Throws what pg throws. */
export async function insertAudit(db: Pick<pg.Pool | pg.ClientBase, 'query'>, entry: AuditEntry): Promise<void> {
  await db.query(INSERT, [
    entry.source,
    entry.operation,
    entry.outcome,
    clean(entry.errorCode, 64),
    clean(entry.keyId, 64),
    clean(entry.orgId, 64),
    clean(entry.clientAddress, 64),
    clean(entry.userAgent, USER_AGENT_MAX),
    clean(entry.osUser, 128),
    clean(entry.host, 256),
    JSON.stringify(entry.details ?? {}),
  ]);
}

/** Who runs this process and from where, for a command's row. */
export function commandActor(env: Readonly<Record<string, string | undefined>> = process.env): {
  osUser: string;
  host: string;
  details: Record<string, unknown>;
} {
  let osUser: string;
  try {
    osUser = userInfo().username;
  } catch {
    // A container user without a passwd entry.
    osUser = env['USER'] ?? env['LOGNAME'] ?? `uid ${process.getuid?.() ?? '?'}`;
  }
  const ssh = env['SSH_CONNECTION']?.split(' ')[0];
  return { osUser, host: hostname(), details: ssh === undefined || ssh === '' ? {} : { sshClient: ssh } };
}

/** Appends one row on a connection of its own (the commands' way). */
export function recordCommand(databaseUrl: string, entry: Omit<AuditEntry, 'source'>): Promise<void> {
  return withClient(databaseUrl, (client) => insertAudit(client, { source: 'command', ...entry }));
}

export interface AuditQuery {
  since: Date;
  until?: Date | undefined;
  keyId?: string | undefined;
  /** At most this many rows, the oldest first (default 1000). */
  limit?: number | undefined;
}

/** Rows from `since` (inclusive) to `until` (exclusive), oldest first. Throws DatabaseUnavailableError. */
export async function listAudit(databaseUrl: string, query: AuditQuery): Promise<AuditRow[]> {
  return withClient(databaseUrl, async (client) => {
    const result = await client.query<AuditRow>(
      `SELECT id::text, at, source, operation, outcome, error_code AS "errorCode", key_id AS "keyId",
              org_id AS "orgId", client_address AS "clientAddress", user_agent AS "userAgent",
              os_user AS "osUser", host, details
       FROM ${AUDIT_TABLE}
       WHERE at >= $1 AND ($2::timestamptz IS NULL OR at < $2) AND ($3::text IS NULL OR key_id = $3)
       ORDER BY at, id
       LIMIT $4`,
      [query.since, query.until ?? null, query.keyId ?? null, query.limit ?? 1000],
    );
    return result.rows;
  });
}

export const DEFAULT_AUDIT_RETENTION_DAYS = 90;

/**
 * Deletes the rows older than `retentionDays` (whole days, at least 1) and records who did, in one
 * transaction. Answers how many rows went. Throws DatabaseUnavailableError.
 */
export async function pruneAudit(
  databaseUrl: string,
  retentionDays: number,
  actor: Pick<AuditEntry, 'osUser' | 'host' | 'details'> = {},
): Promise<number> {
  if (!Number.isInteger(retentionDays) || retentionDays < 1)
    throw new RangeError('retention is whole days, at least 1');
  return withClient(databaseUrl, async (client) => {
    await client.query('BEGIN');
    try {
      // The trigger lets a DELETE through only inside a transaction that says it prunes.
      await client.query("SET LOCAL pg_pkg.audit_prune = 'on'");
      const deleted = await client.query(`DELETE FROM ${AUDIT_TABLE} WHERE at < now() - make_interval(days => $1)`, [
        retentionDays,
      ]);
      await client.query("SET LOCAL pg_pkg.audit_prune = 'off'");
      const pruned = deleted.rowCount ?? 0;
      await insertAudit(client, {
        source: 'command',
        operation: 'audit prune',
        outcome: 'allowed',
        ...actor,
        details: { ...actor.details, retentionDays, pruned },
      });
      await client.query('COMMIT');
      return pruned;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
  });
}
