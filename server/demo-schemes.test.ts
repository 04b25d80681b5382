import { createPrivateKey, type KeyObject } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiKeyRecord, ApiKeyStore } from './db.js';
import { disclose } from '../devtools/standin/wallet.js';
import { testKeyPem } from '../devtools/standin/testing.js';
import { startPkg, type RunningPkg } from './testing.js';
import { disclosingClaims, signClaims } from './idp/testing.js';

/**
 * --refuse-demo-schemes: irma-demo attributes, which anyone can issue to themselves, are refused at
 * session start (what the client asks for) and at key issuance (what the session JWT says was
 * disclosed), for user secret keys and signing keys alike. Off, they work as before (the stand-in,
 * the CLI and most tests use them).
 */

const DEMO_EMAIL = 'irma-demo.sidn-pbdf.email.email';
const EMAIL = 'pbdf.sidn-pbdf.email.email';
const DEMO_NAME = 'irma-demo.gemeente.personalData.fullname';

/** An API key whose record carries whatever attributes the test puts in `record`. */
let record: ApiKeyRecord;
const apiKeys: ApiKeyStore = {
  resolve: async (key) =>
    key === 'PG-test' ? { ok: true, record } : { ok: false, reason: 'unknown', keyId: null, orgId: null },
  lookup: async (key) => (key === 'PG-test' ? record : undefined),
  ping: async () => undefined,
  audit: () => undefined,
  settled: async () => undefined,
  close: async () => undefined,
};

let strict: RunningPkg;
let open: RunningPkg;
let standinKey: KeyObject;

beforeAll(async () => {
  strict = await startPkg({ refuseDemoSchemes: true, apiKeys });
  open = await startPkg({ yivi: strict.yivi, apiKeys });
  standinKey = createPrivateKey(testKeyPem());
});

afterAll(async () => {
  await open?.close();
  await strict?.close();
});

async function expectRefused(response: Response): Promise<void> {
  expect(response.status).toBe(403);
  expect(await response.json()).toEqual({ error: true, code: 'DEMO_SCHEME_REFUSED', message: expect.any(String) });
}

const start = (pkg: RunningPkg, body: unknown) =>
  fetch(`${pkg.url}/v2/irma/start`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

const usk = (pkg: RunningPkg, jwt: string, path = `/v2/irma/key/${pkg.clock.now()}`) =>
  fetch(`${pkg.url}${path}`, { headers: { authorization: `Bearer ${jwt}` } });

const signKey = (pkg: RunningPkg, credential: string, pubSignId: unknown[] = [{ t: EMAIL }, { t: DEMO_EMAIL }]) =>
  fetch(`${pkg.url}/v2/irma/sign/key`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${credential}` },
    body: JSON.stringify({ pubSignId }),
  });

/** A session through `via`, answered by the stand-in's wallet; its result JWT. */
async function sessionJwt(via: RunningPkg, con: unknown[], values: Record<string, string>): Promise<string> {
  const response = await start(via, { con });
  expect(response.status).toBe(200);
  const session = await response.json();
  await disclose(session, values);
  return (await fetch(`${via.url}/v2/irma/jwt/${session.token}`)).text();
}

/** A result JWT disclosing `attributes`, signed with the stand-in's key (a session started elsewhere). */
function forgedJwt(attributes: Array<[string, string]>): Promise<string> {
  const disclosed = attributes.map(([id, rawvalue]) => [{ id, rawvalue, status: 'PRESENT', issuancetime: 0 }]);
  return signClaims(disclosingClaims(strict.clock.now(), disclosed), standinKey);
}

describe('refused at session start', () => {
  it('a demo attribute anywhere in the request: as an attribute, optional, in a disjunction, a credential, a recipient', async () => {
    for (const body of [
      { con: [{ t: DEMO_EMAIL }] },
      { con: [{ t: DEMO_EMAIL, v: 'a@example.org' }] },
      { con: [{ t: EMAIL }, { t: DEMO_NAME, optional: true }] },
      { con: [[[{ t: EMAIL }], [{ t: DEMO_EMAIL }]]] },
      { con: [{ t: 'irma-demo.sidn-pbdf.email' }] },
      { attr: { 'a@example.org': { t: 1, con: [{ t: DEMO_EMAIL, v: 'a@example.org' }] } } },
      {
        attr: {
          'a@example.org': { t: 1, con: [{ t: EMAIL, v: 'a@example.org' }] },
          'b@example.org': { t: 1, con: [{ t: DEMO_EMAIL, v: 'b@example.org' }] },
        },
      },
    ]) {
      await expectRefused(await start(strict, body));
      await expectRefused(
        await fetch(`${strict.url}/v2/request/start`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        }),
      );
    }
  });

  it('other schemes start as before, also ones whose name merely begins like it', async () => {
    for (const con of [[{ t: EMAIL }], [{ t: 'irma-demonstration.a.b.c' }], [{ t: 'pbdf.irma-demo.b.c' }]])
      expect((await start(strict, { con })).status).toBe(200);
  });

  it('earlier checks keep their errors', async () => {
    const response = await start(strict, { con: [] });
    expect((await response.json()).code).toBe('EMPTY_IDENTITY');
  });
});

describe('refused at issuance', () => {
  it('user secret keys: a session that disclosed a demo attribute (started through a PKG that allows them)', async () => {
    const jwt = await sessionJwt(open, [{ t: DEMO_EMAIL }], { [DEMO_EMAIL]: 'a@example.org' });
    await expectRefused(await usk(strict, jwt));
    await expectRefused(await usk(strict, jwt, '/v2/irma/key'));
    // The same JWT is fine where demo schemes are allowed.
    expect((await usk(open, jwt)).status).toBe(200);
  });

  it('user secret keys: a demo attribute beside a real one is refused too', async () => {
    const jwt = await forgedJwt([
      [EMAIL, 'a@example.org'],
      [DEMO_NAME, 'Alice'],
    ]);
    await expectRefused(await usk(strict, jwt));
    expect((await usk(strict, await forgedJwt([[EMAIL, 'a@example.org']]))).status).toBe(200);
  });

  it('signing keys from a session JWT: refused whole, even when pubSignId selects only the real attribute', async () => {
    const jwt = await sessionJwt(open, [{ t: DEMO_EMAIL }], { [DEMO_EMAIL]: 'a@example.org' });
    await expectRefused(await signKey(strict, jwt));
    const mixed = await forgedJwt([
      [EMAIL, 'a@example.org'],
      [DEMO_NAME, 'Alice'],
    ]);
    await expectRefused(await signKey(strict, mixed, [{ t: EMAIL }]));
    const real = await signKey(strict, await forgedJwt([[EMAIL, 'a@example.org']]), [{ t: EMAIL }]);
    expect(real.status).toBe(200);
    expect((await real.json()).pubSignKey.policy.con).toEqual([{ t: EMAIL, v: 'a@example.org' }]);
  });

  it('signing keys from an API key whose identity is in a demo scheme', async () => {
    record = {
      keyId: '00000000-0000-4000-8000-000000000001',
      tenantId: '00000000-0000-4000-8000-000000000000',
      organisationName: null,
      publicAttributes: [{ t: DEMO_EMAIL, v: 'sender@example.org' }],
      privateAttributes: [],
      budgets: { perHour: null, perDay: null, counter: '00000000-0000-4000-8000-000000000001' },
    };
    await expectRefused(await signKey(strict, 'PG-test'));
    expect((await signKey(open, 'PG-test')).status).toBe(200);
    record = { ...record, publicAttributes: [{ t: EMAIL, v: 'sender@example.org' }] };
    expect((await signKey(strict, 'PG-test')).status).toBe(200);
  });
});

describe('off (the default)', () => {
  it('demo attributes start sessions and get user secret keys and signing keys', async () => {
    const jwt = await sessionJwt(open, [{ t: DEMO_EMAIL }], { [DEMO_EMAIL]: 'a@example.org' });
    const key = await usk(open, jwt);
    expect(key.status).toBe(200);
    expect((await key.json()).key).toHaveLength(768);
    const signing = await signKey(open, jwt, [{ t: DEMO_EMAIL }]);
    expect(signing.status).toBe(200);
    expect((await signing.json()).pubSignKey.policy.con).toEqual([{ t: DEMO_EMAIL, v: 'a@example.org' }]);
  });
});
