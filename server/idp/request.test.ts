import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PkgError } from '../errors.js';
import { DEFAULT_VALIDITY, DISCLOSURE_CONTEXT, MAX_VALIDITY, disclosureRequest, type StartBody } from './request.js';

const EMAIL = 'pbdf.sidn-pbdf.email.email';
const DOMAIN = 'pbdf.sidn-pbdf.email.domain';
const MOBILE = 'pbdf.sidn-pbdf.mobilenumber.mobilenumber';
const SURNAME = 'pbdf.gemeente.personalData.surname';

const disclose = (body: StartBody) => disclosureRequest(body).request.disclose;

function codeOf(run: () => unknown): string | undefined {
  try {
    run();
  } catch (e) {
    return e instanceof PkgError ? e.code : 'OTHER';
  }
  return undefined;
}

describe('PostGuard start shape {con, validity?}', () => {
  it('wraps the request as pg-pkg does: context, validity 300 by default', () => {
    expect(disclosureRequest({ con: [{ t: EMAIL, v: 'a@x' }] })).toEqual({
      validity: DEFAULT_VALIDITY,
      request: { '@context': DISCLOSURE_CONTEXT, disclose: [[[{ type: EMAIL, value: 'a@x', notNull: true }]]] },
    });
    expect(disclosureRequest({ con: [{ t: EMAIL }], validity: 0 }).validity).toBe(0);
    expect(disclosureRequest({ con: [{ t: EMAIL }], validity: MAX_VALIDITY }).validity).toBe(MAX_VALIDITY);
  });

  it('each attribute is its own disjunction; an empty or null value means any value', () => {
    expect(disclose({ con: [{ t: EMAIL, v: '' }, { t: MOBILE, v: null }, { t: SURNAME }] })).toEqual([
      [[{ type: EMAIL, notNull: true }]],
      [[{ type: MOBILE, notNull: true }]],
      [[{ type: SURNAME, notNull: true }]],
    ]);
  });

  it('an optional attribute gets the empty alternative last (newest pg-pkg), not first', () => {
    expect(
      disclose({
        con: [
          { t: EMAIL, v: 'a@x' },
          { t: SURNAME, optional: true },
          { t: MOBILE, optional: false },
        ],
      }),
    ).toEqual([
      [[{ type: EMAIL, value: 'a@x', notNull: true }]],
      [[{ type: SURNAME, notNull: true }], []],
      [[{ type: MOBILE, notNull: true }]],
    ]);
  });

  it('a condiscon item passes through, its optional flags ignored and empty alternatives kept in place', () => {
    expect(
      disclose({ con: [[[{ t: EMAIL, v: 'a@x', optional: true }], [{ t: DOMAIN, v: 'x' }, { t: MOBILE }], []]] }),
    ).toEqual([
      [
        [{ type: EMAIL, value: 'a@x', notNull: true }],
        [
          { type: DOMAIN, value: 'x', notNull: true },
          { type: MOBILE, notNull: true },
        ],
        [],
      ],
    ]);
  });

  it('validity above 86400 is VALIDITY; nothing to disclose is EMPTY_IDENTITY', () => {
    expect(codeOf(() => disclosureRequest({ con: [{ t: EMAIL }], validity: MAX_VALIDITY + 1 }))).toBe('VALIDITY');
    expect(codeOf(() => disclosureRequest({ con: [] }))).toBe('EMPTY_IDENTITY');
    expect(codeOf(() => disclosureRequest({ con: [[[]]] }))).toBe('EMPTY_IDENTITY');
    expect(codeOf(() => disclosureRequest({ con: [[[], []]] }))).toBe('EMPTY_IDENTITY');
    expect(codeOf(() => disclosureRequest({ attr: { a: { t: 1, con: [] } } }))).toBe('EMPTY_IDENTITY');
    expect(codeOf(() => disclosureRequest({ attr: { a: { t: 1, con: [{ t: EMAIL }] }, b: { t: 1, con: [] } } }))).toBe(
      'EMPTY_IDENTITY',
    );
  });
});

describe('spec start shape {attr: {recipient: {t, con}}}', () => {
  it('one recipient: each attribute is a disjunction of its own (the same request as PostGuard shape)', () => {
    const spec = disclose({ attr: { 'a@x': { t: 1_700_000_000, con: [{ t: EMAIL, v: 'a@x' }, { t: MOBILE }] } } });
    expect(spec).toEqual(disclose({ con: [{ t: EMAIL, v: 'a@x' }, { t: MOBILE }] }));
  });

  it('several recipients: one disjunction, one alternative per recipient, attributes grouped by credential', () => {
    expect(
      disclose({
        attr: {
          'a@x': {
            t: 1,
            con: [
              { t: EMAIL, v: 'a@x' },
              { t: SURNAME, v: 'A' },
              { t: DOMAIN, v: 'x' },
            ],
          },
          'b@y': { t: 2, con: [{ t: EMAIL, v: 'b@y' }] },
        },
      }),
    ).toEqual([
      [
        [
          { type: EMAIL, value: 'a@x', notNull: true },
          { type: DOMAIN, value: 'x', notNull: true },
          { type: SURNAME, value: 'A', notNull: true },
        ],
        [{ type: EMAIL, value: 'b@y', notNull: true }],
      ],
    ]);
  });

  it('exactly one of con and attr', () => {
    expect(codeOf(() => disclosureRequest({}))).toBe('BAD_REQUEST');
    expect(codeOf(() => disclosureRequest({ con: [{ t: EMAIL }], attr: { a: { t: 1, con: [{ t: EMAIL }] } } }))).toBe(
      'BAD_REQUEST',
    );
  });
});

describe('properties', () => {
  const type = fc.constantFrom(EMAIL, DOMAIN, MOBILE, SURNAME, 'irma-demo.gemeente.personalData.fullname');
  const value = fc.option(fc.string({ maxLength: 12 }), { nil: undefined });

  it('every attribute asked for appears once, with its value exactly when non-empty, and notNull', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ t: type, v: value, optional: fc.boolean() }), { minLength: 1, maxLength: 8 }),
        (con) => {
          const out = disclose({ con });
          expect(out).toHaveLength(con.length);
          out.forEach((discon, i) => {
            const a = con[i]!;
            expect(discon).toHaveLength(a.optional ? 2 : 1);
            if (a.optional) expect(discon[1]).toEqual([]);
            const request = discon[0]![0]!;
            expect(request.type).toBe(a.t);
            expect(request.notNull).toBe(true);
            expect(request.value).toBe(a.v === undefined || a.v === '' ? undefined : a.v);
          });
        },
      ),
    );
  });

  it('grouping keeps every attribute of a recipient and puts those of one credential side by side', () => {
    fc.assert(
      fc.property(
        fc.array(fc.array(fc.record({ t: type, v: value }), { minLength: 1, maxLength: 6 }), {
          minLength: 2,
          maxLength: 4,
        }),
        (cons) => {
          const attr = Object.fromEntries(cons.map((con, i) => [`r${i}`, { t: i, con }]));
          const [discon] = disclose({ attr });
          expect(discon).toHaveLength(cons.length);
          discon!.forEach((alternative, i) => {
            expect(alternative.map((a) => a.type).sort()).toEqual(cons[i]!.map((a) => a.t).sort());
            const credentials = alternative.map((a) => a.type.split('.').slice(0, 3).join('.'));
            const runs = credentials.filter((c, j) => j === 0 || c !== credentials[j - 1]);
            expect(new Set(runs).size).toBe(runs.length);
          });
        },
      ),
    );
  });
});
