import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { manualClock } from '../../devtools/standin/testing.js';
import { PkgError } from '../errors.js';
import { ResultJwtVerifier, provenAttributes, type ResultClaims } from './jwt.js';
import { disclosingClaims, emailDisclosed, signClaims } from './testing.js';

/** The verifier on its own: key caching, rotation and backoff with a fake key source and clock. */

const EMAIL = 'irma-demo.sidn-pbdf.email.email';

function rsa(bits = 2048): { privateKey: KeyObject; pem: string } {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: bits });
  return { privateKey, pem: publicKey.export({ type: 'spki', format: 'pem' }).toString() };
}

const keyA = rsa();
const keyB = rsa();

const claims = (now: number, extra: Record<string, unknown> = {}) =>
  disclosingClaims(now, emailDisclosed(EMAIL), extra);

const sign = (payload: Record<string, unknown>, key: KeyObject = keyA.privateKey) => signClaims(payload, key);

/** A key source that counts its calls and can be switched or broken. */
function keySource(initial: string) {
  const source = {
    pem: initial as string | undefined,
    calls: 0,
    fetch: async () => {
      source.calls++;
      if (source.pem === undefined) throw new Error('connection refused');
      return source.pem;
    },
  };
  return source;
}

async function code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(PkgError);
    return (e as PkgError).code;
  }
  return 'OK';
}

describe('ResultJwtVerifier key handling', () => {
  it('fetches the key on first use only, and once for concurrent requests', async () => {
    const clock = manualClock();
    const source = keySource(keyA.pem);
    const verifier = new ResultJwtVerifier({ fetchPublicKey: source.fetch, clock });
    expect(source.calls).toBe(0);
    const jwt = await sign(claims(clock.now()));
    const results = await Promise.all([verifier.verify(jwt), verifier.verify(jwt), verifier.verify(jwt)]);
    expect(results[0]!.attributes).toEqual([{ t: EMAIL, v: 'a@example.org' }]);
    expect(source.calls).toBe(1);
    await verifier.verify(jwt);
    expect(source.calls).toBe(1);
  });

  it('re-fetches after a signature miss, at most once per 30 s, and then accepts the rotated key', async () => {
    const clock = manualClock();
    const source = keySource(keyA.pem);
    const verifier = new ResultJwtVerifier({ fetchPublicKey: source.fetch, clock });
    await verifier.verify(await sign(claims(clock.now())));
    source.pem = keyB.pem; // the identity server rotated its key
    const rotated = await sign(claims(clock.now()), keyB.privateKey);

    clock.advance(10);
    expect(await code(verifier.verify(rotated))).toBe('JWT_INVALID'); // too soon to re-fetch
    expect(source.calls).toBe(1);

    clock.advance(25);
    expect((await verifier.verify(await sign(claims(clock.now()), keyB.privateKey))).claims.status).toBe('DONE');
    expect(source.calls).toBe(2);
    // Old-key tokens now fail, and a forged signature does not make it fetch again right away.
    expect(await code(verifier.verify(await sign(claims(clock.now()))))).toBe('JWT_INVALID');
    expect(source.calls).toBe(2);
  });

  it('a miss against an unchanged key stays a miss', async () => {
    const clock = manualClock();
    const source = keySource(keyA.pem);
    const verifier = new ResultJwtVerifier({ fetchPublicKey: source.fetch, clock });
    await verifier.verify(await sign(claims(clock.now())));
    clock.advance(60);
    expect(await code(verifier.verify(await sign(claims(clock.now()), keyB.privateKey)))).toBe('JWT_INVALID');
    expect(source.calls).toBe(2);
  });

  it('an unreachable key source is IDP_UNAVAILABLE, remembered for 3 s, then tried again', async () => {
    const clock = manualClock();
    const source = keySource(keyA.pem);
    source.pem = undefined;
    const verifier = new ResultJwtVerifier({ fetchPublicKey: source.fetch, clock });
    const jwt = await sign(claims(clock.now()));
    expect(await code(verifier.verify(jwt))).toBe('IDP_UNAVAILABLE');
    expect(await code(verifier.verify(jwt))).toBe('IDP_UNAVAILABLE');
    expect(source.calls).toBe(1);
    source.pem = keyA.pem;
    clock.advance(3);
    expect((await verifier.verify(jwt)).claims.token).toBe('AAAAAAAAAAAAAAAAAAAA');
    expect(source.calls).toBe(2);
  });

  it('refuses a key that is not RSA of at least 2048 bits', async () => {
    const clock = manualClock();
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' })
      .publicKey.export({ type: 'spki', format: 'pem' })
      .toString();
    for (const pem of [ec, rsa(1024).pem, 'not a key']) {
      const verifier = new ResultJwtVerifier({ fetchPublicKey: async () => pem, clock });
      expect(await code(verifier.verify(await sign(claims(clock.now()))))).toBe('IDP_UNAVAILABLE');
    }
  });

  it('decides the algorithm before fetching anything', async () => {
    const clock = manualClock();
    const source = keySource(keyA.pem);
    const verifier = new ResultJwtVerifier({ fetchPublicKey: source.fetch, clock });
    const body = Buffer.from(JSON.stringify(claims(clock.now()))).toString('base64url');
    for (const alg of ['none', 'HS256', 'RS512', 'PS256', 'ES256']) {
      const header = Buffer.from(JSON.stringify({ alg, typ: 'JWT' })).toString('base64url');
      expect(await code(verifier.verify(`${header}.${body}.c2ln`))).toBe('JWT_INVALID');
    }
    for (const junk of ['', 'a.b', 'a.b.c.d', '!!.??.xx', 'e30.e30.', `${'a'.repeat(70_000)}.e30.e30`]) {
      expect(await code(verifier.verify(junk))).toBe('JWT_INVALID');
    }
    expect(source.calls).toBe(0);
  });

  it('exp uses leeway 0: valid one second before, expired at exp', async () => {
    const clock = manualClock();
    const verifier = new ResultJwtVerifier({ fetchPublicKey: async () => keyA.pem, clock });
    const jwt = await sign(claims(clock.now(), { exp: clock.now() + 5 }));
    clock.advance(4);
    expect((await verifier.verify(jwt)).claims.exp).toBe(clock.now() + 1);
    clock.advance(1);
    expect(await code(verifier.verify(jwt))).toBe('CHRONOLOGY');
  });
});

describe('provenAttributes', () => {
  const base = claims(1000) as unknown as ResultClaims;
  const attr = (id: string, status: string, rawvalue: string | null) => ({
    id,
    status,
    rawvalue,
    value: null,
    issuancetime: 0,
  });

  it('keeps PRESENT attributes of a VALID disclosure, drops EXTRA and NULL', () => {
    const disclosed = [
      [attr(EMAIL, 'PRESENT', 'a@x')],
      [],
      [attr('a.b.c.d', 'NULL', null)],
      [attr('e.f.g.h', 'EXTRA', 'x')],
    ];
    expect(provenAttributes({ ...base, disclosed })).toEqual([{ t: EMAIL, v: 'a@x' }]);
    expect(provenAttributes({ ...base, disclosed: undefined })).toEqual([]);
  });

  it('proves nothing unless DONE, VALID and disclosing, and then does not look at disclosed', () => {
    const junk = [null, 'x'];
    expect(
      provenAttributes({
        ...base,
        proofStatus: 'MISSING_ATTRIBUTES',
        disclosed: [[attr(EMAIL, 'PRESENT', 'a')], null],
      }),
    ).toBeUndefined();
    expect(provenAttributes({ ...base, proofStatus: 'INVALID', disclosed: junk })).toBeUndefined();
    expect(provenAttributes({ ...base, status: 'CONNECTED', disclosed: junk })).toBeUndefined();
    expect(provenAttributes({ ...base, type: 'signing', disclosed: junk })).toBeUndefined();
    const { proofStatus: _p, ...noProof } = base;
    expect(provenAttributes(noProof as ResultClaims)).toBeUndefined();
  });

  it('a VALID disclosure with a malformed list is a bad JWT', () => {
    for (const disclosed of [
      'x',
      [null],
      [[null]],
      [[{ status: 'PRESENT', rawvalue: 'a' }]],
      [[attr(EMAIL, 'MAYBE', 'a')]],
      [[{ ...attr(EMAIL, 'PRESENT', 'a'), rawvalue: 5 }]],
      [Array.from({ length: 257 }, () => attr(EMAIL, 'EXTRA', 'a'))],
    ]) {
      expect(() => provenAttributes({ ...base, disclosed })).toThrow(expect.objectContaining({ code: 'JWT_INVALID' }));
    }
  });

  it('a PRESENT type or value with a lone surrogate (no UTF-8 form) is a bad JWT; surrogate pairs are fine', () => {
    for (const value of ['\ud800', 'a\udbff', '\udc00a', 'a\udfffb', '\ud800\ud800\udc00', '\ud83d\ude00\udc00']) {
      for (const disclosed of [[[attr(EMAIL, 'PRESENT', value)]], [[attr(`${EMAIL}${value}`, 'PRESENT', 'a')]]])
        expect(() => provenAttributes({ ...base, disclosed })).toThrow(
          expect.objectContaining({ code: 'JWT_INVALID' }),
        );
    }
    const pair = 'a\ud83d\ude00\ud800\udc00';
    expect(provenAttributes({ ...base, disclosed: [[attr(EMAIL, 'PRESENT', pair)]] })).toEqual([{ t: EMAIL, v: pair }]);
  });
});

describe('beyond pg-pkg: issuer and times in the future', () => {
  const clock = manualClock(1_800_000_000);
  const now = clock.now();
  const verifier = (options: { issuer?: string; clockSkewSeconds?: number } = {}) =>
    new ResultJwtVerifier({ fetchPublicKey: keySource(keyA.pem).fetch, clock, ...options });

  it('iat may lie at most 60 s in the future (clock skew), no further', async () => {
    const v = verifier();
    expect(await code(v.verify(await sign(claims(now, { iat: now + 60 }))))).toBe('OK');
    expect(await code(v.verify(await sign(claims(now, { iat: now + 61 }))))).toBe('JWT_INVALID');
    expect(await code(v.verify(await sign(claims(now, { iat: now + 86_400, exp: now + 90_000 }))))).toBe('JWT_INVALID');
    // Any past iat is fine, as before.
    expect(await code(v.verify(await sign(claims(now, { iat: 0 }))))).toBe('OK');
  });

  it('nbf, when present, is an integer at most 60 s in the future', async () => {
    const v = verifier();
    expect(await code(v.verify(await sign(claims(now, { nbf: now - 10 }))))).toBe('OK');
    expect(await code(v.verify(await sign(claims(now, { nbf: now + 60 }))))).toBe('OK');
    expect(await code(v.verify(await sign(claims(now, { nbf: now + 61 }))))).toBe('JWT_INVALID');
    expect(await code(v.verify(await sign(claims(now, { nbf: 'soon' }))))).toBe('JWT_INVALID');
    expect(await code(v.verify(await sign(claims(now, { nbf: now + 0.5 }))))).toBe('JWT_INVALID');
  });

  it('the allowance is configurable', async () => {
    const strict = verifier({ clockSkewSeconds: 0 });
    expect(await code(strict.verify(await sign(claims(now, { iat: now }))))).toBe('OK');
    expect(await code(strict.verify(await sign(claims(now, { iat: now + 1 }))))).toBe('JWT_INVALID');
  });

  it('with an issuer configured, iss must be exactly it; without, any iss passes', async () => {
    const v = verifier({ issuer: 'irmaserver' });
    expect(await code(v.verify(await sign(claims(now))))).toBe('OK');
    for (const iss of ['other', 'IRMASERVER', 'irmaserver ', '']) {
      expect(await code(v.verify(await sign(claims(now, { iss }))))).toBe('JWT_INVALID');
    }
    expect(await code(verifier().verify(await sign(claims(now, { iss: 'other' }))))).toBe('OK');
  });
});
