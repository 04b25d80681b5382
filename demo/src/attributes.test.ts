import { describe, expect, it } from 'vitest';
import { EMAIL, EXTRA_ATTRIBUTES, MOBILE, attributeLabel, identityLines, isEmailType } from './attributes.js';

describe('attributes', () => {
  it('names known types and falls back to the last part of unknown ones', () => {
    expect(attributeLabel(EMAIL)).toBe('E-mail address');
    expect(attributeLabel(MOBILE)).toBe('Mobile number');
    expect(attributeLabel('irma-demo.MijnOverheid.fullName.familyname')).toBe('familyname (demo credential)');
    // The self-issuable demo e-mail never reads like the real one.
    expect(attributeLabel('pbdf.sidn-pbdf.email.email')).toBe('E-mail address');
    expect(attributeLabel('irma-demo.sidn-pbdf.email.email')).toBe('E-mail address (demo credential)');
    expect(attributeLabel('irma-demo.sidn-pbdf.mobilenumber.mobilenumber')).toBe('Mobile number (demo credential)');
    expect(attributeLabel('')).toBe('');
    for (const kind of EXTRA_ATTRIBUTES) expect(attributeLabel(kind.type)).toBe(kind.label);
  });

  it('recognizes e-mail types of any scheme', () => {
    expect(isEmailType('irma-demo.sidn-pbdf.email.email')).toBe(true);
    expect(isEmailType('pbdf.sidn-pbdf.email.domain')).toBe(false);
  });

  it('lists an identity one attribute per line, marking absent values', () => {
    expect(identityLines({ ts: 1, con: [{ t: EMAIL, v: 'a@b.nl' }, { t: MOBILE }] })).toEqual([
      { label: 'E-mail address', value: 'a@b.nl' },
      { label: 'Mobile number', value: '(no value)' },
    ]);
    expect(identityLines(undefined)).toEqual([]);
  });
});
