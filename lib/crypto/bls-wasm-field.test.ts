import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { FP_BYTES, fpBytes, fpValue, modP, modPow, P, type BlsLayout } from './bls-wasm-layout.js';
import { buildBlsModule } from './bls-wasm-module.js';

/**
 * The generated Fp and Fp2 arithmetic against BigInt mod p, at random values and at the edges
 * of the representation: 0, 1, p − 1, and values whose top limbs are set.
 */

type Fn = (...args: number[]) => number;
let wasm: Record<string, Fn>;
let mem: Uint8Array;
let layout: BlsLayout;

beforeAll(async () => {
  const generated = buildBlsModule();
  layout = generated.layout;
  const { instance } = await WebAssembly.instantiate(generated.bytes as Uint8Array<ArrayBuffer>, {});
  wasm = instance.exports as unknown as Record<string, Fn>;
  mem = new Uint8Array((instance.exports.memory as WebAssembly.Memory).buffer);
});

const slot = (k: number) => layout.buf + FP_BYTES * k;
const put = (k: number, x: bigint) => mem.set(fpBytes(x), slot(k));
const get = (k: number) => fpValue(mem, slot(k));

const EDGES = [
  0n,
  1n,
  2n,
  P - 1n,
  P - 2n,
  (P - 1n) / 2n,
  (P + 1n) / 2n,
  2n ** 380n,
  3n * 2n ** 379n - 1n,
  P - 2n ** 200n,
  P - 2n ** 352n,
];
// Montgomery form moves values around: also values whose Montgomery representation is an edge.
const R_INV = modPow(2n ** 384n, P - 2n);
const arbFp = fc.oneof(
  fc.bigInt({ min: 0n, max: P - 1n }),
  fc.constantFrom(...EDGES),
  fc.constantFrom(...EDGES.map((e) => (e * R_INV) % P)),
);

describe('Fp in WebAssembly', () => {
  it('add, sub, neg, mul, sqr agree with BigInt mod p', () => {
    fc.assert(
      fc.property(arbFp, arbFp, (a, b) => {
        put(0, a);
        put(1, b);
        wasm.fp_add!(slot(2), slot(0), slot(1));
        expect(get(2)).toBe(modP(a + b));
        wasm.fp_sub!(slot(2), slot(0), slot(1));
        expect(get(2)).toBe(modP(a - b));
        wasm.fp_neg!(slot(2), slot(0));
        expect(get(2)).toBe(modP(-a));
        wasm.fp_mul!(slot(2), slot(0), slot(1));
        expect(get(2)).toBe(modP(a * b));
        wasm.fp_sqr!(slot(2), slot(0));
        expect(get(2)).toBe(modP(a * a));
        wasm.fp_half!(slot(2), slot(0));
        expect(modP(2n * get(2))).toBe(a);
        // Aliased output.
        wasm.fp_mul!(slot(0), slot(0), slot(0));
        expect(get(0)).toBe(modP(a * a));
      }),
      { numRuns: 2000 },
    );
  });

  it('stores fully reduced limbs (the representation is canonical)', () => {
    fc.assert(
      fc.property(arbFp, arbFp, (a, b) => {
        put(0, a);
        put(1, b);
        for (const op of ['fp_add', 'fp_sub', 'fp_mul'] as const) {
          wasm[op]!(slot(2), slot(0), slot(1));
          expect(mem.slice(slot(2), slot(2) + FP_BYTES)).toEqual(fpBytes(get(2)));
        }
      }),
      { numRuns: 300 },
    );
  });

  it('inverts (0 to 0) and takes square roots of squares', () => {
    fc.assert(
      fc.property(arbFp, (a) => {
        put(0, a);
        wasm.fp_inv!(slot(1), slot(0));
        expect(get(1)).toBe(a === 0n ? 0n : modPow(a, P - 2n));
        if (a !== 0n) expect(modP(get(1) * a)).toBe(1n);
        put(0, modP(a * a));
        wasm.fp_sqrt_candidate!(slot(1), slot(0));
        expect(modP(get(1) * get(1))).toBe(modP(a * a));
      }),
      { numRuns: 100 },
    );
  });

  it('converts into and out of Montgomery form', () => {
    fc.assert(
      fc.property(arbFp, (a) => {
        const plain = new Uint8Array(FP_BYTES);
        let v = a;
        for (let i = 0; i < FP_BYTES; i++, v >>= 8n) plain[i] = Number(v & 0xffn);
        mem.set(plain, slot(0));
        wasm.fp_to_mont!(slot(1), slot(0));
        expect(get(1)).toBe(a);
        wasm.fp_from_mont!(slot(2), slot(1));
        expect(mem.slice(slot(2), slot(2) + FP_BYTES)).toEqual(plain);
      }),
      { numRuns: 200 },
    );
  });
});

describe('Fp2 = Fp[u]/(u² + 1) in WebAssembly', () => {
  const put2 = (k: number, x: readonly [bigint, bigint]) => (put(k, x[0]), put(k + 1, x[1]));
  const get2 = (k: number): [bigint, bigint] => [get(k), get(k + 1)];
  const arbFp2 = fc.tuple(arbFp, arbFp);

  it('add, sub, mul, sqr, ·(u + 1), conjugate and inverse agree with BigInt', () => {
    fc.assert(
      fc.property(arbFp2, arbFp2, ([a0, a1], [b0, b1]) => {
        put2(0, [a0, a1]);
        put2(2, [b0, b1]);
        const at = slot;
        wasm.fp2_add!(at(4), at(0), at(2));
        expect(get2(4)).toEqual([modP(a0 + b0), modP(a1 + b1)]);
        wasm.fp2_sub!(at(4), at(0), at(2));
        expect(get2(4)).toEqual([modP(a0 - b0), modP(a1 - b1)]);
        wasm.fp2_mul!(at(4), at(0), at(2));
        expect(get2(4)).toEqual([modP(a0 * b0 - a1 * b1), modP(a0 * b1 + a1 * b0)]);
        wasm.fp2_sqr!(at(4), at(0));
        expect(get2(4)).toEqual([modP(a0 * a0 - a1 * a1), modP(2n * a0 * a1)]);
        wasm.fp2_mul_nr!(at(4), at(0));
        expect(get2(4)).toEqual([modP(a0 - a1), modP(a0 + a1)]);
        wasm.fp2_conj!(at(4), at(0));
        expect(get2(4)).toEqual([a0, modP(-a1)]);
        wasm.fp2_inv!(at(4), at(0));
        const [i0, i1] = get2(4);
        if (a0 === 0n && a1 === 0n) expect([i0, i1]).toEqual([0n, 0n]);
        else expect([modP(a0 * i0 - a1 * i1), modP(a0 * i1 + a1 * i0)]).toEqual([1n, 0n]);
      }),
      { numRuns: 500 },
    );
  });

  it('square roots: of every square (one of ±), and none for non-squares', () => {
    fc.assert(
      fc.property(arbFp2, fc.boolean(), ([a0, a1], square) => {
        // (u + 1) is a non-square of Fp2, so a non-zero square times it is a non-square.
        let [s0, s1] = [modP(a0 * a0 - a1 * a1), modP(2n * a0 * a1)];
        if (!square) [s0, s1] = [modP(s0 - s1), modP(s0 + s1)];
        put2(0, [s0, s1]);
        const ok = wasm.fp2_sqrt!(slot(2), slot(0));
        const isZero = s0 === 0n && s1 === 0n;
        expect(ok).toBe(square || isZero ? 1 : 0);
        if (ok) {
          const [r0, r1] = get2(2);
          expect([modP(r0 * r0 - r1 * r1), modP(2n * r0 * r1)]).toEqual([s0, s1]);
        }
      }),
      { numRuns: 100 },
    );
  });

  it('square roots of purely real and purely imaginary squares (c1 = 0, c0 a square or not)', () => {
    fc.assert(
      fc.property(arbFp, (a) => {
        for (const s of [modP(a * a), modP(-a * a)]) {
          put2(0, [s, 0n]);
          expect(wasm.fp2_sqrt!(slot(2), slot(0))).toBe(1);
          const [r0, r1] = get2(2);
          expect([modP(r0 * r0 - r1 * r1), modP(2n * r0 * r1)]).toEqual([s, 0n]);
        }
      }),
      { numRuns: 50 },
    );
  });
});
