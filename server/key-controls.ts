import { randomBytes } from 'node:crypto';
import { AUDIT_TABLE } from './audit.js';
import { apiKeyHash, withClient, type ApiKeyStatus } from './db.js';

/**
 * What `pg-pkg api-key budget | rotate | info` do to a key, in the PKG's own table
 * `pg_pkg_api_key_controls` (migration 4) and, for rotation, the business service's `business_api_keys`
 * (a new row, and the old row's expiry brought forward, as `create` and `revoke` already write there).
 */

/** A budget to set: a positive count, null to remove it, undefined to leave it as it is. */
export interface BudgetChange {
  perHour?: number | null;
  perDay?: number | null;
}

export type BudgetOutcome =
  { outcome: 'set'; id: string; orgId: string; perHour: number | null; perDay: number | null } | { outcome: 'unknown' };

/** Sets or removes a key's budgets; the PKG applies them from the key's next request. */
export async function setBudgets(databaseUrl: string, id: string, change: BudgetChange): Promise<BudgetOutcome> {
  return withClient(databaseUrl, async (client) => {
    const result = await client.query<{ id: string; org_id: string; per_hour: number | null; per_day: number | null }>(
      `WITH target AS (SELECT id, org_id FROM business_api_keys WHERE id = $1::uuid)
       INSERT INTO pg_pkg_api_key_controls AS c (key_id, budget_per_hour, budget_per_day, budget_key)
       SELECT id, CASE WHEN $2 THEN $3::integer END, CASE WHEN $4 THEN $5::integer END, id FROM target
       ON CONFLICT (key_id) DO UPDATE SET
         budget_per_hour = CASE WHEN $2 THEN $3::integer ELSE c.budget_per_hour END,
         budget_per_day = CASE WHEN $4 THEN $5::integer ELSE c.budget_per_day END,
         updated_at = now()
       RETURNING key_id::text AS id, (SELECT org_id::text FROM target) AS org_id,
                 budget_per_hour AS per_hour, budget_per_day AS per_day`,
      [id, change.perHour !== undefined, change.perHour ?? null, change.perDay !== undefined, change.perDay ?? null],
    );
    const row = result.rows[0];
    if (row === undefined) return { outcome: 'unknown' };
    return { outcome: 'set', id: row.id, orgId: row.org_id, perHour: row.per_hour, perDay: row.per_day };
  });
}

export type RotateOutcome =
  | { outcome: 'rotated'; key: string; id: string; oldId: string; orgId: string; oldStopsAt: Date }
  | { outcome: 'unknown' }
  | { outcome: 'not-active'; status: ApiKeyStatus };

/**
 * Replaces a live key: a new key for the same organisation with the same signing attributes, budgets
 * and budget counters, valid for a year (or as long as the old one, if that is longer); the old key keeps
 * signing for `graceMs` (0: it stops now), never longer than it would have anyway. One transaction.
 * Refuses a key that is revoked or expired (`not-active`; a suspended organisation's key may be rotated).
 */
export async function rotateApiKey(databaseUrl: string, id: string, graceMs: number): Promise<RotateOutcome> {
  const apiKey = `PG-${randomBytes(32).toString('base64url')}`;
  return withClient(databaseUrl, async (client) => {
    await client.query('BEGIN');
    try {
      const old = await client.query<{ org_id: string; state: ApiKeyStatus }>(
        `SELECT org_id::text,
                CASE WHEN revoked_at IS NOT NULL THEN 'revoked' WHEN expires_at <= now() THEN 'expired' ELSE 'active' END AS state
         FROM business_api_keys WHERE id = $1::uuid FOR UPDATE`,
        [id],
      );
      const row = old.rows[0];
      if (row === undefined) {
        await client.query('ROLLBACK');
        return { outcome: 'unknown' };
      }
      if (row.state !== 'active') {
        await client.query('ROLLBACK');
        return { outcome: 'not-active', status: row.state };
      }
      const inserted = await client.query<{ id: string }>(
        `INSERT INTO business_api_keys (org_id, key_hash, signing_attrs, expires_at)
         SELECT org_id, $2, signing_attrs, greatest(expires_at, now() + interval '1 year')
         FROM business_api_keys WHERE id = $1::uuid
         RETURNING id::text`,
        [id, apiKeyHash(apiKey)],
      );
      const newId = inserted.rows[0]!.id;
      await client.query(
        `INSERT INTO pg_pkg_api_key_controls (key_id, budget_per_hour, budget_per_day, budget_key, rotated_from)
         SELECT $2::uuid, c.budget_per_hour, c.budget_per_day, coalesce(c.budget_key, $1::uuid), $1::uuid
         FROM (SELECT 1) one LEFT JOIN pg_pkg_api_key_controls c ON c.key_id = $1::uuid`,
        [id, newId],
      );
      const stops = await client.query<{ expires_at: Date }>(
        `UPDATE business_api_keys SET expires_at = least(expires_at, now() + make_interval(secs => $2::double precision / 1000))
         WHERE id = $1::uuid RETURNING expires_at`,
        [id, graceMs],
      );
      await client.query('COMMIT');
      return {
        outcome: 'rotated',
        key: apiKey,
        id: newId,
        oldId: id,
        orgId: row.org_id,
        oldStopsAt: stops.rows[0]!.expires_at,
      };
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
  });
}

/** Requests of one key in the audit trail (within its retention): allowed and refused. */
export interface KeyCounts {
  lastHour: { allowed: number; refused: number };
  lastDay: { allowed: number; refused: number };
  retained: { allowed: number; refused: number };
}

export interface ApiKeyInfo {
  id: string;
  status: ApiKeyStatus;
  organisation: { id: string; name: string; status: string | null; signingEmail: string };
  signingAttrs: unknown;
  createdAt: Date;
  expiresAt: Date;
  revokedAt: Date | null;
  lastUsedAt: Date | null;
  budgets: { perHour: number | null; perDay: number | null; sharedWith: string | null };
  rotatedFrom: string | null;
  rotatedTo: string[];
  counts: KeyCounts;
}

/** Everything the PKG knows of one key (never the key, nor its hash); undefined for an unknown id. */
export async function apiKeyInfo(databaseUrl: string, id: string): Promise<ApiKeyInfo | undefined> {
  return withClient(databaseUrl, async (client) => {
    const found = await client.query<Omit<ApiKeyInfo, 'counts' | 'rotatedTo'>>(
      `SELECT k.id::text AS id,
              CASE WHEN k.revoked_at IS NOT NULL THEN 'revoked' WHEN k.expires_at <= now() THEN 'expired'
                   WHEN o.status IS DISTINCT FROM 'active' THEN 'org-' || coalesce(o.status, 'null') ELSE 'active' END AS status,
              json_build_object('id', o.id::text, 'name', o.name, 'status', o.status, 'signingEmail', o.signing_email) AS organisation,
              k.signing_attrs AS "signingAttrs", k.created_at AS "createdAt", k.expires_at AS "expiresAt",
              k.revoked_at AS "revokedAt", k.last_used_at AS "lastUsedAt",
              json_build_object('perHour', c.budget_per_hour, 'perDay', c.budget_per_day,
                                'sharedWith', CASE WHEN c.budget_key <> k.id THEN c.budget_key::text END) AS budgets,
              c.rotated_from::text AS "rotatedFrom"
       FROM business_api_keys k JOIN organizations o ON o.id = k.org_id
       LEFT JOIN pg_pkg_api_key_controls c ON c.key_id = k.id
       WHERE k.id = $1::uuid`,
      [id],
    );
    const info = found.rows[0];
    if (info === undefined) return undefined;
    const successors = await client.query<{ id: string }>(
      'SELECT key_id::text AS id FROM pg_pkg_api_key_controls WHERE rotated_from = $1::uuid ORDER BY updated_at',
      [id],
    );
    const counts = await client.query<{ span_name: string; outcome: string; n: number }>(
      `SELECT w.span_name, a.outcome, count(*)::integer AS n
       FROM ${AUDIT_TABLE} a
       CROSS JOIN (VALUES ('lastHour', interval '1 hour'), ('lastDay', interval '1 day'), ('retained', NULL)) AS w(span_name, span)
       WHERE a.key_id = $1 AND a.source = 'http' AND (w.span IS NULL OR a.at >= now() - w.span)
       GROUP BY w.span_name, a.outcome`,
      [id],
    );
    const zero = () => ({ allowed: 0, refused: 0 });
    const tally: KeyCounts = { lastHour: zero(), lastDay: zero(), retained: zero() };
    for (const { span_name: span, outcome, n } of counts.rows) {
      tally[span as keyof KeyCounts][outcome as 'allowed' | 'refused'] = n;
    }
    return { ...info, rotatedTo: successors.rows.map((r) => r.id), counts: tally };
  });
}
