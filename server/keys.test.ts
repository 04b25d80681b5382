import { createHmac, createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PkgError } from './errors.js';
import { keyTimestamp } from './routes/keys.js';
import { disclose } from '../devtools/standin/wallet.js';
import { testKeyPem } from '../devtools/standin/testing.js';
import { startPkg, type RunningPkg } from './testing.js';
import { disclosingClaims, emailDisclosed, signClaims } from './idp/testing.js';

/**
 * Every rule of the key routes, broken one at a time over HTTP: credentials, JWT algorithm, claims,
 * expiry, session outcome, timestamps. Forged tokens are signed with the stand-in's own key, so only
 * the rule under test is wrong.
 */

const EMAIL = 'irma-demo.sidn-pbdf.email.email';

let pkg: RunningPkg;
let standinKey: KeyObject;
let standinPublicPem: string;

beforeAll(async () => {
  pkg = await startPkg();
  standinKey = createPrivateKey(testKeyPem());
  standinPublicPem = createPublicKey(standinKey).export({ type: 'spki', format: 'pem' }).toString();
});

afterAll(async () => {
  await pkg?.close();
});

const claims = (extra: Record<string, unknown> = {}) => disclosingClaims(pkg.clock.now(), emailDisclosed(EMAIL), extra);

const without = (name: string): Record<string, unknown> => {
  const c = claims();
  delete c[name];
  return c;
};

const b64 = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');

const rs256 = (payload: Record<string, unknown>, key: KeyObject = standinKey) => signClaims(payload, key);

/** The classic confusion attack: HS256 with the server's public key PEM as the HMAC secret. */
function hs256WithPublicKey(payload: Record<string, unknown>): string {
  const input = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64(payload)}`;
  return `${input}.${createHmac('sha256', standinPublicPem).update(input).digest('base64url')}`;
}

const key = (jwt: string, path = `/v2/irma/key/${pkg.clock.now()}`) =>
  fetch(`${pkg.url}${path}`, { headers: { authorization: `Bearer ${jwt}` } });

const signKey = (authorization: string | undefined, body: unknown = { pubSignId: [{ t: EMAIL }] }) =>
  fetch(`${pkg.url}/v2/irma/sign/key`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(authorization === undefined ? {} : { authorization }) },
    body: JSON.stringify(body),
  });

async function expectError(response: Response, status: number, code: string): Promise<void> {
  expect(response.status).toBe(status);
  const body = await response.json();
  expect(body).toEqual({ error: true, code, message: expect.any(String) });
}

async function realJwt(start: unknown, attributes: Record<string, string> | null): Promise<string> {
  const started = await fetch(`${pkg.url}/v2/irma/start`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(start),
  });
  const session = await started.json();
  if (attributes !== null) await disclose(session, attributes);
  return (await fetch(`${pkg.url}/v2/irma/jwt/${session.token}`)).text();
}

describe('credentials', () => {
  it('a forged-but-correct token is accepted (the baseline every negative test departs from)', async () => {
    const response = await key(await rs256(claims()));
    expect(response.status).toBe(200);
    expect((await response.json()).key).toHaveLength(768);
  });

  it('no Authorization, another scheme or an empty bearer: 401 UNAUTHENTICATED with a Bearer challenge', async () => {
    for (const headers of [
      {} as Record<string, string>,
      { authorization: 'Basic dXNlcjpwYXNz' },
      { authorization: 'Bearer ' },
      { authorization: 'Bearer a b' },
    ]) {
      const response = await fetch(`${pkg.url}/v2/irma/key/1`, { headers });
      expect(response.headers.get('www-authenticate')).toBe('Bearer');
      await expectError(response, 401, 'UNAUTHENTICATED');
    }
    await expectError(await signKey(undefined), 401, 'UNAUTHENTICATED');
  });

  it('authentication comes before the body: no credential and a bad body is still 401', async () => {
    await expectError(await signKey(undefined, { nonsense: true }), 401, 'UNAUTHENTICATED');
  });

  it('an API key cannot fetch decryption keys, and is refused without a database', async () => {
    await expectError(await key('PG-abcdef'), 401, 'JWT_INVALID');
    await expectError(await signKey('Bearer PG-abcdef'), 401, 'API_KEYS_DISABLED');
    // And /v2/api-key/validate does not exist without a database.
    await expectError(
      await fetch(`${pkg.url}/v2/api-key/validate`, { headers: { authorization: 'Bearer PG-abcdef' } }),
      404,
      'NOT_FOUND',
    );
  });
});

describe('JWT algorithm and signature', () => {
  it('alg none is refused', async () => {
    await expectError(await key(`${b64({ alg: 'none', typ: 'JWT' })}.${b64(claims())}.`), 401, 'JWT_INVALID');
  });

  it('HS256 keyed with the public key PEM is refused', async () => {
    const forged = hs256WithPublicKey(claims());
    await expectError(await key(forged), 401, 'JWT_INVALID');
    await expectError(await signKey(`Bearer ${forged}`), 401, 'JWT_INVALID');
  });

  it('other RSA algorithms with the right key are refused (RS384, RS512, PS256)', async () => {
    for (const alg of ['RS384', 'RS512', 'PS256']) {
      const jwt = await signClaims(claims(), standinKey, { alg });
      await expectError(await key(jwt), 401, 'JWT_INVALID');
    }
  });

  it('a token signed by another key is refused', async () => {
    const other = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
    await expectError(await key(await rs256(claims(), other)), 401, 'JWT_INVALID');
  });

  it('a tampered payload is refused', async () => {
    const [header, , signature] = (await rs256(claims())).split('.');
    const tampered = `${header}.${b64(claims({ disclosed: [[{ id: EMAIL, status: 'PRESENT', rawvalue: 'mallory@example.org' }]] }))}.${signature}`;
    await expectError(await key(tampered), 401, 'JWT_INVALID');
    const truncated = (await rs256(claims())).slice(0, -4);
    await expectError(await key(truncated), 401, 'JWT_INVALID');
  });
});

describe('JWT claims', () => {
  it('expired: 400 CHRONOLOGY, as pg-pkg (also exactly at exp)', async () => {
    await expectError(await key(await rs256(claims({ exp: pkg.clock.now() - 1 }))), 400, 'CHRONOLOGY');
    await expectError(await key(await rs256(claims({ exp: pkg.clock.now() }))), 400, 'CHRONOLOGY');
    await expectError(await signKey(`Bearer ${await rs256(claims({ exp: pkg.clock.now() }))}`), 400, 'CHRONOLOGY');
  });

  it('a real session JWT expires with the session validity', async () => {
    const jwt = await realJwt({ con: [{ t: EMAIL, v: 'a@example.org' }], validity: 60 }, { [EMAIL]: 'a@example.org' });
    expect((await key(jwt)).status).toBe(200);
    pkg.clock.advance(60);
    await expectError(await key(jwt, '/v2/irma/key'), 400, 'CHRONOLOGY');
  });

  for (const claim of ['exp', 'iat', 'iss', 'sub', 'token', 'status', 'type']) {
    it(`missing ${claim}: 401 JWT_INVALID`, async () => {
      await expectError(await key(await rs256(without(claim))), 401, 'JWT_INVALID');
    });
  }

  it('wrong kinds of claims: 401 JWT_INVALID', async () => {
    for (const extra of [
      { iss: '' },
      { exp: String(pkg.clock.now() + 300) },
      { exp: pkg.clock.now() + 300.5 },
      { iat: -1 },
      { status: 'FINISHED' },
      { type: 'disclosure' },
      { proofStatus: 'GOOD' },
      { aud: 'someone-else' },
    ]) {
      await expectError(await key(await rs256(claims(extra))), 401, 'JWT_INVALID');
    }
    for (const payload of [[], 'x', null]) {
      const jwt = await signClaims(payload, standinKey, { alg: 'RS256' });
      await expectError(await key(jwt), 401, 'JWT_INVALID');
    }
  });
});

describe('session outcome', () => {
  it('a session that is not DONE gives its status and no key, and no signing keys', async () => {
    const jwt = await realJwt({ con: [{ t: EMAIL, v: 'a@example.org' }] }, null);
    const response = await key(jwt);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: 'INITIALIZED' });
    expect(await (await signKey(`Bearer ${jwt}`)).json()).toEqual({ status: 'INITIALIZED' });
  });

  it('DONE with an INVALID proof: no key, and no signing keys (pg-pkg would sign an empty identity)', async () => {
    const knob = await fetch(`${pkg.yivi.url}/standin/next-outcome`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ outcome: 'INVALID' }),
    });
    expect(knob.ok).toBe(true);
    const jwt = await realJwt({ con: [{ t: EMAIL, v: 'a@example.org' }] }, { [EMAIL]: 'a@example.org' });
    expect(await (await key(jwt)).json()).toEqual({ status: 'DONE', proofStatus: 'INVALID' });
    expect(await (await signKey(`Bearer ${jwt}`)).json()).toEqual({ status: 'DONE', proofStatus: 'INVALID' });
  });

  it('MISSING_ATTRIBUTES (null inside disclosed) is accepted as a JWT and proves nothing', async () => {
    const jwt = await realJwt({ con: [{ t: EMAIL, v: 'a@example.org' }] }, { 'irma-demo.other.cred.attr': 'x' });
    const body = await (await key(jwt)).json();
    expect(body).toEqual({ status: 'DONE', proofStatus: 'MISSING_ATTRIBUTES' });
  });

  it('a VALID disclosure of no attributes: 400 EMPTY_IDENTITY, no key of any kind', async () => {
    const nullOnly = [[{ rawvalue: null, id: EMAIL, status: 'NULL', issuancetime: 0 }]];
    for (const extra of [{ disclosed: [] }, { disclosed: null }, { disclosed: [[]] }, { disclosed: nullOnly }]) {
      const jwt = await rs256(claims(extra));
      await expectError(await key(jwt), 400, 'EMPTY_IDENTITY');
      await expectError(await key(jwt, '/v2/irma/key'), 400, 'EMPTY_IDENTITY');
      await expectError(await signKey(`Bearer ${jwt}`), 400, 'EMPTY_IDENTITY');
    }
    await expectError(await key(await rs256(without('disclosed'))), 400, 'EMPTY_IDENTITY');
    // The way it happens for real: an all-optional request the person answers with nothing.
    const jwt = await realJwt({ con: [{ t: EMAIL, optional: true }] }, {});
    await expectError(await key(jwt), 400, 'EMPTY_IDENTITY');
  });

  it('sign/key whose pubSignId selects none of the disclosed attributes: 400 EMPTY_IDENTITY', async () => {
    const jwt = await rs256(claims());
    await expectError(
      await signKey(`Bearer ${jwt}`, { pubSignId: [{ t: 'irma-demo.other.cred.attr' }] }),
      400,
      'EMPTY_IDENTITY',
    );
    await expectError(await signKey(`Bearer ${jwt}`, { pubSignId: [] }), 400, 'EMPTY_IDENTITY');
    expect((await signKey(`Bearer ${jwt}`, { pubSignId: [{ t: EMAIL }] })).status).toBe(200);
  });

  it('a cancelled session gives no key', async () => {
    const started = await (
      await fetch(`${pkg.url}/v2/irma/start`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ con: [{ t: EMAIL }] }),
      })
    ).json();
    await fetch(started.sessionPtr.u, { method: 'DELETE' });
    const jwt = await (await fetch(`${pkg.url}/v2/irma/jwt/${started.token}`)).text();
    expect(await (await key(jwt)).json()).toEqual({ status: 'CANCELLED' });
  });

  it('a signing-type or VALID-but-null-group token proves nothing / is refused', async () => {
    expect(await (await key(await rs256(claims({ type: 'signing' })))).json()).toEqual({
      status: 'DONE',
      proofStatus: 'VALID',
    });
    await expectError(await key(await rs256(claims({ disclosed: [null] }))), 401, 'JWT_INVALID');
  });
});

describe('identity-server values that are not valid Unicode', () => {
  // JSON can carry a lone surrogate ("\ud800"), which has no UTF-8 form: no identity can be derived
  // from it. Refused as a malformed token, never a 500.
  const lone = ['a@example.org\ud800', '\udc00a@example.org', 'a\ud800\ud800b@example.org'];

  it('a lone surrogate in a disclosed value: 401 JWT_INVALID for a user key and for signing keys', async () => {
    for (const value of lone) {
      const jwt = await rs256(claims({ disclosed: [[{ rawvalue: value, id: EMAIL, status: 'PRESENT' }]] }));
      await expectError(await key(jwt), 401, 'JWT_INVALID');
      await expectError(await key(jwt, '/v2/irma/key'), 401, 'JWT_INVALID');
      await expectError(await signKey(`Bearer ${jwt}`), 401, 'JWT_INVALID');
    }
  });

  it('a lone surrogate in a disclosed attribute type: 401 JWT_INVALID', async () => {
    const type = `${EMAIL}\ud800`;
    const jwt = await rs256(claims({ disclosed: [[{ rawvalue: 'a@example.org', id: type, status: 'PRESENT' }]] }));
    await expectError(await key(jwt), 401, 'JWT_INVALID');
    await expectError(await signKey(`Bearer ${jwt}`, { pubSignId: [{ t: type }] }), 401, 'JWT_INVALID');
  });

  it('also when the stand-in identity server discloses it in a real session', async () => {
    const jwt = await realJwt({ con: [{ t: EMAIL }] }, { [EMAIL]: 'a@example.org\ud800' });
    await expectError(await key(jwt), 401, 'JWT_INVALID');
    await expectError(await signKey(`Bearer ${jwt}`), 401, 'JWT_INVALID');
  });

  it('a well-formed pair (an emoji) is fine', async () => {
    const jwt = await rs256(
      claims({ disclosed: [[{ rawvalue: 'a\ud83d\ude00@example.org', id: EMAIL, status: 'PRESENT' }]] }),
    );
    expect((await key(jwt)).status).toBe(200);
    expect((await signKey(`Bearer ${jwt}`)).status).toBe(200);
  });
});

describe('key timestamps', () => {
  it('a timestamp more than 60 s ahead of the clock: 400 CHRONOLOGY', async () => {
    await expectError(await key(await rs256(claims()), `/v2/irma/key/${pkg.clock.now() + 61}`), 400, 'CHRONOLOGY');
    await expectError(await key(await rs256(claims()), '/v2/irma/key/18446744073709551615'), 400, 'CHRONOLOGY');
  });

  it('up to 60 s ahead is accepted (pg-js rounds the sealing second; clocks run a little fast)', async () => {
    for (const ahead of [1, 60]) {
      const ts = pkg.clock.now() + ahead;
      const response = await key(await rs256(claims()), `/v2/irma/key/${ts}`);
      expect(response.status).toBe(200);
      expect((await response.json()).key).toHaveLength(768);
    }
  });

  it('any past timestamp is fine (a year-old ciphertext), and the present one too', async () => {
    expect((await key(await rs256(claims()), `/v2/irma/key/${pkg.clock.now() - 365 * 86_400}`)).status).toBe(200);
    expect((await key(await rs256(claims()), '/v2/irma/key/0')).status).toBe(200);
  });

  it('not an unsigned 64-bit integer: 400 TIMESTAMP', async () => {
    for (const ts of ['abc', '-1', '1.5', '1e9', '18446744073709551616', '0x10', '%201']) {
      await expectError(await key(await rs256(claims()), `/v2/irma/key/${ts}`), 400, 'TIMESTAMP');
    }
  });

  it('too long, however long: 400 TIMESTAMP, not a schema or routing error', async () => {
    const jwt = await rs256(claims());
    // Past the schema's old bound (32), and past the router's segment bound (200).
    for (const ts of ['1'.repeat(21), '1'.repeat(33), '1'.repeat(64), '1'.repeat(201), '9'.repeat(4000)]) {
      await expectError(await key(jwt, `/v2/irma/key/${ts}`), 400, 'TIMESTAMP');
      await expectError(await key(jwt, `/v2/idp/key/${ts}`), 400, 'TIMESTAMP');
    }
    // Another path shape is still no route.
    await expectError(await key(jwt, `/v2/irma/key/${'1'.repeat(201)}/x`), 404, 'NOT_FOUND');
    await expectError(await key(jwt, `/v2/other/key/${'1'.repeat(201)}`), 404, 'NOT_FOUND');
  });

  it('keyTimestamp: after exp is CHRONOLOGY even when not in the future', () => {
    const check = (raw: string | undefined, now: number, exp: number) => {
      try {
        return keyTimestamp(raw, now, exp);
      } catch (e) {
        return (e as PkgError).code;
      }
    };
    expect(check('150', 200, 100)).toBe('CHRONOLOGY');
    expect(check('100', 200, 100)).toBe(100);
    expect(check('201', 200, 300)).toBe(201);
    expect(check('260', 200, 300)).toBe(260);
    expect(check('261', 200, 300)).toBe('CHRONOLOGY');
    expect(check('260', 200, 250)).toBe('CHRONOLOGY');
    expect(check(undefined, 200, 300)).toBe(200);
    expect(check('', 200, 300)).toBe('TIMESTAMP');
  });
});
