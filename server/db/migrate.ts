import { readdir, readFile } from 'node:fs/promises';
import type pg from 'pg';
import { withClient } from '../db.js';

/**
 * Versioned schema migrations: `server/db/migrations/NNNN_name.sql`, applied in order, each in its own
 * transaction, each recorded in `pg_pkg_schema_migrations`. A run holds a PostgreSQL advisory lock for
 * its whole length, so instances that start together (`pg-pkg migrate`, or `server --migrate`) take
 * turns: the first applies what is missing, the others find nothing left to do.
 *
 * The files are read at run time from `./migrations/` beside this module, which is the same relative
 * place in the sources and in dist/ (the package build copies them).
 */

export const MIGRATIONS_TABLE = 'pg_pkg_schema_migrations';

export interface Migration {
  version: number;
  /** The file name without version and extension, e.g. "initial". */
  name: string;
  sql: string;
}

/** An operator-facing problem with the schema: one line, printed as it is (exit code 1). */
export class SchemaError extends Error {
  override readonly name = 'SchemaError';
}

const FILE_NAME = /^(\d{4})_([a-z0-9_]+)\.sql$/;
const MIGRATIONS_DIR = new URL('./migrations/', import.meta.url);

/** The migrations this pg-pkg knows, in order. Versions must run 1, 2, 3… without gaps (a bug otherwise). */
export async function loadMigrations(dir: URL = MIGRATIONS_DIR): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.sql')).sort();
  const migrations: Migration[] = [];
  for (const file of files) {
    const match = FILE_NAME.exec(file);
    if (match === null) throw new Error(`migration file ${file} is not named NNNN_name.sql`);
    const version = Number(match[1]);
    if (version !== migrations.length + 1)
      throw new Error(`migration ${file} is out of sequence (expected version ${migrations.length + 1})`);
    migrations.push({ version, name: match[2]!, sql: await readFile(new URL(file, dir), 'utf8') });
  }
  return migrations;
}

export const migrationLabel = (m: Pick<Migration, 'version' | 'name'>): string =>
  `${String(m.version).padStart(4, '0')}_${m.name}`;

export type SchemaState =
  | { kind: 'missing'; latest: number }
  | { kind: 'behind'; version: number; latest: number; pending: Migration[] }
  | { kind: 'current'; version: number }
  | { kind: 'ahead'; version: number; latest: number };

async function appliedVersions(client: pg.ClientBase): Promise<number[] | undefined> {
  const table = await client.query<{ present: boolean }>('SELECT to_regclass($1) IS NOT NULL AS present', [
    MIGRATIONS_TABLE,
  ]);
  if (table.rows[0]?.present !== true) return undefined;
  const rows = await client.query<{ version: number }>(`SELECT version FROM ${MIGRATIONS_TABLE} ORDER BY version`);
  return rows.rows.map((r) => r.version);
}

function stateOf(applied: number[] | undefined, migrations: Migration[]): SchemaState {
  const latest = migrations.length;
  if (applied === undefined || applied.length === 0) return { kind: 'missing', latest };
  const version = Math.max(...applied);
  if (version > latest) return { kind: 'ahead', version, latest };
  const done = new Set(applied);
  const pending = migrations.filter((m) => !done.has(m.version));
  return pending.length === 0 ? { kind: 'current', version } : { kind: 'behind', version, latest, pending };
}

/** The one line an operator sees for a schema this pg-pkg cannot work with; undefined when it can. */
export function schemaProblem(state: SchemaState): string | undefined {
  switch (state.kind) {
    case 'current':
      return undefined;
    case 'missing':
      return 'database schema missing: run `pg-pkg migrate`';
    case 'behind':
      return `database schema is at version ${state.version}, this pg-pkg needs ${state.latest}: run \`pg-pkg migrate\``;
    case 'ahead':
      return `database schema is at version ${state.version}, newer than this pg-pkg knows (${state.latest}): upgrade pg-pkg`;
  }
}

/** Reads where the database stands, without changing anything. Throws DatabaseUnavailableError. */
export async function schemaState(databaseUrl: string, migrations?: Migration[]): Promise<SchemaState> {
  const known = migrations ?? (await loadMigrations());
  return withClient(databaseUrl, async (client) => stateOf(await appliedVersions(client), known));
}

/** Throws SchemaError (with the one line) unless the schema is exactly what this pg-pkg expects. */
export async function requireCurrentSchema(databaseUrl: string, migrations?: Migration[]): Promise<void> {
  const problem = schemaProblem(await schemaState(databaseUrl, migrations));
  if (problem !== undefined) throw new SchemaError(problem);
}

export interface MigrationRun {
  /** What this run applied (empty when another run, or an earlier one, had done it all). */
  applied: Migration[];
  version: number;
}

// Advisory locks are per database; the second key is the schema, so that schemas of one database
// (tests, or several PKGs sharing a server) migrate independently.
const LOCK_CLASS = 0x70676b67; // "pgkg"
const LOCK = `$1::integer, hashtext(coalesce(current_schema(), ''))`;

/**
 * Brings the schema up to date. Safe to run from several processes at once and as often as wanted.
 * Refuses (SchemaError) a database whose recorded version is newer than the newest migration known
 * here, and stops at the first migration that fails (SchemaError naming it; that migration is rolled
 * back, the ones before it stay). Throws DatabaseUnavailableError when PostgreSQL cannot be reached.
 */
export async function migrate(databaseUrl: string, migrations?: Migration[]): Promise<MigrationRun> {
  const known = migrations ?? (await loadMigrations());
  return withClient(databaseUrl, async (client) => {
    // Session-level: held across the transactions below, released by the unlock or by the
    // connection closing, whichever comes first.
    await client.query(`SELECT pg_advisory_lock(${LOCK})`, [LOCK_CLASS]);
    try {
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${MIGRATIONS_TABLE} (
           version integer PRIMARY KEY,
           name text NOT NULL,
           applied_at timestamptz NOT NULL DEFAULT now()
         )`,
      );
      const state = stateOf(await appliedVersions(client), known);
      if (state.kind === 'ahead') throw new SchemaError(schemaProblem(state)!);
      const pending = state.kind === 'missing' ? known : state.kind === 'behind' ? state.pending : [];
      for (const migration of pending) await apply(client, migration);
      return { applied: pending, version: known.length };
    } finally {
      await client.query(`SELECT pg_advisory_unlock(${LOCK})`, [LOCK_CLASS]).catch(() => undefined);
    }
  });
}

async function apply(client: pg.ClientBase, migration: Migration): Promise<void> {
  await client.query('BEGIN');
  try {
    await client.query(migration.sql);
    await client.query(`INSERT INTO ${MIGRATIONS_TABLE} (version, name) VALUES ($1, $2)`, [
      migration.version,
      migration.name,
    ]);
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    const reason = error instanceof Error ? error.message : String(error);
    throw new SchemaError(`migration ${migrationLabel(migration)} failed: ${reason}`, { cause: error });
  }
}
