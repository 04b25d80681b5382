import { hostname, userInfo } from 'node:os';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AUDIT_TABLE, listAudit, pruneAudit, type AuditRow } from './audit.js';
import { runCli } from './cli.js';
import { apiKeyHash, createApiKey, createApiKeyStore, type ApiKeyStore } from './db.js';
import { createTestSchema, type TestSchema } from './db/testing.js';
import { memoryBucketStore } from './ratelimit/index.js';
import { NO_RATE_LIMIT, startPkg, type RunningPkg } from './testing.js';

/**
 * The audit trail against the real PostgreSQL: one row per signing-key request and API-key validation,
 * allowed or refused (by the key check, the organisation's status, the schema, the rate limiter), with
 * the key's ids, the client's address and user agent and never key material; one row per api-key
 * command with who ran it and from where; `audit list` and `audit prune`; the table refuses changes.
 */

const EMAIL = 'irma-demo.sidn-pbdf.email.email';

let schema: TestSchema;
let store: ApiKeyStore;
let pkg: RunningPkg;
let sql: pg.Client;

beforeAll(async () => {
  schema = await createTestSchema();
  sql = new pg.Client({ connectionString: schema.url });
  await sql.connect();
  store = createApiKeyStore(schema.url, { emailAttribute: EMAIL });
  // Sensitive burst 6: the seventh key request from one address is refused by the limiter.
  pkg = await startPkg({
    apiKeys: store,
    rateLimit: {
      settings: { ...NO_RATE_LIMIT, disabled: false, sensitivePerSecond: 1, sensitiveBurst: 6 },
      store: memoryBucketStore(),
    },
  });
});

afterAll(async () => {
  await pkg?.close();
  await store?.close();
  await sql?.end();
  await schema?.drop();
});

beforeEach(async () => {
  await sql.query("SET pg_pkg.audit_prune = 'on'");
  await sql.query(`DELETE FROM ${AUDIT_TABLE}`);
  await sql.query("SET pg_pkg.audit_prune = 'off'");
});

const rows = async (): Promise<AuditRow[]> => {
  await store.settled();
  return listAudit(schema.url, { since: new Date(0) });
};

const keyIdOf = async (key: string): Promise<string> =>
  (await sql.query<{ id: string }>('SELECT id::text FROM business_api_keys WHERE key_hash = $1', [apiKeyHash(key)]))
    .rows[0]!.id;

const orgIdOf = async (name: string): Promise<string> =>
  (await sql.query<{ id: string }>('SELECT id::text FROM organizations WHERE name = $1', [name])).rows[0]!.id;

const signKey = (apiKey: string, body: unknown = { pubSignId: [{ t: EMAIL }] }) =>
  fetch(`${pkg.url}/v2/irma/sign/key`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${apiKey}`,
      'user-agent': 'audit-test/1.0\tnext',
    },
    body: JSON.stringify(body),
  });

const io = () => {
  const out: string[] = [];
  const err: string[] = [];
  return {
    out,
    err,
    io: { stdout: { write: (t: string) => out.push(t) }, stderr: { write: (t: string) => err.push(t) } },
  };
};

describe('requests', () => {
  it('one row per request, allowed or refused, with ids, address, user agent and code; never key material', async () => {
    const good = await createApiKey(schema.url, { email: 'a@example.org', org: 'Audit A' });
    const revoked = await createApiKey(schema.url, { email: 'a@example.org', org: 'Audit A' });
    const suspended = await createApiKey(schema.url, { email: 's@example.org', org: 'Audit S' });
    await sql.query('UPDATE business_api_keys SET revoked_at = now() WHERE key_hash = $1', [apiKeyHash(revoked)]);
    await sql.query("UPDATE organizations SET status = 'suspended' WHERE name = 'Audit S'");

    const issued = await signKey(good);
    expect(issued.status).toBe(200);
    const signingKey = ((await issued.json()) as { pubSignKey: { key: string } }).pubSignKey.key;
    expect((await signKey('PG-unknown')).status).toBe(401);
    expect((await signKey(revoked)).status).toBe(401);
    expect((await signKey(suspended)).status).toBe(401);
    expect((await signKey(good, { pubSignId: [], extra: true })).status).toBe(400);
    expect(
      (await fetch(`${pkg.url}/v2/api-key/validate`, { headers: { authorization: `Bearer ${good}` } })).status,
    ).toBe(200);
    // The seventh sensitive request from this address: the limiter refuses it before any key check.
    expect((await signKey(good)).status).toBe(429);
    // Not audited: parameters, and a route that issues nothing.
    expect((await fetch(`${pkg.url}/v2/parameters`)).status).toBe(200);

    const goodId = await keyIdOf(good);
    const revokedId = await keyIdOf(revoked);
    const suspendedId = await keyIdOf(suspended);
    const orgA = await orgIdOf('Audit A');
    const orgS = await orgIdOf('Audit S');
    const trail = await rows();
    // The rows are written in the background, so two close requests may land in either order: the
    // trail is compared as a set of rows, one per request.
    const canonical = (rs: unknown[][]) => rs.map((r) => JSON.stringify(r)).sort();
    expect(
      canonical(trail.map((r) => [r.operation, r.outcome, r.errorCode, r.keyId, r.orgId, r.details['reason'] ?? null])),
    ).toEqual(
      canonical([
        ['sign/key', 'allowed', null, goodId, orgA, null],
        ['sign/key', 'refused', 'API_KEY_INVALID', null, null, 'unknown'],
        ['sign/key', 'refused', 'API_KEY_INVALID', revokedId, orgA, 'revoked'],
        ['sign/key', 'refused', 'API_KEY_INVALID', suspendedId, orgS, 'organisation-inactive'],
        ['sign/key', 'refused', 'BAD_REQUEST', goodId, orgA, null],
        ['api-key/validate', 'allowed', null, goodId, orgA, null],
        ['sign/key', 'refused', 'RATE_LIMITED', null, null, null],
      ]),
    );
    for (const row of trail) {
      expect(row).toMatchObject({ source: 'http', clientAddress: '127.0.0.1', osUser: null, host: null });
      // The client's text, control characters made spaces.
      expect(row.userAgent).toBe(row.operation === 'sign/key' ? 'audit-test/1.0 next' : 'node');
      expect(row.at.getTime()).toBeGreaterThan(Date.now() - 60_000);
    }
    const allowed = trail.find((r) => r.operation === 'sign/key' && r.outcome === 'allowed')!;
    expect(allowed.details).toMatchObject({ route: '/v2/irma/sign/key', credential: 'api-key', keysIssued: 1 });

    // Neither a key, nor its hash, nor the signing key issued appears anywhere in the table.
    const everything = JSON.stringify((await sql.query(`SELECT * FROM ${AUDIT_TABLE}`)).rows);
    for (const secret of [good, revoked, suspended, 'PG-unknown', signingKey, apiKeyHash(good), apiKeyHash(revoked)]) {
      expect(everything).not.toContain(secret);
    }
  });

  it('a refused session JWT is recorded as such; a PKG without a database records nothing', async () => {
    // PKGs of their own: the first test has spent this address's sensitive tokens on the shared one.
    const second = await startPkg({ apiKeys: store, yivi: pkg.yivi });
    const none = await startPkg({ yivi: pkg.yivi });
    try {
      const response = await fetch(`${second.url}/v2/request/sign/key`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer eyJhbGciOiJIUzI1NiJ9.e30.x' },
        body: JSON.stringify({ pubSignId: [{ t: EMAIL }] }),
      });
      expect(response.status).toBe(401);
      const unaudited = await fetch(`${none.url}/v2/irma/sign/key`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer PG-anything' },
        body: JSON.stringify({ pubSignId: [{ t: EMAIL }] }),
      });
      expect(unaudited.status).toBe(401);
    } finally {
      await second.close();
      await none.close();
    }
    expect((await rows()).map((r) => [r.operation, r.errorCode, r.details['credential'], r.details['route']])).toEqual([
      ['sign/key', 'JWT_INVALID', 'jwt', '/v2/request/sign/key'],
    ]);
  });
});

describe('commands', () => {
  it('every api-key command leaves a row with the OS user and host; refusals too', async () => {
    const env = { DATABASE_URL: schema.url, SSH_CONNECTION: '198.51.100.7 52114 10.0.0.1 22' };
    const create = io();
    expect(await runCli(['api-key', 'create', '--email', 'c@example.org', '--org', 'Audit C'], env, create.io)).toEqual(
      { exit: 0 },
    );
    const key = create.out.join('').trim();
    const id = await keyIdOf(key);
    expect(await runCli(['api-key', 'list', '--org', 'Audit C'], env, io().io)).toEqual({ exit: 0 });
    expect(await runCli(['api-key', 'revoke', '--id', id], env, io().io)).toEqual({ exit: 0 });
    const unknown = io();
    expect(
      await runCli(['api-key', 'revoke', '--id', '00000000-0000-0000-0000-000000000000'], env, unknown.io),
    ).toEqual({ exit: 1 });

    const trail = await rows();
    const orgC = await orgIdOf('Audit C');
    expect(trail.map((r) => [r.operation, r.outcome, r.errorCode, r.keyId, r.orgId])).toEqual([
      ['api-key create', 'allowed', null, id, orgC],
      ['api-key list', 'allowed', null, null, null],
      ['api-key revoke', 'allowed', null, id, orgC],
      ['api-key revoke', 'refused', 'UNKNOWN_KEY', null, null],
    ]);
    for (const row of trail) {
      expect(row).toMatchObject({ source: 'command', osUser: userInfo().username, host: hostname() });
      expect(row.details['sshClient']).toBe('198.51.100.7');
    }
    expect(JSON.stringify(trail)).not.toContain(key);

    // audit list shows them, as columns and as JSON lines; --key-id narrows to one key.
    const listed = io();
    expect(await runCli(['audit', 'list', '--since', '1h'], env, listed.io)).toEqual({ exit: 0 });
    const lines = listed.out.join('').trimEnd().split('\n');
    expect(lines[0]!.split('\t')).toEqual([
      'time',
      'source',
      'operation',
      'outcome',
      'code',
      'key id',
      'organisation id',
      'from',
      'user agent',
    ]);
    expect(lines.slice(1).map((l) => l.split('\t').slice(2, 5))).toEqual([
      ['api-key create', 'allowed', '-'],
      ['api-key list', 'allowed', '-'],
      ['api-key revoke', 'allowed', '-'],
      ['api-key revoke', 'refused', 'UNKNOWN_KEY'],
    ]);
    expect(lines[1]!.split('\t')[7]).toBe(`${userInfo().username}@${hostname()}`);
    const json = io();
    expect(await runCli(['audit', 'list', '--since', '2000-01-01', '--key-id', id, '--json'], env, json.io)).toEqual({
      exit: 0,
    });
    const jsonLines = json.out.join('').trimEnd().split('\n');
    expect(jsonLines.map((l) => (JSON.parse(l) as AuditRow).operation)).toEqual(['api-key create', 'api-key revoke']);
    // A window in the past is empty.
    const none = io();
    await runCli(['audit', 'list', '--since', '2000-01-01', '--until', '2000-01-02'], env, none.io);
    expect(none.out.join('').trimEnd().split('\n')).toHaveLength(1);
  });

  it('bad times and retentions are exit 2 naming the flag', async () => {
    const env = { DATABASE_URL: schema.url };
    for (const [argv, flag] of [
      [['audit', 'list', '--since', 'yesterday'], '--since'],
      [['audit', 'list', '--since', '24 h'], '--since'],
      [['audit', 'list', '--until', '2026-13-45'], '--until'],
      [['audit', 'list', '--key-id', 'PG-x'], '--key-id'],
      [['audit', 'prune', '--retention-days', '0'], '--retention-days'],
      [['audit', 'frobnicate'], 'audit'],
    ] as const) {
      const run = io();
      expect(await runCli(argv, env, run.io)).toEqual({ exit: 2 });
      expect(run.err.join('')).toMatch(new RegExp(`^pg-pkg: ${flag}: .*\\n$`));
    }
    const run = io();
    expect(
      await runCli(['audit', 'prune'], { DATABASE_URL: schema.url, PKG_AUDIT_RETENTION_DAYS: 'x' }, run.io),
    ).toEqual({ exit: 2 });
    expect(run.err.join('')).toMatch(/^pg-pkg: PKG_AUDIT_RETENTION_DAYS: /);
  });
});

describe('retention and immutability', () => {
  it('prune deletes only rows older than the retention (default 90 days) and records itself', async () => {
    await sql.query(
      `INSERT INTO ${AUDIT_TABLE} (at, source, operation, outcome) VALUES
         (now() - interval '91 days', 'http', 'sign/key', 'allowed'),
         (now() - interval '89 days', 'http', 'sign/key', 'allowed'),
         (now() - interval '3 days', 'http', 'api-key/validate', 'refused')`,
    );
    const run = io();
    expect(await runCli(['audit', 'prune'], { DATABASE_URL: schema.url }, run.io)).toEqual({ exit: 0 });
    expect(run.out.join('')).toBe('deleted 1 audit rows older than 90 days\n');
    const left = await rows();
    expect(left.map((r) => r.operation)).toEqual(['sign/key', 'api-key/validate', 'audit prune']);
    expect(left[2]).toMatchObject({ source: 'command', osUser: userInfo().username, host: hostname() });
    expect(left[2]!.details).toMatchObject({ retentionDays: 90, pruned: 1 });

    expect(await pruneAudit(schema.url, 2)).toBe(2);
    await expect(pruneAudit(schema.url, 0)).rejects.toThrow(RangeError);
  });

  it('the table refuses UPDATE, DELETE outside prune and TRUNCATE', async () => {
    await sql.query(`INSERT INTO ${AUDIT_TABLE} (source, operation, outcome) VALUES ('http', 'sign/key', 'refused')`);
    await expect(sql.query(`UPDATE ${AUDIT_TABLE} SET outcome = 'allowed'`)).rejects.toThrow(
      /append-only: UPDATE refused/,
    );
    await expect(sql.query(`DELETE FROM ${AUDIT_TABLE}`)).rejects.toThrow(/append-only: DELETE refused/);
    await expect(sql.query(`TRUNCATE ${AUDIT_TABLE}`)).rejects.toThrow(/append-only: TRUNCATE refused/);
    expect((await rows()).map((r) => r.outcome)).toEqual(['refused']);
  });
});
