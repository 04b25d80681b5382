import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { YiviError } from './errors.js';
import { DEFAULT_JWT_VALIDITY, marshalConDisCon, parseSessionRequest, pinsAValue, walletRequest } from './request.js';

const DISCLOSURE = 'https://irma.app/ld/request/disclosure/v2';
const EMAIL = 'pbdf.sidn-pbdf.email.email';

const failure = (body: unknown): YiviError => {
  try {
    parseSessionRequest(body);
  } catch (e) {
    if (e instanceof YiviError) return e;
    throw e;
  }
  throw new Error('expected a YiviError');
};

describe('parseSessionRequest', () => {
  it('reads the extended form the PKG sends', () => {
    const parsed = parseSessionRequest({
      validity: 300,
      request: {
        '@context': DISCLOSURE,
        disclose: [
          [[{ type: EMAIL, value: 'alice@example.org', notNull: true }]],
          [[], [{ type: 'pbdf.a.b.c', notNull: true }]],
        ],
      },
    });
    expect(parsed).toEqual({
      validity: 300,
      clientTimeout: 0,
      disclose: [
        [[{ type: EMAIL, value: 'alice@example.org', notNull: true }]],
        [[], [{ type: 'pbdf.a.b.c', notNull: true }]],
      ],
    });
    expect(pinsAValue(parsed.disclose)).toBe(true);
  });

  it('reads the plain form with irmago defaults, and the extended timeout', () => {
    const plain = parseSessionRequest({
      '@context': DISCLOSURE,
      disclose: [[[EMAIL]]],
      labels: { 0: { en: 'E-mail' } },
    });
    expect(plain).toEqual({
      validity: DEFAULT_JWT_VALIDITY,
      clientTimeout: 0,
      disclose: [[[{ type: EMAIL, notNull: false }]]],
      labels: { 0: { en: 'E-mail' } },
    });
    expect(pinsAValue(plain.disclose)).toBe(false);
    // `validity` and `timeout` are extension fields: ignored on a plain request, as irmago does.
    expect(
      parseSessionRequest({ '@context': DISCLOSURE, validity: 5, timeout: 5, disclose: [[[EMAIL]]] }),
    ).toMatchObject({
      validity: 120,
      clientTimeout: 0,
    });
    expect(
      parseSessionRequest({ validity: 0, timeout: 30, request: { '@context': DISCLOSURE, disclose: [[[EMAIL]]] } }),
    ).toMatchObject({
      validity: 120,
      clientTimeout: 30,
    });
  });

  it('treats a null value as no required value', () => {
    expect(
      parseSessionRequest({ '@context': DISCLOSURE, disclose: [[[{ type: EMAIL, value: null }]]] }).disclose,
    ).toEqual([[[{ type: EMAIL, notNull: false }]]]);
  });

  it('refuses what irmago refuses, with its messages', () => {
    expect(failure({ '@context': DISCLOSURE, disclose: [[['a.b.c.d.e']]] }).detail).toBe(
      'Expected attribute request to consist of 4 or 3 parts, 5 found',
    );
    expect(failure({ '@context': DISCLOSURE, disclose: [[[]], [[]]] }).detail).toBe(
      'Disclosure request had no attributes',
    );
    expect(failure({ '@context': DISCLOSURE, disclose: [[['a.b.c.d']], []] }).detail).toBe('Empty disjunction');
    // Same credential type, not adjacent.
    expect(failure({ '@context': DISCLOSURE, disclose: [[['s.i.c.x', 's.i.d.y', 's.i.c.z']]] }).type).toBe(
      'INVALID_REQUEST',
    );
    // Adjacent is fine; the same ids in different conjunctions are fine.
    expect(() =>
      parseSessionRequest({ '@context': DISCLOSURE, disclose: [[['s.i.c.x', 's.i.c.z', 's.i.d.y']], [['s.i.c.x']]] }),
    ).not.toThrow();
    expect(failure({ '@context': DISCLOSURE, host: 'evil.test', disclose: [[[EMAIL]]] }).type).toBe('UNAUTHORIZED');
    expect(failure({ '@context': DISCLOSURE, revocation: { [EMAIL]: {} }, disclose: [[[EMAIL]]] }).type).toBe(
      'UNSUPPORTED',
    );
    expect(
      failure({ nextSession: { url: 'https://x.test' }, request: { '@context': DISCLOSURE, disclose: [[[EMAIL]]] } })
        .type,
    ).toBe('UNSUPPORTED');
    expect(failure({ request: { '@context': 'https://irma.app/ld/request/issuance/v2' } }).status).toBe(501);
  });
});

describe('the request as the wallet sees it', () => {
  it('puts server fields first and sends plain requests back as bare ids', () => {
    const parsed = parseSessionRequest({
      '@context': DISCLOSURE,
      clientReturnUrl: 'https://back.test',
      disclose: [[[EMAIL, { type: 'pbdf.a.b.c', notNull: true }, { type: 'pbdf.a.b.d', value: '' }]]],
      skipExpiryCheck: ['pbdf.a.b'],
    });
    const out = walletRequest(parsed, 'bm9uY2U=', '2.8', true);
    expect(Object.keys(out)).toEqual([
      '@context',
      'context',
      'nonce',
      'protocolVersion',
      'devMode',
      'clientReturnUrl',
      'disclose',
      'skipExpiryCheck',
    ]);
    expect(out.disclose).toEqual([[[EMAIL, { type: 'pbdf.a.b.c', notNull: true }, { type: 'pbdf.a.b.d', value: '' }]]]);
    expect(walletRequest(parsed, 'x', '2.8', false)).not.toHaveProperty('devMode');
  });

  const part = fc.stringMatching(/^[a-z0-9-]{1,8}$/);
  const id = fc
    .tuple(part, part, part, fc.option(part, { nil: undefined }))
    .map(([a, b, c, d]) => (d === undefined ? `${a}.${b}.${c}` : `${a}.${b}.${c}.${d}`));
  const attributeRequest = fc.oneof(
    id,
    fc.record(
      {
        type: id,
        value: fc.option(fc.string(), { nil: undefined }),
        notNull: fc.option(fc.boolean(), { nil: undefined }),
      },
      { requiredKeys: ['type'] },
    ),
  );
  // One attribute per conjunction keeps the adjacency rule out of the way.
  const condiscon = fc.array(fc.array(fc.array(attributeRequest, { maxLength: 1 }), { minLength: 1, maxLength: 3 }), {
    minLength: 1,
    maxLength: 4,
  });

  it('is a fixed point: parsing what the wallet is sent gives the same request back', () => {
    fc.assert(
      fc.property(condiscon, (disclose) => {
        fc.pre(disclose.some((d) => d.some((c) => c.length > 0)));
        const parsed = parseSessionRequest({ '@context': DISCLOSURE, disclose });
        const sent = marshalConDisCon(parsed.disclose);
        expect(parseSessionRequest({ '@context': DISCLOSURE, disclose: sent }).disclose).toEqual(parsed.disclose);
        // Objects survive only when they demand something.
        for (const ar of sent.flat(2)) {
          if (typeof ar !== 'string') expect(ar.value !== undefined || ar.notNull === true).toBe(true);
        }
      }),
    );
  });
});
