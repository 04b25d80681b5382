import { describe, expect, it } from 'vitest';
import { hidePolicy } from '../policy.js';
import { keyRequestCon, keyTimestamp, validityUntil4am } from './keyrequest.js';
import { readSessionClaims } from './jwt.js';

const EMAIL = 'pbdf.sidn-pbdf.email.email';
const DOMAIN = 'pbdf.sidn-pbdf.email.domain';
const MOBILE = 'pbdf.sidn-pbdf.mobilenumber.mobilenumber';

describe('keyRequestCon', () => {
  const sealed = {
    ts: 1_760_000_000,
    con: [
      { t: MOBILE, v: '0612345678' },
      { t: EMAIL, v: 'alice@example.org' },
      { t: 'irma-demo.gemeente.personalData.surname', v: 'Smith' },
      { t: DOMAIN, v: 'example.org' },
    ],
  };
  const hidden = hidePolicy(sealed);

  it('fixes the e-mail and domain from the recipient id, leaves other values to the wallet, sorts by type', () => {
    expect(keyRequestCon('alice@example.org', hidden)).toEqual([
      { t: 'irma-demo.gemeente.personalData.surname' },
      { t: DOMAIN, v: 'example.org' },
      { t: EMAIL, v: 'alice@example.org' },
      { t: MOBILE },
    ]);
  });

  it('never puts a hidden or hinted value into the request; caller values win', () => {
    const con = keyRequestCon('alice@example.org', hidden, {
      values: { [MOBILE]: '0612345678', [EMAIL]: 'other@example.org' },
    });
    expect(con.find((a) => a.t === MOBILE)).toEqual({ t: MOBILE, v: '0612345678' });
    expect(con.find((a) => a.t === EMAIL)).toEqual({ t: EMAIL, v: 'other@example.org' });
    for (const a of keyRequestCon('alice@example.org', hidden)) if (a.v !== undefined) expect(a.v).not.toMatch(/\*|^$/);
  });

  it('an id that is not an address fixes nothing', () => {
    expect(keyRequestCon('recipient-1', hidden).every((a) => a.v === undefined)).toBe(true);
  });

  it('refuses malformed input', () => {
    expect(() => keyRequestCon('a', { ts: 1 } as never)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(() => keyRequestCon('a', { ts: 1, con: [{ t: '' }] })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
    expect(() => keyTimestamp({ ts: -1, con: [] })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(keyTimestamp(hidden)).toBe(sealed.ts);
  });
});

describe('validityUntil4am', () => {
  it('counts to the next 04:00 local time, clamped to a minute and a day', () => {
    expect(validityUntil4am(new Date(2026, 0, 10, 3, 0, 0))).toBe(3600);
    expect(validityUntil4am(new Date(2026, 0, 10, 4, 0, 0))).toBe(86_400);
    expect(validityUntil4am(new Date(2026, 0, 10, 3, 59, 30))).toBe(60);
    expect(validityUntil4am(new Date(2026, 0, 10, 22, 0, 0))).toBe(6 * 3600);
  });
});

describe('readSessionClaims', () => {
  const jwt = (payload: unknown) =>
    `${Buffer.from('{"alg":"RS256"}').toString('base64url')}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}.sig`;

  it('reads status, proofStatus and exp without verifying', () => {
    expect(readSessionClaims(jwt({ status: 'DONE', proofStatus: 'VALID', exp: 5, extra: 'ü' }))).toEqual({
      status: 'DONE',
      proofStatus: 'VALID',
      exp: 5,
    });
    expect(readSessionClaims(jwt({ status: 'INITIALIZED' }))).toEqual({ status: 'INITIALIZED' });
  });

  it('gives undefined for anything that is not such a JWT', () => {
    for (const bad of [
      '',
      'a.b',
      'a.b.c.d',
      'x.!!!.y',
      jwt({ status: 'WHATEVER' }),
      jwt(['DONE']),
      `x.${Buffer.from('not json').toString('base64url')}.y`,
    ]) {
      expect(readSessionClaims(bad)).toBeUndefined();
    }
    expect(readSessionClaims(jwt({ status: 'DONE', exp: 1.5 }))).toEqual({ status: 'DONE' });
  });
});
