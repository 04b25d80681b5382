import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listAudit } from './audit.js';
import { runCli } from './cli.js';
import { apiKeyHash, createApiKeyStore, type ApiKeyStore } from './db.js';
import { createTestSchema, type TestSchema } from './db/testing.js';
import { redisBucketStore, type RedisBucketStore } from './ratelimit/index.js';
import { NO_RATE_LIMIT, startPkg, type RunningPkg } from './testing.js';

/**
 * Per-key controls against the real PostgreSQL and Redis: budgets per hour and per day (429 with
 * Retry-After, counted in Redis, off by default and removable), `api-key rotate --grace` (both keys sign
 * inside the window, the old one is refused after it, and they share one budget), `api-key info`.
 */

const EMAIL = 'irma-demo.sidn-pbdf.email.email';
const REDIS_URL = process.env['TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379';

let schema: TestSchema;
let store: ApiKeyStore;
let buckets: RedisBucketStore;
let redis: Redis;
let pkg: RunningPkg;
let sql: pg.Client;
const prefix = `pg-pkg-test:${randomBytes(6).toString('hex')}:`;

beforeAll(async () => {
  schema = await createTestSchema();
  sql = new pg.Client({ connectionString: schema.url });
  await sql.connect();
  store = createApiKeyStore(schema.url, { emailAttribute: EMAIL });
  buckets = redisBucketStore(REDIS_URL, { keyPrefix: prefix, failure: 'closed' });
  redis = new Redis(REDIS_URL);
  for (let i = 0; i < 100 && !buckets.shared; i++) await new Promise((resolve) => setTimeout(resolve, 20));
  if (!buckets.shared) throw new Error('Redis is not reachable');
  // The per-address limiter is off: what refuses below is the key's own budget.
  pkg = await startPkg({ apiKeys: store, rateLimit: { settings: NO_RATE_LIMIT, store: buckets } });
});

afterAll(async () => {
  await pkg?.close();
  await store?.close();
  await buckets?.close();
  const left = await redis.keys(`${prefix}*`);
  if (left.length > 0) await redis.del(...left);
  redis?.disconnect();
  await sql?.end();
  await schema?.drop();
});

const env = () => ({ DATABASE_URL: schema.url });

async function cli(...argv: string[]): Promise<{ exit: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const outcome = await runCli(argv, env(), {
    stdout: { write: (t: string) => out.push(t) },
    stderr: { write: (t: string) => err.push(t) },
  });
  if (!('exit' in outcome)) throw new Error('a command that serves');
  return { exit: outcome.exit, out: out.join(''), err: err.join('') };
}

async function newKey(org: string): Promise<{ key: string; id: string }> {
  const created = await cli(
    'api-key',
    'create',
    '--email',
    `${org.toLowerCase().replace(/ /g, '-')}@example.org`,
    '--org',
    org,
  );
  expect(created.exit).toBe(0);
  const key = created.out.trim();
  const { rows } = await sql.query<{ id: string }>('SELECT id::text FROM business_api_keys WHERE key_hash = $1', [
    apiKeyHash(key),
  ]);
  return { key, id: rows[0]!.id };
}

const signKey = (apiKey: string) =>
  fetch(`${pkg.url}/v2/irma/sign/key`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ pubSignId: [{ t: EMAIL }] }),
  });

const statuses = async (apiKey: string, n: number): Promise<number[]> => {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await signKey(apiKey)).status);
  return out;
};

describe('budgets', () => {
  it('off by default; per hour: the budget, then 429 API_KEY_BUDGET_EXCEEDED with Retry-After', async () => {
    const { key, id } = await newKey('Budget H');
    expect(await statuses(key, 5)).toEqual([200, 200, 200, 200, 200]);

    const set = await cli('api-key', 'budget', '--id', id, '--per-hour', '3');
    expect(set).toMatchObject({ exit: 0, out: `API key ${id}: budget per hour 3, per day off\n` });
    expect(await statuses(key, 3)).toEqual([200, 200, 200]);
    const refused = await signKey(key);
    expect(refused.status).toBe(429);
    expect(await refused.json()).toEqual({
      error: true,
      code: 'API_KEY_BUDGET_EXCEEDED',
      message: "this API key's budget of 3 per hour is spent",
    });
    // One request's worth refills in 3600 / 3 s.
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(1190);
    expect(retryAfter).toBeLessThanOrEqual(1200);
    // Counted in Redis, under the key's id (never the key).
    expect(await redis.exists(`${prefix}key-hour:${id}`)).toBe(1);
    // The validation route is not a signing request: it spends nothing and is not refused.
    const validate = await fetch(`${pkg.url}/v2/api-key/validate`, { headers: { authorization: `Bearer ${key}` } });
    expect(validate.status).toBe(200);

    // Removed, the key signs again at once.
    expect((await cli('api-key', 'budget', '--id', id, '--per-hour', 'off')).exit).toBe(0);
    expect((await signKey(key)).status).toBe(200);

    await store.settled();
    const trail = await listAudit(schema.url, { since: new Date(0), keyId: id });
    expect(trail.filter((r) => r.errorCode === 'API_KEY_BUDGET_EXCEEDED')).toHaveLength(1);
  });

  it('per day, on its own; another key is not affected', async () => {
    const { key, id } = await newKey('Budget D');
    const other = await newKey('Budget O');
    expect((await cli('api-key', 'budget', '--id', id, '--per-day', '2')).exit).toBe(0);
    expect(await statuses(key, 3)).toEqual([200, 200, 429]);
    const refused = await signKey(key);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(43_000);
    expect((await refused.json()).message).toBe("this API key's budget of 2 per day is spent");
    expect(await statuses(other.key, 3)).toEqual([200, 200, 200]);
  });

  it('bad budgets are exit 2 naming the flag; an unknown key is exit 1', async () => {
    const { id } = await newKey('Budget X');
    for (const [args, flag] of [
      [['--per-hour', '0'], '--per-hour'],
      [['--per-day', 'lots'], '--per-day'],
      [[], '--per-hour / --per-day'],
    ] as const) {
      const run = await cli('api-key', 'budget', '--id', id, ...args);
      expect(run.exit).toBe(2);
      expect(run.err).toMatch(new RegExp(`^pg-pkg: ${flag.replace(/\//g, '\\/')}: `));
    }
    const unknown = await cli('api-key', 'budget', '--id', '00000000-0000-0000-0000-000000000000', '--per-day', '5');
    expect(unknown).toMatchObject({
      exit: 1,
      err: 'pg-pkg: no API key with id 00000000-0000-0000-0000-000000000000\n',
    });
  });
});

describe('rotate', () => {
  it('--grace: both keys sign inside the window, the old one is refused after it; one budget for both', async () => {
    const old = await newKey('Rotate G');
    expect((await cli('api-key', 'budget', '--id', old.id, '--per-hour', '4')).exit).toBe(0);
    expect((await signKey(old.key)).status).toBe(200);

    const rotated = await cli('api-key', 'rotate', '--id', old.id, '--grace', '2s');
    expect(rotated.exit).toBe(0);
    const fresh = rotated.out.trim();
    expect(fresh).toMatch(/^PG-[\w-]{43}$/);
    expect(rotated.err).toMatch(
      new RegExp(`^New key id [0-9a-f-]{36}, shown only once. The old key ${old.id} signs until `),
    );
    const started = Date.now();

    // Inside the grace: both sign, as the same organisation; together they spend the one budget (4).
    const a = await (await signKey(old.key)).json();
    const b = await (await signKey(fresh)).json();
    expect(a.pubSignKey.policy.con).toEqual(b.pubSignKey.policy.con);
    expect((await signKey(fresh)).status).toBe(200);
    expect((await signKey(fresh)).status).toBe(429);

    // After it: the old key is refused as any dead key is; the new one only waits for its budget.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, 2100 - (Date.now() - started))));
    const after = await signKey(old.key);
    expect(after.status).toBe(401);
    expect((await after.json()).code).toBe('API_KEY_INVALID');
    expect((await signKey(fresh)).status).toBe(429);
    expect((await cli('api-key', 'budget', '--id', old.id, '--per-hour', 'off')).exit).toBe(0);
    // The new key has its own copy of the budget, with the shared counters.
    expect((await signKey(fresh)).status).toBe(429);
    const newId = (await sql.query('SELECT id::text FROM business_api_keys WHERE key_hash = $1', [apiKeyHash(fresh)]))
      .rows[0].id as string;
    expect((await cli('api-key', 'budget', '--id', newId, '--per-hour', 'off')).exit).toBe(0);
    expect((await signKey(fresh)).status).toBe(200);
  }, 15_000);

  it('--grace 0s stops the old key now; a revoked or unknown key is not rotated (exit 1, audited)', async () => {
    const old = await newKey('Rotate Z');
    const rotated = await cli('api-key', 'rotate', '--id', old.id, '--grace', '0s');
    expect(rotated.exit).toBe(0);
    expect((await signKey(old.key)).status).toBe(401);
    expect((await signKey(rotated.out.trim())).status).toBe(200);

    const again = await cli('api-key', 'rotate', '--id', old.id);
    expect(again).toMatchObject({ exit: 1, err: `pg-pkg: API key ${old.id} is expired; only a live key is rotated\n` });
    const revoked = await newKey('Rotate R');
    expect((await cli('api-key', 'revoke', '--id', revoked.id)).exit).toBe(0);
    expect((await cli('api-key', 'rotate', '--id', revoked.id)).exit).toBe(1);
    const trail = await listAudit(schema.url, { since: new Date(0), keyId: old.id });
    expect(trail.filter((r) => r.operation === 'api-key rotate').map((r) => [r.outcome, r.errorCode])).toEqual([
      ['allowed', null],
      ['refused', 'KEY_NOT_ACTIVE'],
    ]);
    for (const bad of [
      ['--grace', '24'],
      ['--grace', '1w'],
      ['--id', 'nope'],
    ]) {
      const run = await cli('api-key', 'rotate', '--id', old.id, ...bad);
      expect(run.exit).toBe(2);
    }
  });
});

describe('info', () => {
  it('status, organisation, last use, counts, budgets and rotation; never the key', async () => {
    const { key, id } = await newKey('Info BV');
    expect((await cli('api-key', 'budget', '--id', id, '--per-hour', '10', '--per-day', '100')).exit).toBe(0);
    expect((await signKey(key)).status).toBe(200);
    expect((await signKey(key)).status).toBe(200);
    await sql.query("UPDATE organizations SET status = 'suspended' WHERE name = 'Info BV'");
    expect((await signKey(key)).status).toBe(401);
    await store.settled();
    const rotated = await cli('api-key', 'rotate', '--id', id, '--grace', '1h');
    const newId = /New key id ([0-9a-f-]{36})/.exec(rotated.err)![1]!;

    const info = await cli('api-key', 'info', '--id', id);
    expect(info.exit).toBe(0);
    const fields = Object.fromEntries(
      info.out
        .trimEnd()
        .split('\n')
        .map((l) => l.split(':\t') as [string, string]),
    );
    expect(fields).toMatchObject({
      id,
      status: 'org-suspended',
      'signing e-mail': 'info-bv@example.org',
      'requests, last hour': '2 allowed, 1 refused',
      'requests, last day': '2 allowed, 1 refused',
      'budget per hour': '10',
      'budget per day': '100',
      'rotated from': '-',
      'rotated to': newId,
    });
    expect(fields['organisation']).toMatch(/^Info BV \([0-9a-f-]{36}, suspended\)$/);
    expect(fields['last used']).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(new Date(fields['expires']!).getTime()).toBeLessThanOrEqual(Date.now() + 3_600_000);
    expect(info.out).not.toContain(key);
    expect(info.out).not.toContain(apiKeyHash(key));

    const json = JSON.parse((await cli('api-key', 'info', '--id', newId, '--json')).out);
    expect(json).toMatchObject({
      id: newId,
      rotatedFrom: id,
      budgets: { perHour: 10, perDay: 100, sharedWith: id },
      counts: { retained: { allowed: 0, refused: 0 } },
      lastUsedAt: null,
    });
    expect(await cli('api-key', 'info', '--id', '00000000-0000-0000-0000-000000000000')).toMatchObject({ exit: 1 });
  });
});
