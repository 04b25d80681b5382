import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { evaluateDisclosure, roundDownToWeek } from './disclosure.js';
import { marshalConDisCon, parseSessionRequest } from './request.js';
import type { NormalizedAttributeRequest } from './request.js';
import { chooseDisclosure } from './wallet.js';

const EMAIL = 'irma-demo.sidn-pbdf.email.email';
const MOBILE = 'irma-demo.sidn-pbdf.mobilenumber.mobilenumber';
const T = 1_760_572_800; // a week boundary (2911 weeks)

const req = (type: string, extra: Partial<NormalizedAttributeRequest> = {}): NormalizedAttributeRequest => ({
  type,
  notNull: false,
  ...extra,
});

describe('evaluateDisclosure', () => {
  it('accepts a disclosure that satisfies every disjunction', () => {
    const out = evaluateDisclosure(
      [[[req(EMAIL, { value: 'a@b.c', notNull: true })]]],
      [[{ id: EMAIL, rawvalue: 'a@b.c' }]],
      T,
    );
    expect(out).toEqual({
      proofStatus: 'VALID',
      disclosed: [
        [
          {
            rawvalue: 'a@b.c',
            value: { '': 'a@b.c', en: 'a@b.c', nl: 'a@b.c' },
            id: EMAIL,
            status: 'PRESENT',
            issuancetime: T,
          },
        ],
      ],
    });
  });

  it('compares values byte for byte: no trimming, no case folding', () => {
    const disclose = [[[req(EMAIL, { value: 'Alice@Example.org' })]]];
    for (const v of ['alice@example.org', 'Alice@Example.org ', ' Alice@Example.org', 'Alice@Example.org\u200b']) {
      expect(evaluateDisclosure(disclose, [[{ id: EMAIL, rawvalue: v }]], T).proofStatus).toBe('MISSING_ATTRIBUTES');
    }
    expect(evaluateDisclosure(disclose, [[{ id: EMAIL, rawvalue: 'Alice@Example.org' }]], T).proofStatus).toBe('VALID');
  });

  it('reports an unsatisfied disjunction as null, keeping the others', () => {
    const out = evaluateDisclosure(
      [[[req(EMAIL)]], [[req(MOBILE, { notNull: true })]]],
      [[{ id: EMAIL, rawvalue: 'x' }], [{ id: MOBILE, rawvalue: null }]],
      T,
    );
    expect(out.proofStatus).toBe('MISSING_ATTRIBUTES');
    expect(out.disclosed?.[1]).toBeNull();
    expect(out.disclosed?.[0]?.[0]?.status).toBe('PRESENT');
  });

  it('discloses a null attribute with status NULL when null is allowed', () => {
    const out = evaluateDisclosure([[[req(MOBILE)]]], [[{ id: MOBILE, rawvalue: null }]], T);
    expect(out).toEqual({
      proofStatus: 'VALID',
      disclosed: [[{ rawvalue: null, value: null, id: MOBILE, status: 'NULL', issuancetime: T }]],
    });
  });

  it('needs a set per disjunction, else nothing matches', () => {
    expect(evaluateDisclosure([[[req(EMAIL)]], [[], [req(MOBILE)]]], [[{ id: EMAIL, rawvalue: 'x' }]], T)).toEqual({
      proofStatus: 'MISSING_ATTRIBUTES',
      disclosed: undefined,
    });
  });

  it('takes the empty option only for an empty set (irmamobile#360), whatever the option order', () => {
    for (const discon of [
      [[], [req(MOBILE)]],
      [[req(MOBILE)], []],
    ]) {
      expect(evaluateDisclosure([discon], [[]], T)).toEqual({ proofStatus: 'VALID', disclosed: [[]] });
      expect(evaluateDisclosure([discon], [[{ id: MOBILE, rawvalue: '06' }]], T).disclosed?.[0]?.[0]?.id).toBe(MOBILE);
      expect(evaluateDisclosure([discon], [[{ id: EMAIL, rawvalue: 'x' }]], T).proofStatus).toBe('MISSING_ATTRIBUTES');
    }
  });

  it('tries conjunctions in order and matches attributes by position', () => {
    const discon = [[req(EMAIL), req(MOBILE)], [req(MOBILE)]];
    expect(
      evaluateDisclosure(
        [discon],
        [
          [
            { id: MOBILE, rawvalue: '06' },
            { id: EMAIL, rawvalue: 'e' },
          ],
        ],
        T,
      ).disclosed,
    ).toEqual([[expect.objectContaining({ id: MOBILE })]]);
    expect(
      evaluateDisclosure(
        [discon],
        [
          [
            { id: EMAIL, rawvalue: 'e' },
            { id: MOBILE, rawvalue: '06' },
          ],
        ],
        T,
      ).disclosed?.[0],
    ).toHaveLength(2);
  });

  it('puts unrequested sets in one trailing EXTRA group', () => {
    const sets = [
      [{ id: EMAIL, rawvalue: 'e' }],
      [{ id: MOBILE, rawvalue: '06' }],
      [{ id: 'a.b.c.d', rawvalue: null }],
    ];
    const out = evaluateDisclosure([[[req(EMAIL)]]], sets, T);
    expect(out.proofStatus).toBe('VALID');
    expect(out.disclosed?.[1]?.map((a) => [a.id, a.status])).toEqual([
      [MOBILE, 'EXTRA'],
      ['a.b.c.d', 'EXTRA'],
    ]);
  });

  it('discloses a whole credential as "present"', () => {
    const credential = 'irma-demo.sidn-pbdf.email';
    const out = evaluateDisclosure([[[req(credential, { notNull: true })]]], [[{ id: credential, rawvalue: null }]], T);
    expect(out.proofStatus).toBe('VALID');
    expect(out.disclosed?.[0]?.[0]?.rawvalue).toBe('present');
  });

  it('rounds issuance times down to a week', () => {
    expect(roundDownToWeek(T + 604_799)).toBe(T);
    expect(roundDownToWeek(T)).toBe(T);
  });
});

describe('the simulated wallet chooses what the server accepts', () => {
  const part = fc.stringMatching(/^[a-z]{1,5}$/);
  const id = fc.tuple(part, part, part, part).map((p) => p.join('.'));
  const value = fc.string({ maxLength: 12 });
  const attr = fc.record(
    { type: id, value: fc.option(value, { nil: undefined }), notNull: fc.boolean() },
    { requiredKeys: ['type', 'notNull'] },
  );
  // Single-attribute conjunctions keep the adjacency rule out of the way.
  const condiscon = fc.array(fc.array(fc.array(attr, { minLength: 1, maxLength: 1 }), { minLength: 1, maxLength: 3 }), {
    minLength: 1,
    maxLength: 4,
  });

  it('VALID whenever the person holds the requested values', () => {
    fc.assert(
      fc.property(condiscon, (disclose) => {
        const parsed = parseSessionRequest({ '@context': 'https://irma.app/ld/request/disclosure/v2', disclose });
        // A person who holds the first option of every disjunction, with the demanded values.
        const holdings: Record<string, string> = {};
        for (const discon of parsed.disclose) {
          for (const ar of discon[0]!) holdings[ar.type] = ar.value ?? holdings[ar.type] ?? 'v';
        }
        // Conflicting demands on one id cannot all be met; skip those requests.
        fc.pre(
          parsed.disclose.every((d) => d[0]!.every((ar) => ar.value === undefined || holdings[ar.type] === ar.value)),
        );
        const sets = chooseDisclosure(marshalConDisCon(parsed.disclose), holdings);
        expect(evaluateDisclosure(parsed.disclose, sets, T).proofStatus).toBe('VALID');
      }),
    );
  });
});
