import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { hex, vectors } from '../test/vectors.js';
import {
  canonicalPolicy,
  canonicalize,
  isCanonical,
  kemIdentity,
  policyDigest,
  rawPolicyDigest,
  signingIdentity,
  signingIdentityCandidates,
  trimWhiteSpace,
} from './identity.js';
import { normalizePolicy, type Policy } from './policy.js';

const EMAIL = 'pbdf.sidn-pbdf.email.email';
const MOBILE = 'pbdf.sidn-pbdf.mobilenumber.mobilenumber';

describe('identity derivation', () => {
  for (const [name, entry] of Object.entries<any>(vectors.identities)) {
    it(`matches pg-wasm for ${name}`, () => {
      const p = normalizePolicy(entry.policy);
      expect(hex(policyDigest(p))).toBe(entry.derive_D_hex);
      expect(hex(kemIdentity(p))).toBe(entry.kem_id_sha3_512_of_D_hex);
      expect(hex(signingIdentity(p))).toBe(entry.ibs_id_sha3_256_of_D_hex);
    });
  }

  it('does not depend on attribute order but does on the timestamp', () => {
    const bob = normalizePolicy(vectors.identities.polBob.policy);
    const reversed = { ...bob, con: [...bob.con].reverse() };
    expect(hex(policyDigest(reversed))).toBe(hex(policyDigest(bob)));
    expect(hex(policyDigest({ ...bob, ts: bob.ts + 1 }))).not.toBe(hex(policyDigest(bob)));
  });

  it('distinguishes an absent value from an empty one', () => {
    const a: Policy = { ts: 1, con: [{ t: 'x' }] };
    const b: Policy = { ts: 1, con: [{ t: 'x', v: '' }] };
    expect(hex(policyDigest(a))).not.toBe(hex(policyDigest(b)));
  });
});

describe('canonical identities (upstream #335)', () => {
  it("upstream's vectors", () => {
    expect(canonicalize(EMAIL, ' Alice@Example.COM ')).toBe('alice@example.com');
    expect(canonicalize(MOBILE, '+31 (0)6 12345678')).toBe('+31612345678');
    expect(canonicalize(MOBILE, '0031612345678')).toBe('+31612345678');
    expect(canonicalize(MOBILE, '06 1234 5678')).toBe('0612345678');
    expect(canonicalize('test.test.email', ' Alice@Example.COM ')).toBe(' Alice@Example.COM ');
  });

  it('matches the type by its tail in any scheme, with a dot before it', () => {
    expect(canonicalize('irma-demo.sidn-pbdf.email.email', 'A@B.nl')).toBe('a@b.nl');
    expect(canonicalize('irma-demo.sidn-pbdf.mobilenumber.mobilenumber', '0031 6-1234.5678')).toBe('+31612345678');
    expect(canonicalize('xsidn-pbdf.email.email', 'A@B.nl')).toBe('A@B.nl');
    expect(canonicalize('sidn-pbdf.email.email', 'A@B.nl')).toBe('A@B.nl');
    expect(canonicalize('pbdf.sidn-pbdf.email.domain', 'B.NL')).toBe('B.NL');
  });

  it('trims every kind of Unicode whitespace from an e-mail address; drops every phone separator', () => {
    expect(canonicalize(EMAIL, '\u00A0\u2003\tBob@X.org\u3000\n')).toBe('bob@x.org');
    expect(canonicalize(MOBILE, '+31\u00A06\u202F12\u201134\u201356/78(9)')).toBe('+316123456789');
  });

  it('trims as the regex trim it replaced did, on any mix of whitespace and other characters', () => {
    // The replaced trim was s.replace(/^\p{White_Space}+|\p{White_Space}+$/gu, ''). Its second
    // branch is what made it quadratic, and the lint rule against such patterns holds in tests too,
    // so the oracle is its two branches without that: the leading run as it was matched, and the
    // trailing run as the leading run of the string reversed (by UTF-16 units, which undoes itself
    // even across lone surrogates; neither half of a pair is whitespace, so nothing else changes).
    const leading = /^\p{White_Space}+/u;
    const reverse = (s: string) => s.split('').reverse().join('');
    const regexTrim = (s: string) => reverse(reverse(s.replace(leading, '')).replace(leading, ''));
    // Every White_Space code point, some that are not (BOM and zero-width space, which String#trim
    // and \s disagree on, C0 controls beside the whitespace ones), letters, a surrogate pair and lone halves.
    const unit = fc.constantFrom(
      ...'\t\n\v\f\r \u0085\u00A0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200A\u2028\u2029\u202F\u205F\u3000',
      '\uFEFF',
      '\u200B',
      '\u0008',
      '\u001C',
      'a',
      'Z',
      '@',
      '\u{1F600}',
      '\uD800',
      '\uDC00',
    );
    const mixed = fc.array(unit, { maxLength: 12 }).map((units) => units.join(''));
    fc.assert(
      fc.property(fc.oneof(mixed, fc.string({ unit: 'binary', maxLength: 12 })), (v) => {
        expect(trimWhiteSpace(v)).toBe(regexTrim(v));
        expect(canonicalize(EMAIL, v)).toBe(regexTrim(v).toLowerCase());
      }),
      { numRuns: 2000 },
    );
  });

  it('is total and idempotent; isCanonical holds exactly for canonical values (and E.164 phones)', () => {
    const type = fc.constantFrom(
      EMAIL,
      MOBILE,
      'irma-demo.sidn-pbdf.email.email',
      'pbdf.gemeente.personalData.fullname',
    );
    const value = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 20 }),
      fc.stringMatching(/^[ 0-9+()\-./\u00A0\u202F\u2011\u2013]{0,20}$/),
      fc.emailAddress(),
    );
    fc.assert(
      fc.property(type, value, (t, v) => {
        const once = canonicalize(t, v);
        expect(canonicalize(t, once)).toBe(once);
        if (t === MOBILE) expect(isCanonical(t, once)).toBe(/^\+[1-9]\d{0,14}$/.test(once));
        else expect(isCanonical(t, once)).toBe(true);
        if (once !== v) expect(isCanonical(t, v)).toBe(false);
      }),
      { numRuns: 500 },
    );
    expect(isCanonical(MOBILE, '+31612345678')).toBe(true);
    expect(isCanonical(MOBILE, '0612345678')).toBe(false);
    expect(isCanonical(MOBILE, '+0612345678')).toBe(false);
    expect(isCanonical(MOBILE, `+1${'2'.repeat(15)}`)).toBe(false);
  });

  it('spellings of one address derive one identity; a canonical policy derives exactly what it did before', () => {
    const raw: Policy = { ts: 5, con: [{ t: EMAIL, v: ' Alice@Example.COM ' }] };
    const canonical: Policy = { ts: 5, con: [{ t: EMAIL, v: 'alice@example.com' }] };
    expect(canonicalPolicy(canonical)).toBe(canonical);
    expect(hex(kemIdentity(raw))).toBe(hex(kemIdentity(canonical)));
    expect(hex(signingIdentity(raw))).toBe(hex(signingIdentity(canonical)));
    expect(hex(policyDigest(canonical))).toBe(hex(rawPolicyDigest(canonical)));
    expect(hex(rawPolicyDigest(raw))).not.toBe(hex(rawPolicyDigest(canonical)));
  });

  it('a reader accepts the canonical identity first, then the raw spelling (keys of an older PKG)', () => {
    const raw: Policy = { ts: 5, con: [{ t: EMAIL, v: 'Alice@Example.com' }] };
    const ids = signingIdentityCandidates(raw).map(hex);
    expect(ids).toHaveLength(2);
    expect(ids[0]).toBe(hex(signingIdentity(raw)));
    expect(signingIdentityCandidates({ ts: 5, con: [{ t: EMAIL, v: 'alice@example.com' }] })).toHaveLength(1);
  });
});
