import type { Fp6, Fp12 } from '@noble/curves/abstract/tower.js';
import { bls12_381 } from '@noble/curves/bls12-381.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { hex, rustVectors, unb64 } from '../../test/vectors.js';
import { ErrorCode, PostGuardError } from '../errors.js';
import {
  GT_COMPRESSED_BYTES,
  GtPowBase,
  R,
  compressGt,
  decompressGt,
  gtGenerator,
  isGtElement,
  lexFp,
  lexFp2,
  lexFp6,
  sqrtFp6,
} from './gt.js';

const { Fp, Fp2, Fp6: F6, Fp12: F12 } = bls12_381.fields;
const P = Fp.ORDER;
const X = -0xd201000000010000n;

const mpkGt = unb64(rustVectors('pg-core-kem-regression.txt').pk!).subarray(384);

const arbScalar = fc.bigInt({ min: 0n, max: R - 1n });
const arbFp = fc.bigInt({ min: 0n, max: P - 1n });
const arbFp6 = fc
  .tuple(arbFp, arbFp, arbFp, arbFp, arbFp, arbFp)
  .map((c) => F6.fromBigSix(c as [bigint, bigint, bigint, bigint, bigint, bigint]));
const arbFp12 = fc.tuple(arbFp6, arbFp6).map(([c0, c1]) => F12.create({ c0, c1 }));

const gt = (k: bigint): Fp12 => F12.pow(gtGenerator().base, k);
const inGtSlow = (f: Fp12): boolean => !F12.is0(f) && F12.eql(F12.pow(f, R), F12.ONE);

function expectMalformed(fn: () => unknown, message: RegExp): void {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(PostGuardError);
    expect((e as PostGuardError).code).toBe(ErrorCode.MALFORMED);
    expect((e as Error).message).toMatch(message);
    return;
  }
  expect.fail('expected a MALFORMED error');
}

describe('the facts the fast paths rely on', () => {
  it('p = x (mod r) and gcd(p - x, p^4 - p^2 + 1) = r', () => {
    const gcd = (a: bigint, b: bigint): bigint => (b === 0n ? a : gcd(b, a % b));
    expect((P - X) % R).toBe(0n);
    expect(gcd(P - X, P ** 4n - P ** 2n + 1n)).toBe(R);
  });

  it('f^p = f^x on Gt, so the Frobenius map is exponentiation by x', () => {
    const f = gt(123456789n);
    expect(F12.eql(F12.frobeniusMap(f, 1), F12.pow(f, ((X % R) + R) % R))).toBe(true);
  });

  it('the generator is e(g1, g2) and lies in Gt', () => {
    expect(inGtSlow(gtGenerator().base)).toBe(true);
  });
});

describe('lexicographically largest (pg-curve sign rule)', () => {
  const half = (P - 1n) / 2n;
  it('Fp: larger than (p - 1) / 2', () => {
    expect(lexFp(0n)).toBe(false);
    expect(lexFp(half)).toBe(false);
    expect(lexFp(half + 1n)).toBe(true);
    expect(lexFp(P - 1n)).toBe(true);
  });

  it('Fp2: decided by c1, by c0 only when c1 = 0', () => {
    expect(lexFp2(Fp2.fromBigTuple([P - 1n, 1n]))).toBe(false);
    expect(lexFp2(Fp2.fromBigTuple([1n, P - 1n]))).toBe(true);
    expect(lexFp2(Fp2.fromBigTuple([P - 1n, 0n]))).toBe(true);
    expect(lexFp2(Fp2.fromBigTuple([1n, 0n]))).toBe(false);
  });

  it('Fp6: decided by c2, then c1, then c0', () => {
    const six = (...c: bigint[]) => F6.fromBigSix(c as [bigint, bigint, bigint, bigint, bigint, bigint]);
    expect(lexFp6(six(P - 1n, 0n, P - 1n, 0n, 0n, 1n))).toBe(false);
    expect(lexFp6(six(0n, 0n, 0n, 0n, 0n, P - 1n))).toBe(true);
    expect(lexFp6(six(P - 1n, 0n, 1n, 0n, 0n, 0n))).toBe(false);
    expect(lexFp6(six(1n, 0n, 0n, P - 1n, 0n, 0n))).toBe(true);
    expect(lexFp6(six(P - 1n, 0n, 0n, 0n, 0n, 0n))).toBe(true);
    expect(lexFp6(six(0n, 0n, 0n, 0n, 0n, 0n))).toBe(false);
  });

  it('exactly one of x and -x is largest, for non-zero x', () => {
    fc.assert(
      fc.property(arbFp6, (x) => {
        fc.pre(!F6.is0(x));
        expect(lexFp6(x)).toBe(!lexFp6(F6.neg(x)));
      }),
      { numRuns: 200 },
    );
  });
});

describe('sqrtFp6', () => {
  it('finds a root of every square', () => {
    fc.assert(
      fc.property(arbFp6, (a) => {
        const x = F6.sqr(a);
        const root = sqrtFp6(x);
        expect(root).toBeDefined();
        expect(F6.eql(F6.sqr(root!), x)).toBe(true);
      }),
      { numRuns: 15 },
    );
  });

  it('rejects non-squares (a square times the non-square v)', () => {
    fc.assert(
      fc.property(arbFp6, (a) => {
        fc.pre(!F6.is0(a));
        expect(sqrtFp6(F6.mulByNonresidue(F6.sqr(a)))).toBeUndefined();
      }),
      { numRuns: 10 },
    );
  });

  it('maps 0 to 0', () => {
    expect(F6.is0(sqrtFp6(F6.ZERO)!)).toBe(true);
  });
});

describe('isGtElement', () => {
  it('agrees with f^r = 1 on Gt, unitary, cyclotomic and arbitrary elements', () => {
    fc.assert(
      fc.property(arbFp12, arbScalar, (x, k) => {
        fc.pre(!F12.is0(x));
        const unitary = F12.div(F12.conjugate(x), x); // x^(p^6 - 1)
        const cyclotomic = F12.mul(F12.frobeniusMap(unitary, 2), unitary); // ...^(p^2 + 1)
        for (const f of [x, unitary, cyclotomic, gt(k)]) expect(isGtElement(f)).toBe(inGtSlow(f));
        expect(isGtElement(gt(k))).toBe(true);
      }),
      { numRuns: 4 },
    );
  });

  it('rejects 0 and accepts 1', () => {
    expect(isGtElement(F12.ZERO)).toBe(false);
    expect(isGtElement(F12.ONE)).toBe(true);
  });
});

describe('compressGt / decompressGt', () => {
  it("round-trips the reference MPK's KT byte for byte", () => {
    const kt = decompressGt(mpkGt);
    expect(hex(compressGt(kt))).toBe(hex(mpkGt));
    expect(F12.eql(decompressGt(mpkGt, { checkSubgroup: false }), kt)).toBe(true);
    expect(inGtSlow(kt)).toBe(true);
  });

  it("reproduces pg-curve's own sign-bit expectations", () => {
    const raw = (l: bigint[]) => l.reduce((acc, limb, i) => acc + (limb << BigInt(64 * i)), 0n);
    const a = compressGt(gt(raw([1n, 2n, 3n, 4n])));
    const b = compressGt(gt(raw([500001n, 2n, 3n, 4n])));
    expect(a[0]! >> 6).toBe(0b11);
    expect(b[0]! >> 6).toBe(0b10);
  });

  it('encodes the identity as 0x80 and 287 zero bytes, and back', () => {
    const bytes = compressGt(F12.ONE);
    expect(bytes[0]).toBe(0x80);
    expect(bytes.subarray(1).every((b) => b === 0)).toBe(true);
    expect(F12.eql(decompressGt(bytes), F12.ONE)).toBe(true);
  });

  it('round-trips random elements of Gt, with both sign-bit values occurring', () => {
    const signs = new Set<number>();
    fc.assert(
      fc.property(arbScalar, (k) => {
        const f = gt(k);
        const bytes = compressGt(f);
        expect(bytes).toHaveLength(GT_COMPRESSED_BYTES);
        expect(bytes[0]! & 0x80).toBe(0x80);
        signs.add(bytes[0]! & 0x40);
        expect(F12.eql(decompressGt(bytes), f)).toBe(true);
      }),
      { numRuns: 12, examples: [[1n], [2n]] },
    );
    expect(signs).toEqual(new Set([0, 0x40]));
  });

  it('with the sign bit flipped, yields -conj(f): outside Gt, accepted only unchecked', () => {
    const f = gt(987654321n);
    const flipped = compressGt(f);
    flipped[0]! ^= 0x40;
    const g = decompressGt(flipped, { checkSubgroup: false });
    expect(F12.eql(g, F12.neg(F12.conjugate(f)))).toBe(true);
    expectMalformed(() => decompressGt(flipped), /subgroup/);
  });

  it('accepts unitary elements outside Gt only without the subgroup check', () => {
    fc.assert(
      fc.property(arbFp12, (x) => {
        fc.pre(!F12.is0(x));
        const unitary = F12.mul(F12.frobeniusMap(F12.div(F12.conjugate(x), x), 2), F12.div(F12.conjugate(x), x));
        const bytes = compressGt(unitary);
        expect(F12.eql(decompressGt(bytes, { checkSubgroup: false }), unitary)).toBe(true);
        expectMalformed(() => decompressGt(bytes), /subgroup/);
      }),
      { numRuns: 3 },
    );
  });

  it('rejects a wrong length', () => {
    expectMalformed(() => decompressGt(mpkGt.subarray(1)), /288 bytes/);
    expectMalformed(() => decompressGt(new Uint8Array(289)), /288 bytes/);
  });

  it('rejects a clear compression bit', () => {
    const bytes = mpkGt.slice();
    bytes[0]! &= 0x7f;
    expectMalformed(() => decompressGt(bytes), /compression flag/);
    expectMalformed(() => decompressGt(bytes, { checkSubgroup: false }), /compression flag/);
  });

  it('rejects coordinates that are not below p (including a set bit 5)', () => {
    const pBytes = Fp.toBytes(P - 1n);
    pBytes[47]! += 1; // p itself
    for (const offset of [0, 48, 240]) {
      const bytes = mpkGt.slice();
      bytes.set(pBytes, offset);
      bytes[0]! |= 0x80;
      expectMalformed(() => decompressGt(bytes, { checkSubgroup: false }), /modulus/);
    }
    const bit5 = mpkGt.slice();
    bit5[0]! |= 0x20;
    expectMalformed(() => decompressGt(bit5, { checkSubgroup: false }), /modulus/);
  });

  it('rejects c1 for which 1 + v·c1² has no square root', () => {
    let found = 0;
    for (let i = 1n; found < 3; i++) {
      const c1: Fp6 = F6.fromBigSix([i, 0n, 0n, 0n, 0n, 7n]);
      if (sqrtFp6(F6.add(F6.ONE, F6.mulByNonresidue(F6.sqr(c1)))) !== undefined) continue;
      const bytes = F6.toBytes(c1);
      bytes[0]! |= 0x80;
      expectMalformed(() => decompressGt(bytes, { checkSubgroup: false }), /unitary/);
      found++;
    }
  });
});

describe('GtPowBase', () => {
  it('agrees with plain exponentiation, including 0, 1 and r - 1', () => {
    const base = new GtPowBase(gt(42n));
    fc.assert(
      fc.property(arbScalar, (k) => {
        expect(F12.eql(base.pow(k), F12.pow(base.base, k))).toBe(true);
      }),
      { numRuns: 8, examples: [[0n], [1n], [R - 1n], [0xd201000000010000n], [0xd201000000010000n ** 3n]] },
    );
  });

  it('rejects exponents outside [0, r)', () => {
    expect(() => gtGenerator().pow(R)).toThrow(RangeError);
    expect(() => gtGenerator().pow(-1n)).toThrow(RangeError);
  });
});
