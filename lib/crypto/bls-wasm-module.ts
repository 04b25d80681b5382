import { bls12_381 } from '@noble/curves/bls12-381.js';
import {
  ATE_NAF,
  BLS_X,
  blsLayout,
  FP12_BYTES,
  FP2_BYTES,
  FP6_BYTES,
  FP_BYTES,
  fpBytes,
  G1_BETA,
  G1_MSM_STEPS,
  G1_PROJECTIVE_BYTES,
  GT_POW_STEPS,
  GT_TABLE_ENTRIES,
  LINE_BYTES,
  P,
  SCRATCH_END,
  SCRATCH_START,
  type BlsLayout,
} from './bls-wasm-layout.js';
import { buildBlsField, emitPow, fieldConstantsSegment, type BlsFieldFunctions } from './bls-wasm-field.js';
import { ModuleBuilder, pushAddr, type Addr } from './ristretto-wasm-field.js';
import { encodeModule, FunctionBody, I32, I64, Op } from './wasm-emit.js';

/**
 * Generates the BLS12-381 pairing module: the tower Fp2 ⊂ Fp6 = Fp2[v]/(v³ − (u + 1)) ⊂
 * Fp12 = Fp6[w]/(w² − v) as in @noble/curves and zkcrypto, the optimal ate Miller loop over
 * precomputed G2 lines, the final exponentiation, and G2 decompression with the subgroup check:
 *
 *   g2_decompress(out, x) → 0 on the twist, 1 not
 *   g2_prepare(lines, q) → 0 | 2      the line coefficients of an affine G2 point, 2 if not in G2
 *   miller(f, lines, points, n)       Π over n pairs, sharing the squarings, conjugated (x < 0)
 *   final_exp(h, f)                   f^((p¹² − 1)/r)
 *
 * The line and tower formulas are the ones noble uses, so even the Miller loop output (before
 * the final exponentiation) equals noble's millerLoopBatch; the tests compare it directly.
 *
 * Every Fp6/Fp12 function computes into its own scratch and copies at the end, so outputs may
 * alias inputs. Secret inputs (the user secret key's G2 points) only ever meet fixed operation
 * sequences: the loop structure depends on the public curve parameter x alone.
 *
 * The memory map (BlsLayout), the table sizes and the curve constants the JavaScript side shares
 * are bls-wasm-layout.ts.
 */

// ---- constants ------------------------------------------------------------------------------

const Fp2N = bls12_381.fields.Fp2;
type Fp2V = { c0: bigint; c1: bigint };

const CONST_ONE = 0;
const CONST_R2 = 48;
const CONST_FP2_ONE = 96;
const CONST_B2 = CONST_FP2_ONE + FP2_BYTES; // b' = 4(u + 1)
const CONST_PSI_X = CONST_B2 + FP2_BYTES;
const CONST_PSI_Y = CONST_PSI_X + FP2_BYTES;
const CONST_FROB = CONST_PSI_Y + FP2_BYTES; // 3 rows (Fp6 c1, Fp6 c2, Fp12) × powers 1..3
const frobAt = (row: number, power: number) => CONST_FROB + (row * 3 + power - 1) * FP2_BYTES;
const CONST_FP12_ONE = frobAt(2, 3) + FP2_BYTES;
const CONST_G1_B = CONST_FP12_ONE + FP12_BYTES; // b = 4
const CONST_BETA = CONST_G1_B + FP_BYTES; // a cube root of unity: φ(x, y) = (β·x, −y) is λ = x² on G1
const ZERO_FP = CONST_BETA + FP_BYTES; // stays zero
const CONST_END = ZERO_FP + FP_BYTES;

function fp2Bytes(x: Fp2V): Uint8Array {
  const out = new Uint8Array(FP2_BYTES);
  out.set(fpBytes(x.c0), 0);
  out.set(fpBytes(x.c1), FP_BYTES);
  return out;
}

function constantsSegment(): Uint8Array {
  const out = new Uint8Array(CONST_END);
  out.set(fieldConstantsSegment(), CONST_ONE);
  const put = (at: number, x: Fp2V) => out.set(fp2Bytes(x), at);
  put(CONST_FP2_ONE, { c0: 1n, c1: 0n });
  put(CONST_FP12_ONE, { c0: 1n, c1: 0n });
  out.set(fpBytes(4n), CONST_G1_B);
  out.set(fpBytes(G1_BETA), CONST_BETA);
  put(CONST_B2, { c0: 4n, c1: 4n });
  // ψ(x, y) = (x̅·(u + 1)^−((p−1)/3), y̅·(u + 1)^−((p−1)/2)), noble's G2 endomorphism.
  const base = Fp2N.inv(Fp2N.NONRESIDUE);
  put(CONST_PSI_X, Fp2N.pow(base, (P - 1n) / 3n));
  put(CONST_PSI_Y, Fp2N.pow(base, (P - 1n) / 2n));
  // Frobenius: v^(p^k) = ξ^((p^k − 1)/3)·v, v² likewise with twice the exponent, w^(p^k) = ξ^((p^k − 1)/6)·w.
  for (let k = 1; k <= 3; k++) {
    const e = P ** BigInt(k) - 1n;
    put(frobAt(0, k), Fp2N.pow(Fp2N.NONRESIDUE, e / 3n));
    put(frobAt(1, k), Fp2N.pow(Fp2N.NONRESIDUE, (2n * e) / 3n));
    put(frobAt(2, k), Fp2N.pow(Fp2N.NONRESIDUE, e / 6n));
  }
  if (CONST_END > SCRATCH_START) throw new Error('constants overflow');
  return out;
}

// ---- generation -----------------------------------------------------------------------------

type Call = (target: FunctionBody, ...args: Addr[]) => void;

function caller(f: FunctionBody): Call {
  return (target, ...args) => {
    for (const a of args) pushAddr(f, a);
    f.call(target);
  };
}

const at = (a: Addr, delta: number): Addr => (typeof a === 'number' ? a + delta : [a[0], a[1] + delta]);
/** Fp2 coefficient i of an Fp6 at a, and Fp6 half j of an Fp12. */
const c6 = (a: Addr, i: number): Addr => at(a, i * FP2_BYTES);
const c12 = (a: Addr, j: number): Addr => at(a, j * FP6_BYTES);

export function buildBlsModule(): { bytes: Uint8Array; layout: BlsLayout } {
  const layout = blsLayout();
  const m = new ModuleBuilder(SCRATCH_START, SCRATCH_END);
  const F = buildBlsField(m, { one: CONST_ONE, r2: CONST_R2 });
  const { fp2Mul, fp2Sqr, fp2Add, fp2Sub, fp2Neg, fp2Copy, fp2MulNr, fp2Conj, fp2MulFp } = F;
  const s1 = () => m.scratch(FP_BYTES);
  const s2 = () => m.scratch(FP2_BYTES);
  const s6 = () => m.scratch(FP6_BYTES);
  const s12 = () => m.scratch(FP12_BYTES);
  const A0: Addr = [0, 0];
  const A1: Addr = [1, 0];
  const A2: Addr = [2, 0];

  const copyN = (name: string | undefined, bytes: number) => {
    const f = m.fn(name, [I32, I32]);
    for (let i = 0; i < bytes; i += 8) f.get(0).get(1).load64(i).store64(i);
    return f;
  };
  const fp6Copy = copyN(undefined, FP6_BYTES);
  const fp12Copy = copyN('fp12_copy', FP12_BYTES);

  const lift = (name: string | undefined, fp2Fn: FunctionBody, parts: number, arity: 1 | 2) => {
    const f = m.fn(name, arity === 2 ? [I32, I32, I32] : [I32, I32]);
    const c = caller(f);
    for (let i = 0; i < parts; i++) {
      const o = i * FP2_BYTES;
      if (arity === 2) c(fp2Fn, at(A0, o), at(A1, o), at(A2, o));
      else c(fp2Fn, at(A0, o), at(A1, o));
    }
    return f;
  };
  // Multiplications by the small constants 1/2, b' = 4(u + 1), 3b' and 3b = 12 by additions.
  const fp2Half = m.fn(undefined, [I32, I32]);
  caller(fp2Half)(F.fpHalf, A0, A1);
  caller(fp2Half)(F.fpHalf, at(A0, FP_BYTES), at(A1, FP_BYTES));
  const fp2MulB2 = m.fn(undefined, [I32, I32]);
  {
    const c = caller(fp2MulB2);
    const t = s1();
    c(F.fpSub, t, A1, at(A1, FP_BYTES));
    c(F.fpAdd, at(A0, FP_BYTES), A1, at(A1, FP_BYTES));
    c(F.fpAdd, A0, t, t);
    c(F.fpAdd, A0, A0, A0);
    c(F.fpAdd, at(A0, FP_BYTES), at(A0, FP_BYTES), at(A0, FP_BYTES));
    c(F.fpAdd, at(A0, FP_BYTES), at(A0, FP_BYTES), at(A0, FP_BYTES));
  }
  const fpMulB3 = m.fn(undefined, [I32, I32]);
  {
    const c = caller(fpMulB3);
    const t = s1();
    c(F.fpAdd, t, A1, A1);
    c(F.fpAdd, t, t, A1);
    c(F.fpAdd, A0, t, t);
    c(F.fpAdd, A0, A0, A0);
  }

  const fp6Add = lift(undefined, fp2Add, 3, 2);
  const fp6Sub = lift(undefined, fp2Sub, 3, 2);
  const fp6Neg = lift(undefined, fp2Neg, 3, 1);

  const fp6Mul = m.fn(undefined, [I32, I32, I32]);
  {
    const c = caller(fp6Mul);
    const [t0, t1, t2, x, y, r0, r1, r2] = [s2(), s2(), s2(), s2(), s2(), s2(), s2(), s2()];
    const a = (i: number) => c6(A1, i);
    const b = (i: number) => c6(A2, i);
    c(fp2Mul, t0, a(0), b(0));
    c(fp2Mul, t1, a(1), b(1));
    c(fp2Mul, t2, a(2), b(2));
    // r0 = t0 + ξ((a1 + a2)(b1 + b2) − t1 − t2)
    c(fp2Add, x, a(1), a(2));
    c(fp2Add, y, b(1), b(2));
    c(fp2Mul, x, x, y);
    c(fp2Sub, x, x, t1);
    c(fp2Sub, x, x, t2);
    c(fp2MulNr, x, x);
    c(fp2Add, r0, x, t0);
    // r1 = (a0 + a1)(b0 + b1) − t0 − t1 + ξ·t2
    c(fp2Add, x, a(0), a(1));
    c(fp2Add, y, b(0), b(1));
    c(fp2Mul, x, x, y);
    c(fp2Sub, x, x, t0);
    c(fp2Sub, x, x, t1);
    c(fp2MulNr, y, t2);
    c(fp2Add, r1, x, y);
    // r2 = (a0 + a2)(b0 + b2) − t0 − t2 + t1
    c(fp2Add, x, a(0), a(2));
    c(fp2Add, y, b(0), b(2));
    c(fp2Mul, x, x, y);
    c(fp2Sub, x, x, t0);
    c(fp2Sub, x, x, t2);
    c(fp2Add, r2, x, t1);
    c(fp2Copy, c6(A0, 0), r0);
    c(fp2Copy, c6(A0, 1), r1);
    c(fp2Copy, c6(A0, 2), r2);
  }

  /** h = a·v: (ξ·a2, a0, a1); the order of the writes makes h = a safe. */
  const fp6MulV = m.fn(undefined, [I32, I32]);
  {
    const c = caller(fp6MulV);
    const t = s2();
    c(fp2MulNr, t, c6(A1, 2));
    c(fp2Copy, c6(A0, 2), c6(A1, 1));
    c(fp2Copy, c6(A0, 1), c6(A1, 0));
    c(fp2Copy, c6(A0, 0), t);
  }

  const fp6Inv = m.fn(undefined, [I32, I32]);
  {
    const c = caller(fp6Inv);
    const [t0, t1, t2, x, y] = [s2(), s2(), s2(), s2(), s2()];
    const a = (i: number) => c6(A1, i);
    c(fp2Sqr, t0, a(0));
    c(fp2Mul, x, a(2), a(1));
    c(fp2MulNr, x, x);
    c(fp2Sub, t0, t0, x); // a0² − ξ·a1a2
    c(fp2Sqr, t1, a(2));
    c(fp2MulNr, t1, t1);
    c(fp2Mul, x, a(0), a(1));
    c(fp2Sub, t1, t1, x); // ξ·a2² − a0a1
    c(fp2Sqr, t2, a(1));
    c(fp2Mul, x, a(0), a(2));
    c(fp2Sub, t2, t2, x); // a1² − a0a2
    c(fp2Mul, x, a(2), t1);
    c(fp2Mul, y, a(1), t2);
    c(fp2Add, x, x, y);
    c(fp2MulNr, x, x);
    c(fp2Mul, y, a(0), t0);
    c(fp2Add, x, x, y);
    c(F.fp2Inv, x, x);
    c(fp2Mul, c6(A0, 0), x, t0);
    c(fp2Mul, c6(A0, 1), x, t1);
    c(fp2Mul, c6(A0, 2), x, t2);
  }

  const fp12Mul = m.fn('fp12_mul', [I32, I32, I32]);
  {
    const c = caller(fp12Mul);
    const [t1, t2, x, y, r0] = [s6(), s6(), s6(), s6(), s6()];
    c(fp6Mul, t1, c12(A1, 0), c12(A2, 0));
    c(fp6Mul, t2, c12(A1, 1), c12(A2, 1));
    c(fp6Add, x, c12(A1, 0), c12(A1, 1));
    c(fp6Add, y, c12(A2, 0), c12(A2, 1));
    c(fp6Mul, x, x, y);
    c(fp6Sub, x, x, t1);
    c(fp6Sub, c12(A0, 1), x, t2);
    c(fp6MulV, t2, t2);
    c(fp6Add, r0, t1, t2);
    c(fp6Copy, c12(A0, 0), r0);
  }

  const fp12Sqr = m.fn('fp12_sqr', [I32, I32]);
  {
    const c = caller(fp12Sqr);
    const [ab, x, y] = [s6(), s6(), s6()];
    c(fp6Mul, ab, c12(A1, 0), c12(A1, 1));
    c(fp6MulV, x, c12(A1, 1));
    c(fp6Add, x, x, c12(A1, 0));
    c(fp6Add, y, c12(A1, 0), c12(A1, 1));
    c(fp6Mul, x, x, y);
    c(fp6Sub, x, x, ab);
    c(fp6MulV, y, ab);
    c(fp6Sub, c12(A0, 0), x, y);
    c(fp6Add, c12(A0, 1), ab, ab);
  }

  const fp12Conj = m.fn('fp12_conj', [I32, I32]);
  caller(fp12Conj)(fp6Copy, c12(A0, 0), c12(A1, 0));
  caller(fp12Conj)(fp6Neg, c12(A0, 1), c12(A1, 1));

  const fp12Inv = m.fn('fp12_inv', [I32, I32]);
  {
    const c = caller(fp12Inv);
    const [t, x] = [s6(), s6()];
    c(fp6Mul, t, c12(A1, 0), c12(A1, 0));
    c(fp6Mul, x, c12(A1, 1), c12(A1, 1));
    c(fp6MulV, x, x);
    c(fp6Sub, t, t, x);
    c(fp6Inv, t, t);
    c(fp6Mul, x, c12(A1, 1), t);
    c(fp6Mul, c12(A0, 0), c12(A1, 0), t);
    c(fp6Neg, c12(A0, 1), x);
  }

  /** Granger–Scott squaring, valid in the cyclotomic subgroup (noble's _cyclotomicSquare). */
  const fp12CycSqr = m.fn('fp12_cyc_sqr', [I32, I32]);
  {
    const c = caller(fp12CycSqr);
    const r = s12();
    const [a2, b2, s] = [s2(), s2(), s2()];
    // Fp4 square of (a, b): first = ξb² + a², second = (a + b)² − a² − b².
    const fp4 = (first: Addr, second: Addr, a: Addr, b: Addr) => {
      c(fp2Sqr, a2, a);
      c(fp2Sqr, b2, b);
      c(fp2Add, s, a, b);
      c(fp2Sqr, s, s);
      c(fp2Sub, s, s, a2);
      c(fp2Sub, second, s, b2);
      c(fp2MulNr, b2, b2);
      c(fp2Add, first, b2, a2);
    };
    const [t3, t4, t5, t6, t7, t8] = [s2(), s2(), s2(), s2(), s2(), s2()];
    const x = (j: number, i: number) => c6(c12(A1, j), i);
    const out = (j: number, i: number) => c6(c12(r, j), i);
    fp4(t3, t4, x(0, 0), x(1, 1));
    fp4(t5, t6, x(1, 0), x(0, 2));
    fp4(t7, t8, x(0, 1), x(1, 2));
    c(fp2MulNr, t8, t8); // t9
    const combine = (dst: Addr, t: Addr, src: Addr, minus: boolean) => {
      // 2(t ∓ src) + t
      c(minus ? fp2Sub : fp2Add, a2, t, src);
      c(fp2Add, a2, a2, a2);
      c(fp2Add, dst, a2, t);
    };
    combine(out(0, 0), t3, x(0, 0), true);
    combine(out(0, 1), t5, x(0, 1), true);
    combine(out(0, 2), t7, x(0, 2), true);
    combine(out(1, 0), t8, x(1, 0), false);
    combine(out(1, 1), t4, x(1, 1), false);
    combine(out(1, 2), t6, x(1, 2), false);
    c(fp12Copy, A0, r);
  }

  const fp12Frob = (power: 1 | 2 | 3) => {
    const f = m.fn(`fp12_frob${power}`, [I32, I32]);
    const c = caller(f);
    for (let j = 0; j < 2; j++) {
      for (let i = 0; i < 3; i++) {
        const dst = c6(c12(A0, j), i);
        const src = c6(c12(A1, j), i);
        c(power % 2 === 1 ? fp2Conj : fp2Copy, dst, src);
        if (i > 0) c(fp2Mul, dst, dst, frobAt(i - 1, power));
        if (j === 1) c(fp2Mul, dst, dst, frobAt(2, power));
      }
    }
    return f;
  };
  const fp12Frob1 = fp12Frob(1);
  const fp12Frob2 = fp12Frob(2);
  const fp12Frob3 = fp12Frob(3);

  /** f·line for a line (c0, c1, c2) evaluated at P: noble's mul014ByLine (M-type twist). */
  const lineMul = m.fn(undefined, [I32, I32, I32]); // (f, line, P)
  {
    const c = caller(lineMul);
    const o0: Addr = [1, 0];
    const [o1, o4, o14] = [s2(), s2(), s2()];
    const [t0, t1, t2, s] = [s6(), s6(), s6(), s6()];
    const [u0, u1, x, y] = [s2(), s2(), s2(), s2()];
    c(fp2MulFp, o1, [1, FP2_BYTES], [2, 0]);
    c(fp2MulFp, o4, [1, 2 * FP2_BYTES], [2, FP_BYTES]);
    /** dst = a·(b0 + b1·v) for a sparse second factor (Fp6.mul01). */
    const mul01 = (dst: Addr, a: (i: number) => Addr, b0: Addr, b1: Addr) => {
      c(fp2Mul, u0, a(0), b0);
      c(fp2Mul, u1, a(1), b1);
      c(fp2Add, x, a(1), a(2));
      c(fp2Mul, x, x, b1);
      c(fp2Sub, x, x, u1);
      c(fp2MulNr, x, x);
      c(fp2Add, c6(dst, 0), x, u0);
      c(fp2Add, x, b0, b1);
      c(fp2Add, y, a(0), a(1));
      c(fp2Mul, x, x, y);
      c(fp2Sub, x, x, u0);
      c(fp2Sub, c6(dst, 1), x, u1);
      c(fp2Add, x, a(0), a(2));
      c(fp2Mul, x, x, b0);
      c(fp2Sub, x, x, u0);
      c(fp2Add, c6(dst, 2), x, u1);
    };
    const fa = (i: number) => c6(c12(A0, 0), i);
    const fb = (i: number) => c6(c12(A0, 1), i);
    mul01(t0, fa, o0, o1);
    // t1 = f1·o4·v (Fp6.mul1)
    c(fp2Mul, x, fb(2), o4);
    c(fp2MulNr, c6(t1, 0), x);
    c(fp2Mul, c6(t1, 1), fb(0), o4);
    c(fp2Mul, c6(t1, 2), fb(1), o4);
    c(fp6Add, s, c12(A0, 0), c12(A0, 1));
    c(fp2Add, o14, o1, o4);
    mul01(t2, (i) => c6(s, i), o0, o14);
    // f1' = t2 − t0 − t1, f0' = t0 + t1·v
    c(fp6Sub, t2, t2, t0);
    c(fp6Sub, c12(A0, 1), t2, t1);
    c(fp6MulV, t1, t1);
    c(fp6Add, c12(A0, 0), t0, t1);
  }

  // ---- G2 lines (noble's pointDouble / pointAdd in homogeneous projective coordinates) ---
  const R = s6(); // Rx, Ry, Rz
  const Rx = c6(R, 0);
  const Ry = c6(R, 1);
  const Rz = c6(R, 2);
  const times3 = (c: Call, dst: Addr, a: Addr, tmp: Addr) => {
    c(fp2Add, tmp, a, a);
    c(fp2Add, dst, tmp, a);
  };

  const pointDouble = m.fn(undefined, [I32]); // (line)
  {
    const c = caller(pointDouble);
    const [t0, t1, t2, t3, t4, x, y] = [s2(), s2(), s2(), s2(), s2(), s2(), s2()];
    const L = (i: number): Addr => [0, i * FP2_BYTES];
    c(fp2Sqr, t0, Ry);
    c(fp2Sqr, t1, Rz);
    times3(c, t2, t1, x);
    c(fp2MulB2, t2, t2);
    times3(c, t3, t2, x);
    c(fp2Add, t4, Ry, Rz);
    c(fp2Sqr, t4, t4);
    c(fp2Sub, t4, t4, t1);
    c(fp2Sub, t4, t4, t0);
    c(fp2Sub, L(0), t2, t0);
    c(fp2Sqr, x, Rx);
    times3(c, L(1), x, y);
    c(fp2Neg, L(2), t4);
    // Rx = (t0 − t3)·Rx·Ry/2, Ry = ((t0 + t3)/2)² − 3t2², Rz = t0·t4
    c(fp2Sub, x, t0, t3);
    c(fp2Mul, x, x, Rx);
    c(fp2Mul, x, x, Ry);
    c(fp2Half, Rx, x);
    c(fp2Add, x, t0, t3);
    c(fp2Half, x, x);
    c(fp2Sqr, x, x);
    c(fp2Sqr, y, t2);
    times3(c, y, y, t1);
    c(fp2Sub, Ry, x, y);
    c(fp2Mul, Rz, t0, t4);
  }

  const pointAdd = m.fn(undefined, [I32, I32, I32]); // (line, Qx, Qy)
  {
    const c = caller(pointAdd);
    const [t0, t1, t2, t3, t4, t5, x, y] = [s2(), s2(), s2(), s2(), s2(), s2(), s2(), s2()];
    const L = (i: number): Addr => [0, i * FP2_BYTES];
    const Qx: Addr = [1, 0];
    const Qy: Addr = [2, 0];
    c(fp2Mul, x, Qy, Rz);
    c(fp2Sub, t0, Ry, x);
    c(fp2Mul, x, Qx, Rz);
    c(fp2Sub, t1, Rx, x);
    c(fp2Mul, x, t0, Qx);
    c(fp2Mul, y, t1, Qy);
    c(fp2Sub, L(0), x, y);
    c(fp2Neg, L(1), t0);
    c(fp2Copy, L(2), t1);
    c(fp2Sqr, t2, t1);
    c(fp2Mul, t3, t2, t1);
    c(fp2Mul, t4, t2, Rx);
    c(fp2Add, x, t4, t4);
    c(fp2Sub, t5, t3, x);
    c(fp2Sqr, x, t0);
    c(fp2Mul, x, x, Rz);
    c(fp2Add, t5, t5, x);
    c(fp2Mul, Rx, t1, t5);
    c(fp2Sub, x, t4, t5);
    c(fp2Mul, x, x, t0);
    c(fp2Mul, y, t3, Ry);
    c(fp2Sub, Ry, x, y);
    c(fp2Mul, Rz, Rz, t3);
  }

  /**
   * (lines, q = Qx ‖ Qy) → i32: 0 when Q is in G2, 2 when it is not (the lines are then
   * meaningless). The loop leaves R = [|x|]Q, so it doubles as the subgroup check: Q ∈ G2 iff
   * ψ(Q) = [x]Q (noble's check), i.e. R = −ψ(Q). The formulas are not complete, but an
   * exceptional case (R = ±Q at an addition, R = O) for a point outside G2 makes Rz = 0 and
   * Rz stays 0 from there on, so Rz ≠ 0 means every step was exact.
   */
  const g2Prepare = m.fn('g2_prepare', [I32, I32], [I32]);
  {
    const f = g2Prepare;
    const c = caller(f);
    const negQy = s2();
    c(fp2Copy, Rx, A1);
    c(fp2Copy, Ry, at(A1, FP2_BYTES));
    c(fp2Copy, Rz, CONST_FP2_ONE);
    c(fp2Neg, negQy, at(A1, FP2_BYTES));
    let line = 0;
    for (const digit of ATE_NAF) {
      c(pointDouble, at(A0, line++ * LINE_BYTES));
      if (digit !== 0) c(pointAdd, at(A0, line++ * LINE_BYTES), A1, digit === -1 ? negQy : at(A1, FP2_BYTES));
    }
    // −ψ(Q) = (x̅·ψx, −y̅·ψy); compare projectively: Rx = x'·Rz, Ry = y'·Rz, Rz ≠ 0.
    const [px, py] = [s2(), s2()];
    c(fp2Conj, px, A1);
    c(fp2Mul, px, px, CONST_PSI_X);
    c(fp2Conj, py, at(A1, FP2_BYTES));
    c(fp2Mul, py, py, CONST_PSI_Y);
    c(fp2Neg, py, py);
    c(fp2Mul, px, px, Rz);
    c(fp2Mul, py, py, Rz);
    c(F.fp2Eq, px, Rx);
    c(F.fp2Eq, py, Ry);
    f.op(Op.i32And);
    c(F.fp2IsZero, Rz);
    f.op(Op.i32Eqz).op(Op.i32And).if().i32Const(0).op(Op.return).op(Op.end);
    f.i32Const(2);
  }

  const miller = m.fn('miller', [I32, I32, I32, I32]); // (f, lines, points, n)
  {
    const f = miller;
    const c = caller(f);
    const k = f.local(I32);
    const lineAt = f.local(I32);
    const pointAt = f.local(I32);
    c(fp12Copy, A0, CONST_FP12_ONE);
    let line = 0;
    ATE_NAF.forEach((digit, step) => {
      if (step !== 0) c(fp12Sqr, A0, A0);
      const count = digit === 0 ? 1 : 2;
      // for k in 0..n: apply this step's lines of pair k
      f.i32Const(0).set(k);
      f.block().loop();
      f.get(k).get(3).op(Op.i32GeS).brIf(1);
      f.get(1).get(k).i32Const(layout.linesBytes).op(Op.i32Mul).op(Op.i32Add).set(lineAt);
      f.get(2)
        .get(k)
        .i32Const(2 * FP_BYTES)
        .op(Op.i32Mul)
        .op(Op.i32Add)
        .set(pointAt);
      for (let j = 0; j < count; j++) c(lineMul, A0, [lineAt, (line + j) * LINE_BYTES], [pointAt, 0]);
      f.get(k).i32Const(1).op(Op.i32Add).set(k);
      f.br(0).op(Op.end).op(Op.end);
      line += count;
    });
    c(fp12Conj, A0, A0);
  }

  /** h = conj(a^|x|) = a^x for a in the cyclotomic subgroup (conjugation inverts there). */
  const powX = m.fn(undefined, [I32, I32]);
  {
    const c = caller(powX);
    const [base, z] = [s12(), s12()];
    c(fp12Copy, base, A1);
    c(fp12Copy, z, A1);
    for (const bit of BLS_X.toString(2).slice(1)) {
      c(fp12CycSqr, z, z);
      if (bit === '1') c(fp12Mul, z, z, base);
    }
    c(fp12Conj, A0, z);
  }

  const finalExp = m.fn('final_exp', [I32, I32]);
  {
    // noble's chain (bls12-381.ts Fp12finalExponentiate), step for step.
    const c = caller(finalExp);
    const [t0, t1, t2, t3, t4, t5, t6, t7, x, y] = Array.from({ length: 10 }, s12) as [
      number,
      number,
      number,
      number,
      number,
      number,
      number,
      number,
      number,
      number,
    ];
    c(fp12Inv, x, A1);
    c(fp12Conj, t0, A1);
    c(fp12Mul, t0, t0, x);
    c(fp12Frob2, t1, t0);
    c(fp12Mul, t1, t1, t0);
    c(powX, t2, t1);
    c(fp12CycSqr, x, t1);
    c(fp12Conj, x, x);
    c(fp12Mul, t3, x, t2);
    c(powX, t4, t3);
    c(powX, t5, t4);
    c(powX, t6, t5);
    c(fp12CycSqr, x, t2);
    c(fp12Mul, t6, t6, x);
    c(powX, t7, t6);
    c(fp12Mul, x, t2, t5);
    c(fp12Frob2, x, x); // (t2·t5)^(p²)
    c(fp12Mul, y, t4, t1);
    c(fp12Frob3, y, y);
    c(fp12Mul, x, x, y);
    c(fp12Conj, y, t1);
    c(fp12Mul, y, t6, y);
    c(fp12Frob1, y, y);
    c(fp12Mul, x, x, y);
    c(fp12Conj, y, t3);
    c(fp12Mul, y, t7, y);
    c(fp12Mul, y, y, t1);
    c(fp12Mul, A0, x, y);
  }

  // ---- G2 decompression and subgroup check ----------------------------------------------
  /**
   * (h, a) → i32: h = √a when a is a square in Fp2 (returns 1), else 0 (h is then garbage).
   * Through Fp: with n = a0² + a1², s = √n and d = (a0 + s)/2, one exponentiation
   * t = d^((p−3)/4) gives both √d = t·d and 1/√d = t when d is a square (t²d = 1), and when it
   * is not, d' = (a0 − s)/2 = −(a1/2)²/d is, with √d' = a1·t/2 and 1/√d' = −t·d. The root is
   * then √d + (a1/(2√d))·u. d = 0 only for a1 = 0, where d = a0 serves instead. Both cases are
   * computed and selected by mask (noble branches on them); the final check catches non-squares.
   */
  const fp2Sqrt = m.fn('fp2_sqrt', [I32, I32], [I32]);
  {
    const f = fp2Sqrt;
    const c = caller(f);
    const [n, sq, d, t, td, h1, chk] = [s1(), s1(), s1(), s1(), s1(), s1(), s1()];
    const root = s2();
    const check = s2();
    c(F.fpSqr, n, A1);
    c(F.fpSqr, sq, at(A1, FP_BYTES));
    c(F.fpAdd, n, n, sq);
    c(F.fpSqrtCandidate, sq, n);
    c(F.fpAdd, d, A1, sq);
    c(F.fpHalf, d, d);
    pushAddr(f, d);
    pushAddr(f, A1);
    c(F.fpIsZero, d);
    f.call(F.fpCmov);
    c(F.fpPowP34, t, d);
    c(F.fpMul, td, t, d);
    c(F.fpMul, chk, td, t);
    c(F.fpMul, h1, at(A1, FP_BYTES), t);
    c(F.fpHalf, h1, h1);
    // Not a square: (a1·t/2) + (−t·d)·u; a square: (t·d) + (a1·t/2)·u.
    c(F.fpCopy, root, h1);
    c(F.fpNeg, at(root, FP_BYTES), td);
    const isSquare = () => c(F.fpEq, chk, CONST_ONE);
    pushAddr(f, root);
    pushAddr(f, td);
    isSquare();
    f.call(F.fpCmov);
    pushAddr(f, at(root, FP_BYTES));
    pushAddr(f, h1);
    isSquare();
    f.call(F.fpCmov);
    c(fp2Sqr, check, root);
    c(fp2Copy, A0, root);
    c(F.fp2Eq, check, A1);
  }

  // Complete projective formulas (Renes–Costello–Batina 2015, a = 0) for both groups, so that
  // no input, however malformed, hits an exceptional case in the subgroup checks.
  const g1 = rcb(m, {
    mul: F.fpMul,
    sqr: F.fpSqr,
    add: F.fpAdd,
    sub: F.fpSub,
    copy: F.fpCopy,
    bytes: FP_BYTES,
    mulB3: fpMulB3,
  });

  /** acc = [|x|]·acc for a projective point (q is scratch for the base). */
  const mulByX = (c: Call, curve: Rcb, acc: number, q: number) => {
    c(curve.copy3, q, acc);
    for (const bit of BLS_X.toString(2).slice(1)) {
      c(curve.dbl, acc);
      if (bit === '1') c(curve.add, acc, q);
    }
  };

  const g2Decompress = m.fn('g2_decompress', [I32, I32], [I32]); // (out = x ‖ y, plain x limbs) → 0 | 1
  {
    const f = g2Decompress;
    const c = caller(f);
    const X = A0;
    const Y = at(A0, FP2_BYTES);
    const rhs = s2();
    c(F.fpToMont, X, A1);
    c(F.fpToMont, at(X, FP_BYTES), at(A1, FP_BYTES));
    c(fp2Sqr, rhs, X);
    c(fp2Mul, rhs, rhs, X);
    c(fp2Add, rhs, rhs, CONST_B2);
    c(fp2Sqrt, Y, rhs);
    // 1 when x³ + b' has no square root; the subgroup check is part of g2_prepare.
    f.op(Op.i32Eqz);
  }

  const g1Decompress = m.fn('g1_decompress', [I32, I32], [I32]); // (out = x ‖ y, plain x limbs)
  {
    const f = g1Decompress;
    const c = caller(f);
    const X = A0;
    const Y = at(A0, FP_BYTES);
    const [rhs, t] = [s1(), s1()];
    c(F.fpToMont, X, A1);
    c(F.fpSqr, rhs, X);
    c(F.fpMul, rhs, rhs, X);
    c(F.fpAdd, rhs, rhs, CONST_G1_B);
    c(F.fpSqrtCandidate, Y, rhs);
    c(F.fpSqr, t, Y);
    c(F.fpEq, t, rhs);
    f.op(Op.i32Eqz).if().i32Const(1).op(Op.return).op(Op.end);
    // In G1 iff [x²]P = φ(P) with φ(x, y) = (β·x, −y) (noble's check, eprint 2021/1130).
    const acc = m.scratch(3 * FP_BYTES);
    const q = m.scratch(3 * FP_BYTES);
    c(F.fpCopy, acc, X);
    c(F.fpCopy, acc + FP_BYTES, Y);
    c(F.fpCopy, acc + 2 * FP_BYTES, CONST_ONE);
    mulByX(c, g1, acc, q);
    mulByX(c, g1, acc, q);
    const [px, py] = [s1(), s1()];
    c(F.fpMul, px, X, CONST_BETA);
    c(F.fpNeg, py, Y);
    c(F.fpMul, px, px, acc + 2 * FP_BYTES);
    c(F.fpMul, py, py, acc + 2 * FP_BYTES);
    c(F.fpEq, px, acc);
    c(F.fpEq, py, acc + FP_BYTES);
    f.op(Op.i32And).if().i32Const(0).op(Op.return).op(Op.end);
    f.i32Const(2);
  }

  /** p = the identity (0 : 1 : 0), in projective coordinates. */
  const setG1Identity = (c: Call, p: number) => {
    c(F.fpCopy, p, ZERO_FP);
    c(F.fpCopy, p + FP_BYTES, CONST_ONE);
    c(F.fpCopy, p + 2 * FP_BYTES, ZERO_FP);
  };

  /** The function's out (argument 0) = affine x ‖ y of projective p; pushes 0 if p is the identity, else 1. */
  const writeG1Affine = (f: FunctionBody, c: Call, p: number, zi: number) => {
    c(F.fpInv, zi, p + 2 * FP_BYTES);
    c(F.fpMul, A0, p, zi);
    c(F.fpMul, at(A0, FP_BYTES), p + FP_BYTES, zi);
    c(F.fpIsZero, p + 2 * FP_BYTES);
    f.op(Op.i32Eqz);
  };

  /**
   * (out, p, k) → i32: out = k·p in affine coordinates for an affine p in G1, where k is given
   * by its GLV halves k = k0 + k1·x² (two 16-byte little-endian integers at k and k + 16; the
   * caller splits it); returns 0 if the result is the identity. φ(P) = (β·x, −y) = [x²]P on G1,
   * so one chain of 128 doublings adds P, φ(P) or P + φ(P) by the bits of k0 and k1: variable
   * time, for public scalars only.
   */
  const g1Mul = m.fn('g1_mul', [I32, I32, I32], [I32]);
  {
    const f = g1Mul;
    const c = caller(f);
    const POINT = 3 * FP_BYTES;
    const acc = m.scratch(POINT);
    const table = m.scratch(4 * POINT); // entry i at table + i·POINT, i = 1..3
    const zi = s1();
    const i = f.local(I32);
    const idx = f.local(I32);
    const bit = (offset: number) => {
      f.get(2).get(i).i32Const(3).op(Op.i32ShrU).op(Op.i32Add).mem(Op.i32Load8U, 0, offset);
      f.get(i).i32Const(7).op(Op.i32And).op(Op.i32ShrU).i32Const(1).op(Op.i32And);
    };
    const P1 = table + POINT;
    const P2 = table + 2 * POINT;
    const P3 = table + 3 * POINT;
    c(F.fpCopy, P1, A1);
    c(F.fpCopy, P1 + FP_BYTES, at(A1, FP_BYTES));
    c(F.fpCopy, P1 + 2 * FP_BYTES, CONST_ONE);
    c(F.fpMul, P2, A1, CONST_BETA);
    c(F.fpNeg, P2 + FP_BYTES, at(A1, FP_BYTES));
    c(F.fpCopy, P2 + 2 * FP_BYTES, CONST_ONE);
    c(g1.copy3, P3, P1);
    c(g1.add, P3, P2);
    setG1Identity(c, acc);
    f.i32Const(127).set(i);
    f.loop();
    c(g1.dbl, acc);
    bit(0);
    bit(16);
    f.i32Const(1).op(Op.i32Shl).op(Op.i32Or).tee(idx);
    f.if();
    f.i32Const(acc).get(idx).i32Const(POINT).op(Op.i32Mul).i32Const(table).op(Op.i32Add).call(g1.add);
    f.op(Op.end);
    f.get(i).i32Const(1).op(Op.i32Sub).tee(i).i32Const(0).op(Op.i32GeS).brIf(0);
    f.op(Op.end);
    writeG1Affine(f, c, acc, zi);
  }

  // ---- encapsulation: sums of fixed G1 bases and powers of KT, for secret scalars ------------
  // The operation sequence and the addresses read do not depend on the scalars: every step reads
  // every table entry and keeps the wanted one by masks (constant time, unlike BigInt).

  /** (sel, table, count, d): sel = entry d of `count` entries of `bytes` each. */
  const selectEntry = (bytes: number) => {
    const f = m.fn(undefined, [I32, I32, I32, I32]);
    const e = f.local(I32);
    const p = f.local(I32);
    const mask = f.local(I64);
    const keep = f.local(I64);
    f.i32Const(0).set(e);
    f.get(1).set(p);
    f.loop();
    f.i64Const(0n).get(e).get(3).op(Op.i32Eq).op(Op.i64ExtendI32U).op(Op.i64Sub).tee(mask);
    f.i64Const(-1n).op(Op.i64Xor).set(keep);
    for (let w = 0; w < bytes; w += 8) {
      f.get(0);
      f.get(0).load64(w).get(keep).op(Op.i64And);
      f.get(p).load64(w).get(mask).op(Op.i64And);
      f.op(Op.i64Or).store64(w);
    }
    f.get(p).i32Const(bytes).op(Op.i32Add).set(p);
    f.get(e).i32Const(1).op(Op.i32Add).tee(e).get(2).op(Op.i32LtU).brIf(0);
    f.op(Op.end);
    return f;
  };
  const clear = (f: FunctionBody, addr: number, bytes: number) => {
    for (let w = 0; w < bytes; w += 8) f.i32Const(addr).i64Const(0n).store64(w);
  };

  /**
   * (table, count): completes a joint table whose power-of-two entries (the bases, projective)
   * and entry 0 (the identity) are set: entry m = Σ of the bases whose bits m has.
   */
  const g1TableFill = m.fn('g1_table_fill', [I32, I32]);
  {
    const f = g1TableFill;
    const i = f.local(I32);
    const low = f.local(I32);
    const entry = (index: number) => f.get(0).get(index).i32Const(G1_PROJECTIVE_BYTES).op(Op.i32Mul).op(Op.i32Add);
    f.i32Const(1).set(i);
    f.loop();
    f.get(i).i32Const(0).get(i).op(Op.i32Sub).op(Op.i32And).tee(low);
    f.get(i).op(Op.i32Ne);
    f.if();
    entry(i);
    f.get(0).get(i).get(i).i32Const(1).op(Op.i32Sub).op(Op.i32And).i32Const(G1_PROJECTIVE_BYTES).op(Op.i32Mul);
    f.op(Op.i32Add).call(g1.copy3);
    entry(i);
    entry(low);
    f.call(g1.add);
    f.op(Op.end);
    f.get(i).i32Const(1).op(Op.i32Add).tee(i).get(1).op(Op.i32LtU).brIf(0);
    f.op(Op.end);
  }

  /**
   * (out, table, digits, count) → i32: out = affine x ‖ y of the sum, one doubling and one
   * addition of entry digits[step] per step (G1_MSM_STEPS, most significant first); returns 0
   * when the sum is the identity.
   */
  const g1Msm = m.fn('g1_msm', [I32, I32, I32, I32], [I32]);
  {
    const f = g1Msm;
    const c = caller(f);
    const select = selectEntry(G1_PROJECTIVE_BYTES);
    const acc = m.scratch(G1_PROJECTIVE_BYTES);
    const sel = m.scratch(G1_PROJECTIVE_BYTES);
    const zi = s1();
    const i = f.local(I32);
    setG1Identity(c, acc);
    f.i32Const(0).set(i);
    f.loop();
    c(g1.dbl, acc);
    f.i32Const(sel).get(1).get(3);
    f.get(2).get(i).op(Op.i32Add).mem(Op.i32Load8U, 0, 0);
    f.call(select);
    c(g1.add, acc, sel);
    f.get(i).i32Const(1).op(Op.i32Add).tee(i).i32Const(G1_MSM_STEPS).op(Op.i32LtU).brIf(0);
    f.op(Op.end);
    writeG1Affine(f, c, acc, zi);
    clear(f, acc, G1_PROJECTIVE_BYTES);
    clear(f, sel, G1_PROJECTIVE_BYTES);
  }

  /**
   * (out, table, digits): out = Π over GT_POW_STEPS steps of a cyclotomic squaring and a
   * multiplication by entry digits[step] of a 16-entry table (GtPowBase's in gt.ts).
   */
  const gtPow = m.fn('gt_pow', [I32, I32, I32]);
  {
    const f = gtPow;
    const c = caller(f);
    const select = selectEntry(FP12_BYTES);
    const acc = s12();
    const sq = s12();
    const sel = s12();
    const i = f.local(I32);
    c(fp12Copy, acc, CONST_FP12_ONE);
    f.i32Const(0).set(i);
    f.loop();
    c(fp12CycSqr, sq, acc);
    f.i32Const(sel).get(1).i32Const(GT_TABLE_ENTRIES);
    f.get(2).get(i).op(Op.i32Add).mem(Op.i32Load8U, 0, 0);
    f.call(select);
    c(fp12Mul, acc, sq, sel);
    f.get(i).i32Const(1).op(Op.i32Add).tee(i).i32Const(GT_POW_STEPS).op(Op.i32LtU).brIf(0);
    f.op(Op.end);
    c(fp12Copy, A0, acc);
    // The power is a KEM secret: nothing of it stays behind in scratch memory.
    for (const region of [acc, sq, sel]) clear(f, region, FP12_BYTES);
  }

  const bytes = encodeModule({
    pages: layout.pages,
    memoryName: 'memory',
    functions: m.functions,
    data: [{ offset: 0, bytes: constantsSegment() }],
  });
  return { bytes, layout };
}

interface CurveField {
  readonly mul: FunctionBody;
  readonly sqr: FunctionBody;
  readonly add: FunctionBody;
  readonly sub: FunctionBody;
  readonly copy: FunctionBody;
  readonly bytes: number;
  /** (h, a): h = 3b·a */
  readonly mulB3: FunctionBody;
}

interface Rcb {
  /** (acc): acc = 2·acc */ readonly dbl: FunctionBody;
  /** (acc, q): acc = acc + q */ readonly add: FunctionBody;
  /** (h, a): copy a projective point */ readonly copy3: FunctionBody;
}

/** Projective (X : Y : Z) doubling and addition on y² = x³ + b, complete (RCB algorithms 7, 9). */
function rcb(m: ModuleBuilder, F: CurveField): Rcb {
  const n = F.bytes;
  const s = () => m.scratch(n);
  const [t0, t1, t2, t3, t4, x3, y3, z3] = [s(), s(), s(), s(), s(), s(), s(), s()];
  const store = (c: Call) => {
    c(F.copy, [0, 0], x3);
    c(F.copy, [0, n], y3);
    c(F.copy, [0, 2 * n], z3);
  };

  const dbl = m.fn(undefined, [I32]);
  {
    const c = caller(dbl);
    const [X, Y, Z] = [0, n, 2 * n].map((o): Addr => [0, o]) as [Addr, Addr, Addr];
    c(F.sqr, t0, Y);
    c(F.add, z3, t0, t0);
    c(F.add, z3, z3, z3);
    c(F.add, z3, z3, z3);
    c(F.mul, t1, Y, Z);
    c(F.sqr, t2, Z);
    c(F.mulB3, t2, t2);
    c(F.mul, x3, t2, z3);
    c(F.add, y3, t0, t2);
    c(F.mul, z3, t1, z3);
    c(F.add, t1, t2, t2);
    c(F.add, t2, t1, t2);
    c(F.sub, t0, t0, t2);
    c(F.mul, y3, t0, y3);
    c(F.add, y3, x3, y3);
    c(F.mul, t1, X, Y);
    c(F.mul, x3, t0, t1);
    c(F.add, x3, x3, x3);
    store(c);
  }

  const add = m.fn(undefined, [I32, I32]);
  {
    const c = caller(add);
    const [X1, Y1, Z1] = [0, n, 2 * n].map((o): Addr => [0, o]) as [Addr, Addr, Addr];
    const [X2, Y2, Z2] = [0, n, 2 * n].map((o): Addr => [1, o]) as [Addr, Addr, Addr];
    c(F.mul, t0, X1, X2);
    c(F.mul, t1, Y1, Y2);
    c(F.mul, t2, Z1, Z2);
    c(F.add, t3, X1, Y1);
    c(F.add, t4, X2, Y2);
    c(F.mul, t3, t3, t4);
    c(F.add, t4, t0, t1);
    c(F.sub, t3, t3, t4);
    c(F.add, t4, Y1, Z1);
    c(F.add, x3, Y2, Z2);
    c(F.mul, t4, t4, x3);
    c(F.add, x3, t1, t2);
    c(F.sub, t4, t4, x3);
    c(F.add, x3, X1, Z1);
    c(F.add, y3, X2, Z2);
    c(F.mul, x3, x3, y3);
    c(F.add, y3, t0, t2);
    c(F.sub, y3, x3, y3);
    c(F.add, x3, t0, t0);
    c(F.add, t0, x3, t0);
    c(F.mulB3, t2, t2);
    c(F.add, z3, t1, t2);
    c(F.sub, t1, t1, t2);
    c(F.mulB3, y3, y3);
    c(F.mul, x3, t4, y3);
    c(F.mul, t2, t3, t1);
    c(F.sub, x3, t2, x3);
    c(F.mul, y3, y3, t0);
    c(F.mul, t1, t1, z3);
    c(F.add, y3, t1, y3);
    c(F.mul, t0, t0, t3);
    c(F.mul, z3, z3, t4);
    c(F.add, z3, z3, t0);
    store(c);
  }

  const copy3 = m.fn(undefined, [I32, I32]);
  for (let i = 0; i < 3 * n; i += 8) copy3.get(0).get(1).load64(i).store64(i);
  return { dbl, add, copy3 };
}
