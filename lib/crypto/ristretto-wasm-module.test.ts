import { ristretto255 } from '@noble/curves/ed25519.js';
import { bytesToNumberLE, numberToBytesLE } from '@noble/curves/utils.js';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { fromLimbs, mod, P } from './ristretto-wasm-field.js';
import type { RistrettoLayout } from './ristretto-wasm-layout.js';
import { INVSQRT_A_MINUS_D, ristrettoModule, SQRT_M1 } from './ristretto-wasm-module.js';

/**
 * The generated module's internals against BigInt arithmetic and @noble/curves: field
 * operations (including inputs at the limb bounds the point formulas rely on), scalar
 * recoding, RFC 9496 decoding and encoding. The public API is tested in ristretto-wasm.test.ts.
 */

type Fn = (...args: number[]) => number;
let wasm: Record<string, Fn>;
let mem: Uint8Array;
let view: DataView;
let layout: RistrettoLayout;

beforeAll(async () => {
  const generated = ristrettoModule();
  layout = generated.layout;
  const { instance } = await WebAssembly.instantiate(generated.bytes as Uint8Array<ArrayBuffer>, {});
  wasm = instance.exports as unknown as Record<string, Fn>;
  wasm.init!();
  const memory = instance.exports.memory as WebAssembly.Memory;
  mem = new Uint8Array(memory.buffer);
  view = new DataView(memory.buffer);
});

// Field elements in the workspace, 40 bytes each.
const slot = (k: number) => layout.workspace + 64 * k;
const writeLimbs = (at: number, limbs: readonly number[]) =>
  limbs.forEach((l, i) => view.setInt32(at + 4 * i, l, true));
const readLimbs = (at: number) => Array.from({ length: 10 }, (_, i) => view.getInt32(at + 4 * i, true));
const writeBytes = (at: number, bytes: Uint8Array) => mem.set(bytes, at);
const readBytes = (at: number, n = 32) => mem.slice(at, at + n);
/** Loads x through fe_frombytes, so the limbs are what the module itself produces. */
const load = (at: number, x: bigint) => {
  writeBytes(slot(15), numberToBytesLE(mod(x), 32));
  wasm.fe_frombytes!(at, slot(15));
};
const value = (at: number) => fromLimbs(readLimbs(at));
const canonical = (at: number) => {
  wasm.fe_tobytes!(slot(15), at);
  return bytesToNumberLE(readBytes(slot(15)));
};

const BITS = [26, 25, 26, 25, 26, 25, 26, 25, 26, 25];
/** |even| ≤ 2^25, |odd| ≤ 2^24: what the carry chain leaves. */
const REDUCED = BITS.map((b) => 2 ** (b - 1));
const limbsArb = (scale: number) => fc.tuple(...REDUCED.map((r) => fc.integer({ min: -scale * r, max: scale * r })));
/** The extremes of a sum of three reduced elements, the widest input `mul` is specified for. */
const extremes = [1, -1].flatMap((s) => [
  REDUCED.map((r) => s * 3 * r),
  REDUCED.map((r, i) => (i % 2 === 0 ? s : -s) * 3 * r),
]);
/** ref10's output bound: the final carry may push a limb 1% past its half-range. */
const expectReduced = (at: number) =>
  readLimbs(at).forEach((l, i) => expect(Math.abs(l)).toBeLessThanOrEqual(1.01 * REDUCED[i]!));
const fieldArb = fc.bigInt({ min: 0n, max: P - 1n });

function pow(b: bigint, e: bigint): bigint {
  let r = 1n;
  for (let x = mod(b), k = e; k > 0n; k >>= 1n, x = (x * x) % P) if (k & 1n) r = (r * x) % P;
  return r;
}

describe('field arithmetic mod 2^255 − 19', () => {
  it('multiplies and squares like BigInt, up to three-element sums in every limb', () => {
    const check = (f: readonly number[], g: readonly number[]) => {
      writeLimbs(slot(0), f);
      writeLimbs(slot(1), g);
      const [x, y] = [fromLimbs(f), fromLimbs(g)];
      wasm.fe_mul!(slot(2), slot(0), slot(1));
      expect(value(slot(2))).toBe(mod(x * y));
      expectReduced(slot(2));
      wasm.fe_sq!(slot(3), slot(0));
      expect(value(slot(3))).toBe(mod(x * x));
      wasm.fe_sq2!(slot(3), slot(0));
      expect(value(slot(3))).toBe(mod(2n * x * x));
      wasm.fe_sqn!(slot(3), slot(0), 3);
      expect(value(slot(3))).toBe(pow(x, 8n));
    };
    for (const f of extremes) for (const g of extremes) check(f, g);
    fc.assert(fc.property(limbsArb(3), limbsArb(3), check), { numRuns: 300 });
  });

  it('adds, subtracts, negates and carries', () => {
    fc.assert(
      fc.property(fieldArb, fieldArb, (x, y) => {
        load(slot(0), x);
        load(slot(1), y);
        wasm.fe_add!(slot(2), slot(0), slot(1));
        expect(canonical(slot(2))).toBe(mod(x + y));
        wasm.fe_sub!(slot(2), slot(0), slot(1));
        expect(canonical(slot(2))).toBe(mod(x - y));
        wasm.fe_neg!(slot(2), slot(0));
        expect(canonical(slot(2))).toBe(mod(-x));
        wasm.fe_add!(slot(2), slot(0), slot(1));
        wasm.fe_add!(slot(2), slot(2), slot(1));
        wasm.fe_carry!(slot(3), slot(2));
        expect(value(slot(3))).toBe(mod(x + 2n * y));
        expectReduced(slot(3));
      }),
      { numRuns: 200 },
    );
  });

  it('converts bytes both ways: canonical output, bit 255 ignored, values ≥ p reduced', () => {
    const edges = [0n, 1n, P - 1n, P, P + 1n, P + 18n, 2n ** 255n - 1n, 2n ** 255n, 2n ** 256n - 1n, 2n ** 254n];
    const check = (x: bigint) => {
      writeBytes(slot(4), numberToBytesLE(x, 32));
      wasm.fe_frombytes!(slot(0), slot(4));
      const expected = mod(x % 2n ** 255n);
      expect(value(slot(0))).toBe(expected);
      wasm.fe_tobytes!(slot(5), slot(0));
      expect(bytesToNumberLE(readBytes(slot(5)))).toBe(expected);
      expect(wasm.fe_isneg!(slot(0))).toBe(Number(expected & 1n));
      expect(wasm.fe_iszero!(slot(0))).toBe(expected === 0n ? 1 : 0);
    };
    edges.forEach(check);
    fc.assert(fc.property(fc.bigInt({ min: 0n, max: 2n ** 256n - 1n }), check), { numRuns: 300 });
  });

  it('compares by value whatever the limbs: x and x + p, unreduced sums', () => {
    fc.assert(
      fc.property(fieldArb, fieldArb, (x, y) => {
        load(slot(0), x);
        load(slot(1), y);
        expect(wasm.fe_eq!(slot(0), slot(1))).toBe(x === y ? 1 : 0);
        // x + 0 built as (x + y) − y: equal in value, different limbs
        wasm.fe_add!(slot(2), slot(0), slot(1));
        wasm.fe_sub!(slot(2), slot(2), slot(1));
        expect(wasm.fe_eq!(slot(0), slot(2))).toBe(1);
        writeLimbs(
          slot(3),
          readLimbs(slot(0)).map((l, i) => (i === 0 ? l + 1 : l)),
        );
        expect(wasm.fe_eq!(slot(0), slot(3))).toBe(0);
      }),
      { numRuns: 100 },
    );
    // p itself, written as limbs, is zero
    writeLimbs(slot(0), [2 ** 26 - 19, ...BITS.slice(1).map((b) => 2 ** b - 1)]);
    expect(wasm.fe_iszero!(slot(0))).toBe(1);
  });

  it('moves conditionally: cmov with 0 keeps, with 1 takes', () => {
    load(slot(0), 5n);
    load(slot(1), 7n);
    wasm.fe_cmov!(slot(0), slot(1), 0);
    expect(value(slot(0))).toBe(5n);
    wasm.fe_cmov!(slot(0), slot(1), 1);
    expect(value(slot(0))).toBe(7n);
  });

  it('inverts and raises to (p − 5)/8', () => {
    const check = (x: bigint) => {
      load(slot(0), x);
      wasm.fe_invert!(slot(1), slot(0));
      expect(canonical(slot(1))).toBe(pow(x, P - 2n));
      wasm.fe_pow22523!(slot(1), slot(0));
      expect(canonical(slot(1))).toBe(pow(x, (P - 5n) / 8n));
    };
    [0n, 1n, 2n, P - 1n].forEach(check);
    fc.assert(fc.property(fieldArb, check), { numRuns: 40 });
  });

  it('has the RFC 9496 constants right', () => {
    expect(mod(SQRT_M1 * SQRT_M1)).toBe(P - 1n);
    const d = mod(-121665n * pow(121666n, P - 2n));
    // 1/√(a − d) with a = −1
    expect(mod(INVSQRT_A_MINUS_D * INVSQRT_A_MINUS_D * (-1n - d))).toBe(1n);
  });

  it('sqrt_ratio_m1 follows RFC 9496 §4.2 on squares, non-squares and zero', () => {
    const run = (u: bigint, v: bigint) => {
      load(slot(0), u);
      load(slot(1), v);
      const ok = wasm.sqrt_ratio_m1!(slot(2), slot(0), slot(1));
      return { ok, r: canonical(slot(2)) };
    };
    fc.assert(
      fc.property(
        fieldArb,
        fieldArb.filter((v) => v !== 0n),
        (u, v) => {
          const { ok, r } = run(u, v);
          expect(r & 1n).toBe(0n);
          const ratio = mod(u * pow(v, P - 2n));
          const isSquare = ratio === 0n || pow(ratio, (P - 1n) / 2n) === 1n;
          expect(ok).toBe(isSquare ? 1 : 0);
          expect(mod(r * r)).toBe(isSquare ? ratio : mod(SQRT_M1 * ratio));
        },
      ),
      { numRuns: 60 },
    );
    expect(run(0n, 5n)).toEqual({ ok: 1, r: 0n });
    expect(run(3n, 0n)).toEqual({ ok: 0, r: 0n });
  });
});

describe('scalar recoding', () => {
  const recode = (s: bigint, w: number) => {
    const n = Math.ceil(253 / w);
    mem.fill(0, layout.scalarA, layout.scalarA + 48);
    writeBytes(layout.scalarA, numberToBytesLE(s, 32));
    wasm.scalar_recode!(slot(0), layout.scalarA, w, n);
    return Array.from({ length: n }, (_, i) => view.getInt32(slot(0) + 4 * i, true));
  };
  const L = ristretto255.Point.Fn.ORDER;
  const scalarArb = fc.oneof(
    fc.bigInt({ min: 0n, max: L - 1n }),
    fc.constantFrom(0n, 1n, L - 1n, 2n ** 252n, 2n ** 252n - 1n, BigInt('0x08' + '88'.repeat(31))),
  );

  it.each([4, 5, 6, 8])('gives signed radix-2^%i digits that add up to the scalar', (w) => {
    fc.assert(
      fc.property(scalarArb, (s) => {
        const digits = recode(s, w);
        let sum = 0n;
        digits.forEach((d, i) => {
          expect(Math.abs(d)).toBeLessThanOrEqual(2 ** (w - 1));
          if (i < digits.length - 1) expect(d).toBeLessThan(2 ** (w - 1));
          sum += BigInt(d) << BigInt(w * i);
        });
        expect(sum).toBe(s);
      }),
      { numRuns: 100 },
    );
  });
});

describe('RFC 9496 decode and encode', () => {
  const Point = ristretto255.Point;
  const decode = (bytes: Uint8Array): number => {
    writeBytes(layout.bytesIn, bytes);
    return wasm.ristretto_decode!(slot(0), layout.bytesIn);
  };
  const nobleAccepts = (bytes: Uint8Array) => {
    try {
      Point.fromBytes(bytes);
      return true;
    } catch {
      return false;
    }
  };
  const encodingArb = fc.oneof(
    fc.uint8Array({ minLength: 32, maxLength: 32 }),
    // valid encodings, and near misses of them
    fc.tuple(fc.bigInt({ min: 1n, max: Point.Fn.ORDER - 1n }), fc.integer({ min: -1, max: 255 })).map(([k, bit]) => {
      const bytes = Point.BASE.multiply(k).toBytes();
      if (bit >= 0) bytes[bit >> 3]! ^= 1 << (bit & 7);
      return bytes;
    }),
    // s + p (non-canonical), p − s (negative)
    fc.tuple(fc.bigInt({ min: 1n, max: Point.Fn.ORDER - 1n }), fc.boolean()).map(([k, plus]) => {
      const s = bytesToNumberLE(Point.BASE.multiply(k).toBytes());
      return numberToBytesLE(plus ? (s + P) % 2n ** 256n : P - s, 32);
    }),
  );

  it('accepts exactly what noble accepts, and re-encodes accepted input to itself', () => {
    fc.assert(
      fc.property(encodingArb, (bytes) => {
        const ok = decode(bytes);
        expect(ok === 1).toBe(nobleAccepts(bytes));
        if (ok === 1) {
          wasm.ristretto_encode!(layout.bytesOut, slot(0));
          expect(readBytes(layout.bytesOut)).toEqual(bytes);
        }
      }),
      { numRuns: 400 },
    );
  });

  it('encodes every representative of a class the same: P and P + a 4-torsion point', () => {
    // Decode P, then turn it into P + (0, −1) by negating X and Y (T = XY is unchanged):
    // ristretto255 identifies the two, so the encoding must not change.
    fc.assert(
      fc.property(fc.bigInt({ min: 1n, max: Point.Fn.ORDER - 1n }), (k) => {
        const bytes = Point.BASE.multiply(k).toBytes();
        expect(decode(bytes)).toBe(1);
        for (const off of [0, 40]) wasm.fe_neg!(slot(0) + off, slot(0) + off);
        wasm.ristretto_encode!(layout.bytesOut, slot(0));
        expect(readBytes(layout.bytesOut)).toEqual(bytes);
      }),
      { numRuns: 30 },
    );
  });
});

describe('base_mul_encode', () => {
  it('wipes the secret scalar buffer (all 48 bytes) after use', () => {
    mem.fill(0, layout.scalarA, layout.scalarA + 48);
    const a = 0x0123456789abcdefn << 48n;
    writeBytes(layout.scalarA, numberToBytesLE(a, 32));
    wasm.base_mul_encode!(layout.bytesOut, layout.scalarA);
    expect(readBytes(layout.bytesOut)).toEqual(ristretto255.Point.BASE.multiply(a).toBytes());
    expect(readBytes(layout.scalarA, 48)).toEqual(new Uint8Array(48));
  });
});
