import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Unsealer, seal, type SealOptions } from '../lib/index.js';
import { extractUsk } from '../lib/keys.js';
import { loadPgWasm } from '../test/pgwasm.js';
import { buildApp } from './app.js';
import { apiKeyHash, createApiKey, createApiKeyStore, type ApiKeyStore } from './db.js';
import { createTestSchema, startTcpProxy, withPort, type TcpProxy, type TestSchema } from './db/testing.js';
import { memoryBucketStore } from './ratelimit/index.js';
import { disclose } from '../devtools/standin/wallet.js';
import { NO_RATE_LIMIT, startPkg, testKeys, type RunningPkg } from './testing.js';

/**
 * API-key signing against the real PostgreSQL, reached through a TCP proxy the test can take down:
 * valid, unknown, expired and revoked keys; /v2/api-key/validate; a database outage that only the
 * API-key requests notice, and the recovery after it; a PKG that will not start without its database.
 */

const EMAIL = 'irma-demo.sidn-pbdf.email.email';

let schema: TestSchema;
let proxy: TcpProxy;
let store: ApiKeyStore;
let pkg: RunningPkg;
let validKey: string;
let orgKey: string;
let expiredKey: string;
let revokedKey: string;
let capitalsKey: string;

beforeAll(async () => {
  schema = await createTestSchema();
  validKey = await createApiKey(schema.url, { email: 'sender@example.org', org: 'Example BV' });
  orgKey = await createApiKey(schema.url, {
    email: 'info@acme.example',
    org: 'ACME',
    signingAttrs: { email: true, orgName: true },
  });
  expiredKey = await createApiKey(schema.url, {
    email: 'sender@example.org',
    org: 'Example BV',
    expiresAt: new Date(Date.now() - 1000),
  });
  revokedKey = await createApiKey(schema.url, { email: 'sender@example.org', org: 'Example BV' });
  capitalsKey = await createApiKey(schema.url, { email: 'Info@Capitals.Example', org: 'Capitals BV' });
  const admin = new pg.Client({ connectionString: schema.url });
  await admin.connect();
  await admin.query('UPDATE business_api_keys SET revoked_at = now() WHERE key_hash = $1', [apiKeyHash(revokedKey)]);
  await admin.end();

  proxy = await startTcpProxy(Number(new URL(schema.url).port || 5432), new URL(schema.url).hostname);
  store = createApiKeyStore(withPort(schema.url, proxy.port), { emailAttribute: EMAIL, connectionTimeoutMs: 1000 });
  pkg = await startPkg({ apiKeys: store });
});

afterAll(async () => {
  await pkg?.close();
  await store?.close();
  await proxy?.close();
  await schema?.drop();
});

const signKey = (apiKey: string, body: unknown = { pubSignId: [{ t: EMAIL }] }) =>
  fetch(`${pkg.url}/v2/irma/sign/key`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
    body: JSON.stringify(body),
  });

const validate = (authorization?: string) =>
  fetch(`${pkg.url}/v2/api-key/validate`, { headers: authorization === undefined ? {} : { authorization } });

async function expectError(response: Response, status: number, code: string): Promise<void> {
  expect(response.status).toBe(status);
  expect(await response.json()).toEqual({ error: true, code, message: expect.any(String) });
}

describe('signing with an API key', () => {
  it('an e-mail stored with capitals signs as the canonical, lower-case address (current PostGuard)', async () => {
    const response = await signKey(capitalsKey);
    expect(response.status).toBe(200);
    const keys = await response.json();
    const policy = { ts: pkg.clock.now(), con: [{ t: EMAIL, v: 'info@capitals.example' }] };
    expect(keys.pubSignKey.policy).toEqual(policy);
    const recipient = { ts: pkg.clock.now(), con: [{ t: EMAIL, v: 'r@example.org' }] };
    const ct = await seal(
      testKeys().mpk,
      { policy: { r: recipient }, pubSignKey: keys.pubSignKey },
      new Uint8Array([1, 2, 3]),
    );
    const pgwasm = await loadPgWasm();
    const [, signer] = await (
      await pgwasm.Unsealer.new(ct, testKeys().vk)
    ).unseal('r', extractUsk(testKeys().msk, recipient));
    expect(signer).toEqual({ public: policy });
  });

  it('issues a public signing key for the organisation, usable by postguard-ts and pg-wasm', async () => {
    const response = await signKey(validKey);
    expect(response.status).toBe(200);
    const keys = await response.json();
    const policy = { ts: pkg.clock.now(), con: [{ t: EMAIL, v: 'sender@example.org' }] };
    expect(keys).toEqual({ status: 'DONE', proofStatus: 'VALID', pubSignKey: { key: expect.any(String), policy } });

    const pgwasm = await loadPgWasm();
    const mpk = testKeys().mpk;
    const recipient = { ts: pkg.clock.now(), con: [{ t: EMAIL, v: 'r@example.org' }] };
    const usk = extractUsk(testKeys().msk, recipient);
    const options: SealOptions = { policy: { 'r@example.org': recipient }, pubSignKey: keys.pubSignKey };
    const plain = new TextEncoder().encode('from the SDK');
    // Our files bind the sender inside the encryption; pg-wasm 0.5.10's do not.
    for (const [ct, bound] of [
      [await seal(mpk, options, plain), true],
      [await pgwasm.seal(mpk, options, plain), false],
    ] as const) {
      const [a, ours] = await (await Unsealer.new(ct, testKeys().vk)).unseal('r@example.org', usk);
      expect(a).toEqual(plain);
      expect(ours).toEqual({ public: policy, contentSigner: 'public', bound });
      const [b, theirs] = await (await pgwasm.Unsealer.new(ct, testKeys().vk)).unseal('r@example.org', usk);
      expect(b).toEqual(plain);
      expect(theirs).toEqual({ public: policy });
    }
  });

  it("the identity is the key's record, whatever the body asks for", async () => {
    const keys = await (
      await signKey(orgKey, {
        pubSignId: [{ t: 'irma-demo.gemeente.personalData.surname' }],
        privSignId: [{ t: EMAIL }],
      })
    ).json();
    expect(keys.pubSignKey.policy.con).toEqual([
      { t: EMAIL, v: 'info@acme.example' },
      { t: 'pbdf.pbdf.kvk.displayName', v: 'ACME' },
    ]);
    expect(keys.privSignKey).toBeUndefined();
  });

  it('the body is still checked', async () => {
    await expectError(await signKey(validKey, { pubSignId: [], extra: 1 }), 400, 'BAD_REQUEST');
    await expectError(await signKey(validKey, {}), 400, 'BAD_REQUEST');
  });

  it('unknown, expired and revoked keys: 401 API_KEY_INVALID', async () => {
    for (const key of ['PG-unknown', expiredKey, revokedKey, `${validKey}x`]) {
      await expectError(await signKey(key), 401, 'API_KEY_INVALID');
    }
  });
});

describe("the organisation's status", () => {
  const setStatus = async (org: string, status: string) => {
    const admin = new pg.Client({ connectionString: schema.url });
    await admin.connect();
    try {
      await admin.query('UPDATE organizations SET status = $2 WHERE name = $1', [org, status]);
    } finally {
      await admin.end();
    }
  };

  it('a suspended or pending organisation: 401 API_KEY_INVALID at the next request, the body of an unknown key', async () => {
    const unknown = await (await signKey('PG-unknown')).json();
    expect((await signKey(orgKey)).status).toBe(200);
    try {
      for (const status of ['suspended', 'pending', 'Active', '']) {
        await setStatus('ACME', status);
        const refused = await signKey(orgKey);
        expect(refused.status).toBe(401);
        expect(await refused.json()).toEqual(unknown);
        await expectError(await validate(`Bearer ${orgKey}`), 401, 'API_KEY_INVALID');
        // The other organisations' keys are untouched.
        expect((await signKey(validKey)).status).toBe(200);
      }
    } finally {
      await setStatus('ACME', 'active');
    }
    // Reactivated, the same key signs again: suspension does not revoke.
    expect((await signKey(orgKey)).status).toBe(200);
    expect((await validate(`Bearer ${orgKey}`)).status).toBe(200);
  });
});

describe('/v2/api-key/validate', () => {
  it('answers the tenant, and the organisation name only when the key signs with it', async () => {
    const plain = await validate(`Bearer ${validKey}`);
    expect(plain.status).toBe(200);
    expect(await plain.json()).toEqual({
      tenant_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      organisation_name: null,
    });
    expect((await (await validate(`Bearer ${orgKey}`)).json()).organisation_name).toBe('ACME');
  });

  it('401 for a dead key; 404 without a PG- bearer (the route does not match, as in pg-pkg)', async () => {
    await expectError(await validate(`Bearer ${revokedKey}`), 401, 'API_KEY_INVALID');
    await expectError(await validate(), 404, 'NOT_FOUND');
    await expectError(await validate('Bearer eyJhbGciOiJSUzI1NiJ9.e30.x'), 404, 'NOT_FOUND');
  });
});

describe('database outage', () => {
  it('API-key requests get 503 DB_UNAVAILABLE; everything else keeps working; recovery needs no restart', async () => {
    // A JWT-signed request for comparison: it must not need the database.
    const session = await (
      await fetch(`${pkg.url}/v2/irma/start`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ con: [{ t: EMAIL, v: 'bob@example.org' }] }),
      })
    ).json();
    await disclose(session, { [EMAIL]: 'bob@example.org' });
    const jwt = await (await fetch(`${pkg.url}/v2/irma/jwt/${session.token}`)).text();

    await proxy.down();
    try {
      await expectError(await signKey(validKey), 503, 'DB_UNAVAILABLE');
      await expectError(await validate(`Bearer ${validKey}`), 503, 'DB_UNAVAILABLE');
      expect((await signKey(jwt)).status).toBe(200);
      expect((await fetch(`${pkg.url}/v2/parameters`)).status).toBe(200);
      expect((await fetch(`${pkg.url}/health`)).status).toBe(200);
    } finally {
      await proxy.up();
    }
    expect((await signKey(validKey)).status).toBe(200);
  });

  it('a PKG whose database is unreachable at start does not start', async () => {
    await proxy.down();
    const deadStore = createApiKeyStore(withPort(schema.url, proxy.port), {
      emailAttribute: EMAIL,
      connectionTimeoutMs: 500,
    });
    const app = buildApp({
      keys: testKeys(),
      identityServer: { url: pkg.yivi.url },
      apiKeys: deadStore,
      rateLimit: { settings: NO_RATE_LIMIT, store: memoryBucketStore() },
      allowedOrigins: ['*'],
      processMetrics: false,
    });
    try {
      await expect(app.listen({ port: 0, host: '127.0.0.1' })).rejects.toMatchObject({
        name: 'DatabaseUnavailableError',
      });
    } finally {
      await app.close();
      await deadStore.close();
      await proxy.up();
    }
  });
});
