import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EMAIL, MOBILE } from './attributes.js';
import { encryptionPolicy, normalizeValue, policyTimestamp } from './recipients.js';

describe('encryptionPolicy', () => {
  it('keys each recipient by address with the e-mail attribute first, then the extras in order', () => {
    const result = encryptionPolicy(
      [
        { email: ' bob@example.com ', extras: [{ type: MOBILE, value: '+31 6-1234 5678' }] },
        { email: 'carol@example.net', extras: [] },
      ],
      1_700_000_000,
    );
    expect(result).toEqual({
      ok: true,
      policy: {
        'bob@example.com': {
          ts: 1_700_000_000,
          con: [
            { t: EMAIL, v: 'bob@example.com' },
            { t: MOBILE, v: '+31612345678' },
          ],
        },
        'carol@example.net': { ts: 1_700_000_000, con: [{ t: EMAIL, v: 'carol@example.net' }] },
      },
    });
  });

  it('reports each problem at its row and field', () => {
    const result = encryptionPolicy(
      [
        { email: '', extras: [] },
        { email: 'not an address', extras: [] },
        {
          email: 'bob@example.com',
          extras: [
            { type: MOBILE, value: ' ' },
            { type: MOBILE, value: '+316' },
          ],
        },
        { email: 'bob@example.com', extras: [] },
        { email: 'carol@example', extras: [] },
      ],
      1,
    );
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.problems.map(({ row, field }) => [row, field])).toEqual([
      [0, 'email'],
      [1, 'email'],
      [2, 0],
      [3, 'email'],
      [4, 'email'],
    ]);
    expect(result.problems[3]!.message).toBe('bob@example.com is listed twice.');
  });

  it('refuses an attribute required twice for one recipient', () => {
    const result = encryptionPolicy(
      [
        {
          email: 'bob@example.com',
          extras: [
            { type: MOBILE, value: '+31611111111' },
            { type: MOBILE, value: '+31622222222' },
          ],
        },
      ],
      1,
    );
    expect(result).toMatchObject({ ok: false, problems: [{ row: 0, field: 1 }] });
  });

  it('needs at least one recipient', () => {
    expect(encryptionPolicy([], 1)).toMatchObject({
      ok: false,
      problems: [{ message: 'Add at least one recipient.' }],
    });
  });

  it('gives one entry per distinct address, each bound to that address', () => {
    const address = fc
      .tuple(
        fc.stringMatching(/^[a-z0-9._-]{1,12}$/),
        fc.stringMatching(/^[a-z0-9-]{1,10}$/),
        fc.constantFrom('com', 'org', 'nl'),
      )
      .map(([l, d, t]) => `${l}@${d}.${t}`);
    fc.assert(
      fc.property(fc.uniqueArray(address, { minLength: 1, maxLength: 6 }), fc.nat(), (emails, ts) => {
        const result = encryptionPolicy(
          emails.map((email) => ({ email, extras: [] })),
          ts,
        );
        expect(result.ok).toBe(true);
        if (!result.ok) return;
        expect(Object.keys(result.policy)).toEqual(emails);
        for (const email of emails) expect(result.policy[email]).toEqual({ ts, con: [{ t: EMAIL, v: email }] });
      }),
    );
  });
});

describe('values and time', () => {
  it('normalizes phone numbers as wallets disclose them and only trims other values', () => {
    expect(normalizeValue(MOBILE, ' +31 (0)6-12 ')).toBe('+310612');
    expect(normalizeValue('pbdf.gemeente.personalData.surname', '  van Dijk ')).toBe('van Dijk');
  });

  it('rounds the policy timestamp down, never into the future', () => {
    expect(policyTimestamp(1_700_000_000_999)).toBe(1_700_000_000);
    fc.assert(
      fc.property(fc.nat({ max: 2 ** 45 }), (ms) => {
        expect(policyTimestamp(ms) * 1000).toBeLessThanOrEqual(ms);
      }),
    );
  });
});
