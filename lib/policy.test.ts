import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { hex, vectors } from '../test/vectors.js';
import { Reader } from './bincode.js';
import {
  compareUtf8,
  encodePolicy,
  hidePolicy,
  normalizeEncryptionPolicy,
  normalizePolicy,
  readPolicy,
  type Policy,
} from './policy.js';

describe('hidden policies', () => {
  const hint = 'pbdf.sidn-pbdf.mobilenumber.mobilenumber';
  it.each([
    ['123456789', '12345****'],
    ['123', '***'],
    ['0612345678', '061234****'],
    ['', ''],
  ])('masks hint value %s as %s', (v, masked) => {
    expect(hidePolicy({ ts: 5, con: [{ t: hint, v }] }).con[0]).toEqual({ t: hint, v: masked });
  });

  it('empties other values and keeps absent ones absent, in sender order', () => {
    const p: Policy = { ts: 9, con: [{ t: 'z.email', v: 'a@b' }, { t: 'a.name' }] };
    expect(hidePolicy(p)).toEqual({ ts: 9, con: [{ t: 'z.email', v: '' }, { t: 'a.name' }] });
  });

  it('masks multi-byte hint values on character boundaries and rejects splits', () => {
    expect(hidePolicy({ ts: 1, con: [{ t: hint, v: 'é1234' }] }).con[0]!.v).toBe('é****');
    expect(() => hidePolicy({ ts: 1, con: [{ t: hint, v: '1é234' }] })).toThrow(
      expect.objectContaining({ code: 'INVALID_POLICY' }),
    );
  });
});

describe('policy validation', () => {
  it('accepts t as an alias of ts and BigInt timestamps', () => {
    expect(normalizePolicy({ t: 7, con: [] })).toEqual({ ts: 7, con: [] });
    expect(normalizePolicy({ ts: 7n, con: [{ t: 'a', v: null }] })).toEqual({ ts: 7, con: [{ t: 'a' }] });
  });

  it.each([
    [{ con: [] }],
    [{ ts: -1, con: [] }],
    [{ ts: 2 ** 60, con: [] }],
    [{ ts: 1.5, con: [] }],
    [{ ts: 1, con: 'x' }],
    [{ ts: 1, con: [{ v: 'x' }] }],
    [{ ts: 1, con: [{ t: 'a', v: 3 }] }],
    [null],
  ])('rejects %j with INVALID_POLICY', (p) => {
    expect(() => normalizePolicy(p)).toThrow(expect.objectContaining({ code: 'INVALID_POLICY' }));
  });

  it('reads a Map or an object as an encryption policy', () => {
    const pol = { ts: 1, con: [{ t: 'pbdf.sidn-pbdf.email.email', v: 'a@example.com' }] };
    expect(normalizeEncryptionPolicy(new Map([['a', pol]]))).toEqual([['a', pol]]);
    expect(normalizeEncryptionPolicy({ a: pol })).toEqual([['a', pol]]);
  });
});

describe('utf-8 ordering', () => {
  it('orders by UTF-8 bytes, not UTF-16 code units', () => {
    // U+FF5E (3 bytes, EF BD 9E) sorts before U+1F600 (4 bytes, F0 ...) in UTF-8,
    // but after it in UTF-16 (0xFF5E > 0xD83D).
    expect(compareUtf8('\uFF5E', '\u{1F600}')).toBeLessThan(0);
    expect('\uFF5E' < '\u{1F600}').toBe(false);
  });
});

describe('policy codec', () => {
  const attr = fc.record({
    t: fc.string({ unit: 'grapheme' }),
    v: fc.option(fc.string({ unit: 'grapheme' }), { nil: undefined }),
  });
  it('round-trips random policies', () => {
    fc.assert(
      fc.property(fc.nat(), fc.array(attr, { maxLength: 6 }), (ts, con) => {
        const p: Policy = { ts, con: con.map((a) => (a.v === undefined ? { t: a.t } : a)) };
        const r = new Reader(encodePolicy(p), 'policy');
        expect(readPolicy(r)).toEqual(p);
        expect(r.remaining).toBe(0);
      }),
    );
  });

  it('rejects an attribute count larger than the bytes left, before allocating', () => {
    const bytes = new Uint8Array(16);
    new DataView(bytes.buffer).setBigUint64(8, 1n << 62n, true);
    expect(() => readPolicy(new Reader(bytes, 'policy'))).toThrow(expect.objectContaining({ code: 'TRUNCATED' }));
  });
});
