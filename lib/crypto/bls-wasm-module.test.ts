import type { Fp12 } from '@noble/curves/abstract/tower.js';
import { bls12_381 } from '@noble/curves/bls12-381.js';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { FP_BYTES, fpBytes, fpValue, LINES_PER_POINT, type BlsLayout } from './bls-wasm-layout.js';
import { buildBlsModule } from './bls-wasm-module.js';
import { R } from './gt.js';

/**
 * The generated tower, Miller loop and final exponentiation against @noble/curves. The line
 * formulas are noble's, so the Miller loop output must equal millerLoopBatch before the final
 * exponentiation too.
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

const { Fp2, Fp12 } = bls12_381.fields;
const G1 = bls12_381.G1.Point;
const G2 = bls12_381.G2.Point;
type Fp2V = { c0: bigint; c1: bigint };

const put2 = (at: number, x: Fp2V) => (mem.set(fpBytes(x.c0), at), mem.set(fpBytes(x.c1), at + FP_BYTES));
const get2 = (at: number) => Fp2.create({ c0: fpValue(mem, at), c1: fpValue(mem, at + FP_BYTES) });
const parts = (f: Fp12) => [f.c0.c0, f.c0.c1, f.c0.c2, f.c1.c0, f.c1.c1, f.c1.c2];
const put12 = (at: number, f: Fp12) => parts(f).forEach((x, i) => put2(at + 2 * FP_BYTES * i, x));
function get12(at: number): Fp12 {
  const g = (i: number) => get2(at + 2 * FP_BYTES * i);
  return Fp12.create({ c0: { c0: g(0), c1: g(1), c2: g(2) }, c1: { c0: g(3), c1: g(4), c2: g(5) } });
}

const arbScalar = fc.bigInt({ min: 1n, max: R - 1n });
/** A random (non-unitary) Fp12 element: a Miller loop output. */
const millerOf = (a: bigint, b: bigint) => bls12_381.pairing(G1.BASE.multiply(a), G2.BASE.multiply(b), false);

describe('Fp12 tower in WebAssembly', () => {
  it('mul, sqr, inverse, conjugate and Frobenius maps equal noble', () => {
    fc.assert(
      fc.property(arbScalar, arbScalar, arbScalar, (a, b, c) => {
        const x = millerOf(a, b);
        const y = millerOf(b, c);
        const { f, g } = layout;
        put12(f, x);
        put12(g, y);
        wasm.fp12_mul!(g, f, g);
        expect(Fp12.eql(get12(g), Fp12.mul(x, y))).toBe(true);
        wasm.fp12_sqr!(g, f);
        expect(Fp12.eql(get12(g), Fp12.sqr(x))).toBe(true);
        wasm.fp12_inv!(g, f);
        expect(Fp12.eql(get12(g), Fp12.inv(x))).toBe(true);
        wasm.fp12_conj!(g, f);
        expect(Fp12.eql(get12(g), Fp12.conjugate(x))).toBe(true);
        for (const k of [1, 2, 3]) {
          wasm[`fp12_frob${k}`]!(g, f);
          expect(Fp12.eql(get12(g), Fp12.frobeniusMap(x, k))).toBe(true);
        }
      }),
      { numRuns: 5 },
    );
  });

  it('cyclotomic squaring and the final exponentiation equal noble', () => {
    fc.assert(
      fc.property(arbScalar, arbScalar, (a, b) => {
        const x = millerOf(a, b);
        const { f, g } = layout;
        put12(f, x);
        wasm.final_exp!(g, f);
        const e = Fp12.finalExponentiate(x);
        expect(Fp12.eql(get12(g), e)).toBe(true);
        wasm.fp12_cyc_sqr!(f, g);
        expect(Fp12.eql(get12(f), Fp12.sqr(e))).toBe(true);
      }),
      { numRuns: 3 },
    );
  });
});

describe('Miller loop over prepared lines', () => {
  const plain = (v: bigint) => {
    const out = new Uint8Array(FP_BYTES);
    for (let i = 0; i < FP_BYTES; i++, v >>= 8n) out[i] = Number(v & 0xffn);
    return out;
  };

  it('equals millerLoopBatch for 1 to 6 pairs, and the pairing after final_exp', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(arbScalar, arbScalar), { minLength: 1, maxLength: 6 }), (ks) => {
        const pairs = ks.map(([a, b], i) => {
          const q = G2.BASE.multiply(b);
          const p = G1.BASE.multiply(a).toAffine();
          const { x, y } = q.toAffine();
          put2(layout.q, x);
          put2(layout.q + 2 * FP_BYTES, y);
          expect(wasm.g2_prepare!(layout.lines + i * layout.linesBytes, layout.q)).toBe(0);
          mem.set(fpBytes(p.x), layout.points + 2 * FP_BYTES * i);
          mem.set(fpBytes(p.y), layout.points + 2 * FP_BYTES * i + FP_BYTES);
          return [bls12_381.utils.calcPairingPrecomputes(q), p.x, p.y] as [never, bigint, bigint];
        });
        expect(layout.linesBytes).toBe(LINES_PER_POINT * 6 * FP_BYTES);
        wasm.miller!(layout.f, layout.lines, layout.points, ks.length);
        const expected = bls12_381.millerLoopBatch(pairs);
        expect(Fp12.eql(get12(layout.f), expected)).toBe(true);
        wasm.final_exp!(layout.f, layout.f);
        expect(Fp12.eql(get12(layout.f), Fp12.finalExponentiate(expected))).toBe(true);
      }),
      { numRuns: 4 },
    );
  });

  it('g2_decompress: the point for valid x, 1 off the twist; g2_prepare: 2 outside G2', () => {
    const put = (x: Fp2V) => (mem.set(plain(x.c0), layout.xIn), mem.set(plain(x.c1), layout.xIn + FP_BYTES));
    fc.assert(
      fc.property(arbScalar, (k) => {
        const { x, y } = G2.BASE.multiply(k).toAffine();
        put(x);
        expect(wasm.g2_decompress!(layout.q, layout.xIn)).toBe(0);
        expect(wasm.g2_prepare!(layout.lines, layout.q)).toBe(0);
        expect(Fp2.eql(get2(layout.q), x)).toBe(true);
        const y2 = get2(layout.q + 2 * FP_BYTES);
        expect(Fp2.eql(y2, y) || Fp2.eql(y2, Fp2.neg(y))).toBe(true);
      }),
      { numRuns: 5 },
    );
    let off = 0;
    let outside = 0;
    for (let c = 1n; off < 3 || outside < 3; c++) {
      const x = { c0: c, c1: 1n };
      put(x);
      let status = wasm.g2_decompress!(layout.q, layout.xIn);
      if (status === 0) status = wasm.g2_prepare!(layout.lines, layout.q);
      let onCurve = true;
      let point;
      try {
        const y = Fp2.sqrt(Fp2.add(Fp2.mul(Fp2.sqr(x), x), { c0: 4n, c1: 4n }));
        point = G2.fromAffine({ x: Fp2.create(x), y });
      } catch {
        onCurve = false;
      }
      if (!onCurve) {
        expect(status).toBe(1);
        off++;
      } else {
        const inG2 = point!.isTorsionFree();
        expect(status).toBe(inG2 ? 0 : 2);
        if (!inG2) outside++;
      }
    }
  });
});
