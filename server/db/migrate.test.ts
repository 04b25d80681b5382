import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import {
  apiKeyHash,
  createApiKey,
  createApiKeyStore,
  DatabaseUnavailableError,
  listApiKeys,
  revokeApiKey,
} from '../db.js';
import {
  loadMigrations,
  migrate,
  MIGRATIONS_TABLE,
  requireCurrentSchema,
  schemaProblem,
  schemaState,
  SchemaError,
  type Migration,
} from './migrate.js';
import { closedPort, createTestSchema, withPort, type TestSchema } from './testing.js';

/**
 * Migrations against the real PostgreSQL, each test in a fresh, empty schema of its own: from nothing to
 * current, again (nothing to do), two runs at once (each migration applied once), a database ahead of
 * the code, one behind it, a migration that fails halfway.
 */

const EMAIL = 'irma-demo.sidn-pbdf.email.email';
const schemas: TestSchema[] = [];

async function emptySchema(): Promise<TestSchema> {
  const schema = await createTestSchema(undefined, { migrated: false });
  schemas.push(schema);
  return schema;
}

async function query<R extends pg.QueryResultRow>(url: string, text: string, values: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<R>(text, values)).rows;
  } finally {
    await client.end();
  }
}

const recorded = (url: string) =>
  query<{ version: number; name: string; applied_at: Date }>(
    url,
    `SELECT version, name, applied_at FROM ${MIGRATIONS_TABLE} ORDER BY version`,
  );

afterAll(async () => {
  await Promise.all(schemas.map((s) => s.drop()));
});

describe('the shipped migrations', () => {
  it('run 1, 2, 3… from 0001_initial', async () => {
    const migrations = await loadMigrations();
    expect(migrations[0]).toMatchObject({ version: 1, name: 'initial' });
    expect(migrations[0]!.sql).toContain('CREATE TABLE IF NOT EXISTS business_api_keys');
    expect(migrations.map((m) => m.version)).toEqual(migrations.map((_, i) => i + 1));
  });

  describe('a directory that breaks the rules is refused', () => {
    let dir: string;
    afterEach(() => rm(dir, { recursive: true, force: true }));

    it.each([
      [['0001_initial.sql', '0003_skipped.sql'], /out of sequence/],
      [['0002_first.sql'], /out of sequence/],
      [['0001_Initial-Tables.sql'], /not named NNNN_name\.sql/],
    ])('%j', async (files, problem) => {
      dir = await mkdtemp(join(tmpdir(), 'pg-pkg-migrations-'));
      for (const file of files) await writeFile(join(dir, file), 'SELECT 1;');
      await expect(loadMigrations(pathToFileURL(`${dir}/`))).rejects.toThrow(problem);
    });
  });
});

describe('migrate', () => {
  it('takes a fresh database to the current version; then API keys can be created, listed and revoked', async () => {
    const { url } = await emptySchema();
    expect(await schemaState(url)).toMatchObject({ kind: 'missing' });
    await expect(requireCurrentSchema(url)).rejects.toThrow(
      new SchemaError('database schema missing: run `pg-pkg migrate`'),
    );

    const latest = (await loadMigrations()).length;
    const run = await migrate(url);
    expect(run.applied.map((m) => m.version)).toEqual(Array.from({ length: latest }, (_, i) => i + 1));
    expect(run.version).toBe(latest);
    expect(await schemaState(url)).toEqual({ kind: 'current', version: latest });
    await requireCurrentSchema(url);
    expect((await recorded(url)).map((r) => [r.version, r.name])).toEqual(run.applied.map((m) => [m.version, m.name]));

    const key = await createApiKey(url, { email: 'sender@example.org', org: 'Example BV' });
    const [listed] = await listApiKeys(url);
    expect(listed).toMatchObject({
      organisation: 'Example BV',
      signingEmail: 'sender@example.org',
      status: 'active',
      revokedAt: null,
    });
    const store = createApiKeyStore(url, { emailAttribute: EMAIL });
    try {
      expect(await store.lookup(key)).toBeDefined();
      expect(await revokeApiKey(url, { id: listed!.id })).toMatchObject({ outcome: 'revoked', id: listed!.id });
      expect(await store.lookup(key)).toBeUndefined();
    } finally {
      await store.close();
    }
    expect((await listApiKeys(url))[0]).toMatchObject({ status: 'revoked', revokedAt: expect.any(Date) });
  });

  it("adopts a business database whose organisations already have a status, keeping it; new ones are 'active'", async () => {
    const { url } = await emptySchema();
    // The business service made its tables (status included) before the PKG's first migration.
    const shipped = await loadMigrations();
    await query(url, shipped[0]!.sql);
    await query(url, "ALTER TABLE organizations ADD COLUMN status text NOT NULL DEFAULT 'pending'");
    await query(
      url,
      "INSERT INTO organizations (name, signing_email, status) VALUES ('Old BV', 'o@example.org', 'suspended')",
    );
    await migrate(url);
    expect(await query(url, 'SELECT name, status FROM organizations')).toEqual([
      { name: 'Old BV', status: 'suspended' },
    ]);
    const key = await createApiKey(url, { email: 'o@example.org', org: 'Old BV' });
    expect((await listApiKeys(url))[0]).toMatchObject({ status: 'org-suspended' });
    const store = createApiKeyStore(url, { emailAttribute: EMAIL });
    try {
      expect(await store.lookup(key)).toBeUndefined();
      await query(url, "UPDATE organizations SET status = 'active'");
      expect(await store.lookup(key)).toBeDefined();
    } finally {
      await store.close();
    }

    // On a database of our own, migration 2 makes every existing organisation active.
    const fresh = await emptySchema();
    await migrate(fresh.url, shipped.slice(0, 1));
    const older = await createApiKey(fresh.url, { email: 'a@example.org', org: 'Org A' });
    await migrate(fresh.url);
    expect(await query(fresh.url, 'SELECT status FROM organizations')).toEqual([{ status: 'active' }]);
    const freshStore = createApiKeyStore(fresh.url, { emailAttribute: EMAIL });
    try {
      expect(await freshStore.lookup(older)).toBeDefined();
    } finally {
      await freshStore.close();
    }
  });

  it('a second run is a no-op: nothing applied, nothing recorded again', async () => {
    const { url } = await emptySchema();
    await migrate(url);
    const before = await recorded(url);
    const again = await migrate(url);
    expect(again.applied).toEqual([]);
    expect(await recorded(url)).toEqual(before);
  });

  it('two runs at once both succeed and apply each migration exactly once (the advisory lock)', async () => {
    const { url } = await emptySchema();
    // A slow migration that cannot run twice: without the lock, the second run would fail on it
    // (duplicate table, or a duplicate version row) instead of waiting and finding it done.
    const migrations: Migration[] = [
      ...(await loadMigrations()),
      { version: 0, name: 'slow', sql: 'SELECT pg_sleep(0.3); CREATE TABLE slow_marker (id int);' },
    ].map((m, i) => ({ ...m, version: i + 1 }));
    const runs = await Promise.all([migrate(url, migrations), migrate(url, migrations)]);
    const applied = runs.flatMap((r) => r.applied.map((m) => m.version)).sort((a, b) => a - b);
    expect(applied).toEqual(migrations.map((m) => m.version));
    // One run did everything: the other waited for the lock, then found nothing to do.
    expect(runs.map((r) => r.applied.length).sort()).toEqual([0, migrations.length]);
    expect((await recorded(url)).map((r) => r.version)).toEqual(migrations.map((m) => m.version));
  });

  it('the shipped migrations, run by two processes at once on a fresh database', async () => {
    const { url } = await emptySchema();
    const runs = await Promise.all([migrate(url), migrate(url)]);
    expect(runs.flatMap((r) => r.applied).length).toBe((await loadMigrations()).length);
    expect(await schemaState(url)).toMatchObject({ kind: 'current' });
  });

  it('refuses a database whose recorded version is newer than this code knows, and changes nothing', async () => {
    const { url } = await emptySchema();
    await migrate(url);
    const latest = (await loadMigrations()).length;
    await query(url, `INSERT INTO ${MIGRATIONS_TABLE} (version, name) VALUES ($1, 'from_the_future')`, [latest + 1]);
    expect(await schemaState(url)).toEqual({ kind: 'ahead', version: latest + 1, latest });
    const problem = `database schema is at version ${latest + 1}, newer than this pg-pkg knows (${latest}): upgrade pg-pkg`;
    await expect(migrate(url)).rejects.toThrow(new SchemaError(problem));
    await expect(requireCurrentSchema(url)).rejects.toThrow(new SchemaError(problem));
    expect(await recorded(url)).toHaveLength(latest + 1);
  });

  it('a database behind the code is named as such, and caught up by migrate', async () => {
    const { url } = await emptySchema();
    const shipped = await loadMigrations();
    await migrate(url, shipped);
    const newer = [
      ...shipped,
      { version: shipped.length + 1, name: 'add_note', sql: 'ALTER TABLE organizations ADD COLUMN note text;' },
    ];
    const state = await schemaState(url, newer);
    expect(state).toMatchObject({ kind: 'behind', version: shipped.length, latest: newer.length });
    expect(schemaProblem(state)).toBe(
      `database schema is at version ${shipped.length}, this pg-pkg needs ${newer.length}: run \`pg-pkg migrate\``,
    );
    expect((await migrate(url, newer)).applied.map((m) => m.name)).toEqual(['add_note']);
    await requireCurrentSchema(url, newer);
  });

  it('a migration that fails is rolled back whole, named in the error, and leaves the lock free', async () => {
    const { url } = await emptySchema();
    const shipped = await loadMigrations();
    const broken = [
      ...shipped,
      { version: shipped.length + 1, name: 'broken', sql: 'CREATE TABLE half (id int); SELECT no_such_function();' },
    ];
    const failure = migrate(url, broken);
    await expect(failure).rejects.toBeInstanceOf(SchemaError);
    await expect(failure).rejects.toThrow(
      /^migration 000\d_broken failed: function no_such_function\(\) does not exist$/,
    );
    expect(await query(url, "SELECT to_regclass('half') AS t")).toEqual([{ t: null }]);
    expect((await recorded(url)).map((r) => r.version)).toEqual(shipped.map((m) => m.version));
    expect((await migrate(url)).applied).toEqual([]);
  });

  it('an unreachable database is DatabaseUnavailableError', async () => {
    const { url } = await emptySchema();
    const dead = withPort(url, await closedPort());
    await expect(migrate(dead)).rejects.toBeInstanceOf(DatabaseUnavailableError);
    await expect(schemaState(dead)).rejects.toBeInstanceOf(DatabaseUnavailableError);
  });
});

describe('revokeApiKey', () => {
  it('by id or by the key itself; a second revocation keeps the first time; unknown keys are said to be so', async () => {
    const { url } = await emptySchema();
    await migrate(url);
    const key = await createApiKey(url, { email: 'a@example.org', org: 'Org A' });
    const [row] = await query<{ id: string }>(url, 'SELECT id::text FROM business_api_keys WHERE key_hash = $1', [
      apiKeyHash(key),
    ]);
    const id = row!.id;
    expect(await revokeApiKey(url, { key })).toMatchObject({ outcome: 'revoked', id });
    const [first] = await query<{ revoked_at: Date }>(url, 'SELECT revoked_at FROM business_api_keys');
    expect(await revokeApiKey(url, { id })).toMatchObject({ outcome: 'already-revoked', id });
    expect(await query(url, 'SELECT revoked_at FROM business_api_keys')).toEqual([first]);
    expect(await revokeApiKey(url, { id: '00000000-0000-0000-0000-000000000000' })).toEqual({ outcome: 'unknown' });
    expect(await revokeApiKey(url, { key: 'PG-unknown' })).toEqual({ outcome: 'unknown' });
  });

  it('list filters by organisation and tells expired from active', async () => {
    const { url } = await emptySchema();
    await migrate(url);
    await createApiKey(url, { email: 'a@example.org', org: 'Org A' });
    await createApiKey(url, { email: 'b@example.org', org: 'Org B', expiresAt: new Date(Date.now() - 1000) });
    expect((await listApiKeys(url)).map((k) => [k.organisation, k.status])).toEqual([
      ['Org A', 'active'],
      ['Org B', 'expired'],
    ]);
    expect((await listApiKeys(url, { org: 'Org B' })).map((k) => k.signingEmail)).toEqual(['b@example.org']);
  });
});
