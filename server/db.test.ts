import { createServer, type Socket } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InputError } from '../lib/errors.js';
import {
  apiKeyHash,
  apiKeyRecord,
  createApiKey,
  createApiKeyStore,
  DatabaseUnavailableError,
  DEFAULT_EMAIL_ATTRIBUTE,
  type ApiKeyRow,
  type ApiKeyStore,
  type NewApiKey,
} from './db.js';
import { migrate } from './db/migrate.js';
import { closedPort, createTestSchema, startTcpProxy, withPort, type TestSchema } from './db/testing.js';

const EMAIL_ATTRIBUTE = 'irma-demo.sidn-pbdf.email.email';

describe('apiKeyHash', () => {
  it('is the lowercase hex SHA-256 of the whole key, prefix included (reference vector)', () => {
    expect(apiKeyHash('PG-test-key')).toBe('85e74a724a8252e6b9feeb05c47e452de5a9ab9eda70ebfa7cdee7dc78b369dd');
    expect(apiKeyHash('test-key')).not.toBe(apiKeyHash('PG-test-key'));
  });
});

describe('apiKeyRecord (identity from signing_attrs)', () => {
  const row: ApiKeyRow = {
    key_id: '0b5f7b0e-3f7a-4d0a-9d3c-1f1f0f3e2a11',
    tenant_id: '7c9e6679-7425-40de-944b-e07fc1f90ae7',
    signing_email: 'sender@example.org',
    name: 'Example BV',
    phone: '+31612345678',
    kvk_number: '12345678',
    signing_attrs: { email: true, orgName: true, phone: true, kvkNumber: true },
  };

  it('lists every enabled attribute, public, in the reference order, with the configured e-mail type', () => {
    expect(apiKeyRecord(row, EMAIL_ATTRIBUTE)).toEqual({
      keyId: row.key_id,
      tenantId: row.tenant_id,
      organisationName: 'Example BV',
      publicAttributes: [
        { t: EMAIL_ATTRIBUTE, v: 'sender@example.org' },
        { t: 'pbdf.pbdf.kvk.displayName', v: 'Example BV' },
        { t: 'pbdf.sidn-pbdf.mobilenumber.mobilenumber', v: '+31612345678' },
        { t: 'pbdf.pbdf.kvk.kvkNumber', v: '12345678' },
      ],
      privateAttributes: [],
      budgets: { perHour: null, perDay: null, counter: row.key_id },
    });
  });

  it('counts only boolean true as enabled', () => {
    const record = apiKeyRecord(
      { ...row, signing_attrs: { email: 'true', orgName: 1, phone: null, kvkNumber: false } },
      EMAIL_ATTRIBUTE,
    );
    expect(record.publicAttributes).toEqual([]);
    expect(record.organisationName).toBeNull();
  });

  it('leaves out enabled attributes whose value is missing or empty', () => {
    const record = apiKeyRecord(
      { ...row, signing_email: '', name: '', phone: null, kvk_number: null },
      EMAIL_ATTRIBUTE,
    );
    expect(record.publicAttributes).toEqual([]);
    expect(record.organisationName).toBeNull();
  });

  it('reports the organisation name only when the key signs with it', () => {
    const record = apiKeyRecord({ ...row, signing_attrs: { email: true } }, DEFAULT_EMAIL_ATTRIBUTE);
    expect(record.organisationName).toBeNull();
    expect(record.publicAttributes).toEqual([{ t: DEFAULT_EMAIL_ATTRIBUTE, v: 'sender@example.org' }]);
  });

  it('reads flags stored as JSON text, and treats anything that is not an object as no flags', () => {
    expect(apiKeyRecord({ ...row, signing_attrs: '{"phone": true}' }, EMAIL_ATTRIBUTE).publicAttributes).toEqual([
      { t: 'pbdf.sidn-pbdf.mobilenumber.mobilenumber', v: '+31612345678' },
    ]);
    for (const garbage of ['{not json', '[true]', 'true', null, 42, ['email']]) {
      expect(apiKeyRecord({ ...row, signing_attrs: garbage }, EMAIL_ATTRIBUTE).publicAttributes).toEqual([]);
    }
  });
});

describe('API keys in PostgreSQL', () => {
  let schema: TestSchema;
  let store: ApiKeyStore;
  let sql: pg.Pool;

  beforeAll(async () => {
    schema = await createTestSchema();
    store = createApiKeyStore(schema.url, { emailAttribute: EMAIL_ATTRIBUTE });
    sql = new pg.Pool({ connectionString: schema.url, max: 2 });
  });
  afterAll(async () => {
    await store.close();
    await sql.end();
    await schema.drop();
  });

  it('holds the business tables and the migrations table; migrating again changes nothing', async () => {
    expect((await migrate(schema.url)).applied).toEqual([]);
    const tables = await sql.query<{ table_name: string }>(
      'SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name',
      [schema.schema],
    );
    expect(tables.rows.map((r) => r.table_name)).toEqual([
      'business_api_keys',
      'organizations',
      'pg_pkg_api_key_controls',
      'pg_pkg_audit',
      'pg_pkg_schema_migrations',
      'users',
    ]);
  });

  it('issues PG-<base64url of 32 bytes> and stores only its hash', async () => {
    const key = await createApiKey(schema.url, { email: 'a@example.org', org: 'Org A' });
    expect(key).toMatch(/^PG-[\w-]{43}$/);
    const rows = await sql.query('SELECT * FROM business_api_keys WHERE key_hash = $1', [apiKeyHash(key)]);
    expect(rows.rows).toHaveLength(1);
    expect(JSON.stringify(rows.rows)).not.toContain(key.slice(3));
    expect(rows.rows[0].signing_attrs).toEqual({ email: true });
  });

  it('looks up a valid key: tenant, identity, and a last_used_at stamp', async () => {
    const key = await createApiKey(schema.url, {
      email: 'b@example.org',
      org: 'Org B',
      signingAttrs: { email: true, orgName: true },
    });
    const org = await sql.query<{ id: string }>("SELECT id::text FROM organizations WHERE name = 'Org B'");
    const record = await store.lookup(key);
    expect(record).toEqual({
      keyId: expect.stringMatching(/^[0-9a-f-]{36}$/),
      tenantId: org.rows[0]?.id,
      organisationName: 'Org B',
      publicAttributes: [
        { t: EMAIL_ATTRIBUTE, v: 'b@example.org' },
        { t: 'pbdf.pbdf.kvk.displayName', v: 'Org B' },
      ],
      privateAttributes: [],
      budgets: { perHour: null, perDay: null, counter: record?.keyId },
    });
    await expect
      .poll(
        async () =>
          (await sql.query('SELECT last_used_at FROM business_api_keys WHERE key_hash = $1', [apiKeyHash(key)])).rows[0]
            .last_used_at,
      )
      .toBeInstanceOf(Date);
  });

  it('takes phone from the contact user and the KvK number from the organisation', async () => {
    const key = await createApiKey(schema.url, {
      email: 'c@example.org',
      org: 'Org C',
      signingAttrs: { email: false, orgName: false, phone: true, kvkNumber: true },
    });
    const user = await sql.query<{ id: string }>(
      "INSERT INTO users (email, phone) VALUES ('contact@example.org', '+31600000000') RETURNING id",
    );
    await sql.query("UPDATE organizations SET contact_user_id = $1, kvk_number = '87654321' WHERE name = 'Org C'", [
      user.rows[0]?.id,
    ]);
    expect((await store.lookup(key))?.publicAttributes).toEqual([
      { t: 'pbdf.sidn-pbdf.mobilenumber.mobilenumber', v: '+31600000000' },
      { t: 'pbdf.pbdf.kvk.kvkNumber', v: '87654321' },
    ]);
  });

  it('refuses unknown, altered, expired and revoked keys', async () => {
    const key = await createApiKey(schema.url, { email: 'd@example.org', org: 'Org D' });
    expect(await store.lookup(key)).toBeDefined();
    expect(await store.lookup(`PG-${'A'.repeat(43)}`)).toBeUndefined();
    expect(await store.lookup(key.slice(3))).toBeUndefined(); // without the prefix
    expect(await store.lookup(`${key} `)).toBeUndefined();
    expect(await store.lookup(key.toLowerCase())).toBeUndefined();
    expect(await store.lookup("' OR 1=1 --")).toBeUndefined();

    const expired = await createApiKey(schema.url, {
      email: 'd@example.org',
      org: 'Org D',
      expiresAt: new Date(Date.now() - 1000),
    });
    expect(await store.lookup(expired)).toBeUndefined();

    await sql.query('UPDATE business_api_keys SET revoked_at = now() WHERE key_hash = $1', [apiKeyHash(key)]);
    expect(await store.lookup(key)).toBeUndefined();
  });

  it('reuses an existing organisation, but will not change what it signs as', async () => {
    const first = await createApiKey(schema.url, { email: 'e@example.org', org: 'Org E' });
    const second = await createApiKey(schema.url, { email: 'e@example.org', org: ' Org E ' });
    expect(first).not.toBe(second);
    const orgs = await sql.query("SELECT id FROM organizations WHERE name = 'Org E'");
    expect(orgs.rows).toHaveLength(1);
    expect((await store.lookup(second))?.tenantId).toBe((await store.lookup(first))?.tenantId);

    const refused = createApiKey(schema.url, { email: 'other@example.org', org: 'Org E' });
    await expect(refused).rejects.toBeInstanceOf(InputError);
    await expect(refused).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    const keys = await sql.query(
      "SELECT count(*)::int AS n FROM business_api_keys k JOIN organizations o ON o.id = k.org_id WHERE o.name = 'Org E'",
    );
    expect(keys.rows[0].n).toBe(2);
  });

  it('refuses bad input before touching the database', async () => {
    const url = withPort(schema.url, await closedPort());
    const bad: NewApiKey[] = [
      { email: ' ', org: 'Org F' },
      { email: 'f@example.org', org: '' },
      { email: 'f@example.org', org: 'Org F', signingAttrs: { orgname: true } },
      { email: 'f@example.org', org: 'Org F', signingAttrs: { email: 'yes' as unknown as boolean } },
      { email: 'f@example.org', org: 'Org F', expiresAt: new Date(Number.NaN) },
    ];
    for (const input of bad) {
      await expect(createApiKey(url, input)).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    }
  });

  it('createApiKey reports an unreachable database as DatabaseUnavailableError', async () => {
    const url = withPort(schema.url, await closedPort());
    await expect(createApiKey(url, { email: 'g@example.org', org: 'Org G' })).rejects.toBeInstanceOf(
      DatabaseUnavailableError,
    );
  });
});

describe('API-key store outages', () => {
  let schema: TestSchema;
  let key: string;

  beforeAll(async () => {
    schema = await createTestSchema();
    key = await createApiKey(schema.url, { email: 'h@example.org', org: 'Org H' });
  });
  afterAll(() => schema.drop());

  it('throws DatabaseUnavailableError when nothing listens', async () => {
    const store = createApiKeyStore(withPort(schema.url, await closedPort()), { emailAttribute: EMAIL_ATTRIBUTE });
    try {
      const lookup = store.lookup(key);
      await expect(lookup).rejects.toBeInstanceOf(DatabaseUnavailableError);
      await expect(lookup).rejects.toMatchObject({ code: 'DATABASE_UNAVAILABLE' });
      await expect(store.ping()).rejects.toBeInstanceOf(DatabaseUnavailableError);
    } finally {
      await store.close();
    }
  });

  it('throws within the connection timeout when the server accepts but never answers', async () => {
    const held = new Set<Socket>();
    const silent = createServer((socket) => held.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const address = silent.address();
    if (typeof address !== 'object' || address === null) throw new Error('no port');
    const store = createApiKeyStore(withPort(schema.url, address.port), {
      emailAttribute: EMAIL_ATTRIBUTE,
      connectionTimeoutMs: 300,
    });
    try {
      const started = performance.now();
      await expect(store.lookup(key)).rejects.toBeInstanceOf(DatabaseUnavailableError);
      expect(performance.now() - started).toBeLessThan(5000);
    } finally {
      await store.close();
      for (const socket of held) socket.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });

  it('recovers by itself when PostgreSQL comes back', async () => {
    const proxy = await startTcpProxy(Number(new URL(schema.url).port || 5432));
    const store = createApiKeyStore(withPort(schema.url, proxy.port), {
      emailAttribute: EMAIL_ATTRIBUTE,
      connectionTimeoutMs: 500,
    });
    try {
      expect((await store.lookup(key))?.publicAttributes).toEqual([{ t: EMAIL_ATTRIBUTE, v: 'h@example.org' }]);
      await store.ping();

      await proxy.down(); // kills the pooled connections and refuses new ones
      await expect(store.lookup(key)).rejects.toBeInstanceOf(DatabaseUnavailableError);
      await expect(store.ping()).rejects.toBeInstanceOf(DatabaseUnavailableError);
      await expect(store.lookup(key)).rejects.toBeInstanceOf(DatabaseUnavailableError);

      await proxy.up();
      expect((await store.lookup(key))?.tenantId).toMatch(/^[0-9a-f-]{36}$/);
      await store.ping();
      expect(await store.lookup('PG-unknown')).toBeUndefined();
    } finally {
      await store.close();
      await proxy.close();
    }
  });
});
