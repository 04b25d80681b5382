import { FP2_BYTES, FP_BYTES, fpBytes, P, R_MONT } from './bls-wasm-layout.js';
import { ModuleBuilder, pushAddr, type Addr } from './ristretto-wasm-field.js';
import { FunctionBody, I32, I64, Op } from './wasm-emit.js';

/**
 * Code generators for the base field of BLS12-381 (p, 381 bits) and its quadratic extension
 * Fp2 = Fp[u]/(u² + 1) in WebAssembly.
 *
 * Representation: Montgomery form with R = 2^384, twelve little-endian 32-bit limbs in linear
 * memory (48 bytes per Fp, 96 per Fp2 as c0 ‖ c1), always fully reduced (0 ≤ a < p). Limbs are
 * 32 bits because WebAssembly has no 64×64→128 multiply: a 32×32 product plus two 32-bit
 * addends still fits an u64, which is what the CIOS inner step needs.
 *
 * Functions take i32 addresses and may alias (every input is loaded before the output is
 * stored). Nothing here branches on or addresses by a value: the final subtraction of the
 * Montgomery product and of add/sub is a masked select. Exponentiations use fixed public
 * exponents, so their operation sequence is fixed as well.
 */

const LIMBS = 12;
const MASK32 = 0xffff_ffffn;
const R2 = (R_MONT * R_MONT) % P;

function limbsOf(x: bigint): bigint[] {
  return Array.from({ length: LIMBS }, (_, i) => (x >> BigInt(32 * i)) & MASK32);
}
const P_LIMBS = limbsOf(P);
/** −p⁻¹ mod 2^32, the Montgomery reduction factor. */
const N0 = (() => {
  let inv = 1n;
  for (let i = 0; i < 6; i++) inv = (inv * (2n - P_LIMBS[0]! * inv)) & MASK32;
  return (1n << 32n) - inv;
})();

function loadLimbs(f: FunctionBody, local: number): number[] {
  return Array.from({ length: LIMBS }, (_, i) => {
    const l = f.local(I64);
    f.get(local)
      .mem(0x35 /* i64.load32_u */, 2, 4 * i)
      .set(l);
    return l;
  });
}

function storeLimbs(f: FunctionBody, local: number, limbs: readonly number[]): void {
  limbs.forEach((l, i) =>
    f
      .get(local)
      .get(l)
      .mem(Op.i64Store32, 2, 4 * i),
  );
}

const lo = (f: FunctionBody) => f.i64Const(MASK32).op(Op.i64And);
const hi = (f: FunctionBody) => f.i64Const(32n).op(Op.i64ShrU);

/**
 * t − p if that does not borrow, else t (t < 2p, given as limbs plus an extra top word that is
 * 0 or 1). Masked: both candidates are computed. Results land in `out`.
 */
function emitReduceOnce(f: FunctionBody, t: readonly number[], top: number | undefined, out: readonly number[]): void {
  const d = t.map(() => f.local(I64));
  const borrow = f.local(I64);
  f.i64Const(0n).set(borrow);
  t.forEach((ti, i) => {
    // ti − p_i − borrow as a 64-bit value: bit 63 set means it borrowed.
    f.get(ti).i64Const(P_LIMBS[i]!).op(Op.i64Sub).get(borrow).op(Op.i64Sub).tee(d[i]!);
    f.i64Const(63n).op(Op.i64ShrU).set(borrow);
    f.get(d[i]!).i64Const(MASK32).op(Op.i64And).set(d[i]!);
  });
  // Keep t when the subtraction borrowed past the top word: (top − borrow) < 0, as a mask.
  const keep = f.local(I64);
  f.i64Const(0n);
  if (top === undefined) f.i64Const(0n);
  else f.get(top);
  f.get(borrow).op(Op.i64Sub).i64Const(63n).op(Op.i64ShrU).op(Op.i64Sub).set(keep);
  t.forEach((ti, i) => {
    f.get(ti).get(d[i]!).op(Op.i64Xor).get(keep).op(Op.i64And).get(d[i]!).op(Op.i64Xor).set(out[i]!);
  });
}

/** The exported field functions; Fp2 functions take Fp2 addresses. */
export interface BlsFieldFunctions {
  readonly fpMul: FunctionBody;
  readonly fpSqr: FunctionBody;
  readonly fpAdd: FunctionBody;
  readonly fpSub: FunctionBody;
  readonly fpNeg: FunctionBody;
  readonly fpCopy: FunctionBody;
  /** (h, a): h = a/2 */ readonly fpHalf: FunctionBody;
  /** (a) → i32: a = 0 */ readonly fpIsZero: FunctionBody;
  /** (a, b) → i32: a = b */ readonly fpEq: FunctionBody;
  /** (a, b, c): a = c ? b : a for c ∈ {0, 1} */ readonly fpCmov: FunctionBody;
  /** (h, a): h = a^(p−2) */ readonly fpInv: FunctionBody;
  /** (h, a): h = a^((p+1)/4), a square root when one exists */ readonly fpSqrtCandidate: FunctionBody;
  /** (h, a): h = a^((p−3)/4), which gives √a and 1/√a at once */ readonly fpPowP34: FunctionBody;
  /** (h, a): from plain limbs into Montgomery form */ readonly fpToMont: FunctionBody;
  /** (h, a): out of Montgomery form */ readonly fpFromMont: FunctionBody;
  readonly fp2Mul: FunctionBody;
  readonly fp2Sqr: FunctionBody;
  readonly fp2Add: FunctionBody;
  readonly fp2Sub: FunctionBody;
  readonly fp2Neg: FunctionBody;
  readonly fp2Copy: FunctionBody;
  /** (h, a): h = a·(u + 1) */ readonly fp2MulNr: FunctionBody;
  /** (h, a): h = a̅ */ readonly fp2Conj: FunctionBody;
  /** (h, a, b): h = a·b for b in Fp */ readonly fp2MulFp: FunctionBody;
  readonly fp2Inv: FunctionBody;
  /** (a) → i32 */ readonly fp2IsZero: FunctionBody;
  /** (a, b) → i32 */ readonly fp2Eq: FunctionBody;
  /** (a, b, c) as fpCmov */ readonly fp2Cmov: FunctionBody;
}

/** Constants the field needs in memory: one (Montgomery), R² (plain limbs), scratch. */
export interface FieldConstants {
  readonly one: number;
  readonly r2: number;
}

/** Bytes for the constants segment at `at` (one at +0, R² at +48). */
export function fieldConstantsSegment(): Uint8Array {
  const out = new Uint8Array(2 * FP_BYTES);
  out.set(fpBytes(1n), 0);
  let v = R2;
  for (let i = 0; i < FP_BYTES; i++, v >>= 8n) out[FP_BYTES + i] = Number(v & 0xffn);
  return out;
}

export function buildBlsField(m: ModuleBuilder, consts: FieldConstants): BlsFieldFunctions {
  const fpMul = m.fn('fp_mul', [I32, I32, I32]);
  {
    const f = fpMul;
    const A = loadLimbs(f, 1);
    const B = loadLimbs(f, 2);
    const t = Array.from({ length: LIMBS + 2 }, () => f.local(I64));
    const c = f.local(I64);
    const mm = f.local(I64);
    t.forEach((l) => f.i64Const(0n).set(l));
    for (let i = 0; i < LIMBS; i++) {
      // t += a·b_i
      f.i64Const(0n).set(c);
      for (let j = 0; j < LIMBS; j++) {
        f.get(t[j]!).get(A[j]!).get(B[i]!).op(Op.i64Mul).op(Op.i64Add).get(c).op(Op.i64Add).tee(c);
        lo(f).set(t[j]!);
        f.get(c);
        hi(f).set(c);
      }
      f.get(t[LIMBS]!).get(c).op(Op.i64Add).tee(c);
      lo(f).set(t[LIMBS]!);
      f.get(c);
      hi(f).set(t[LIMBS + 1]!);
      // t = (t + m·p) / 2^32 with m making the low limb vanish.
      f.get(t[0]!).i64Const(N0).op(Op.i64Mul);
      lo(f).set(mm);
      f.get(t[0]!).get(mm).i64Const(P_LIMBS[0]!).op(Op.i64Mul).op(Op.i64Add);
      hi(f).set(c);
      for (let j = 1; j < LIMBS; j++) {
        f.get(t[j]!).get(mm).i64Const(P_LIMBS[j]!).op(Op.i64Mul).op(Op.i64Add).get(c).op(Op.i64Add).tee(c);
        lo(f).set(t[j - 1]!);
        f.get(c);
        hi(f).set(c);
      }
      f.get(t[LIMBS]!).get(c).op(Op.i64Add).tee(c);
      lo(f).set(t[LIMBS - 1]!);
      f.get(c);
      hi(f)
        .get(t[LIMBS + 1]!)
        .op(Op.i64Add)
        .set(t[LIMBS]!);
    }
    // t < 2p: one masked subtraction (t[LIMBS] is the 0/1 top word).
    const out = A;
    emitReduceOnce(f, t.slice(0, LIMBS), t[LIMBS]!, out);
    storeLimbs(f, 0, out);
  }

  const fpSqr = m.fn('fp_sqr', [I32, I32]);
  fpSqr.get(0).get(1).get(1).call(fpMul);

  const fpAdd = m.fn('fp_add', [I32, I32, I32]);
  {
    const f = fpAdd;
    const A = loadLimbs(f, 1);
    const B = loadLimbs(f, 2);
    const c = f.local(I64);
    f.i64Const(0n).set(c);
    A.forEach((a, i) => {
      f.get(a).get(B[i]!).op(Op.i64Add).get(c).op(Op.i64Add).tee(c);
      lo(f).set(a);
      f.get(c);
      hi(f).set(c);
    });
    emitReduceOnce(f, A, c, A);
    storeLimbs(f, 0, A);
  }

  const fpSub = m.fn('fp_sub', [I32, I32, I32]);
  {
    const f = fpSub;
    const A = loadLimbs(f, 1);
    const B = loadLimbs(f, 2);
    const borrow = f.local(I64);
    const mask = f.local(I64);
    f.i64Const(0n).set(borrow);
    A.forEach((a, i) => {
      f.get(a).get(B[i]!).op(Op.i64Sub).get(borrow).op(Op.i64Sub).tee(a);
      f.i64Const(63n).op(Op.i64ShrU).set(borrow);
      f.get(a).i64Const(MASK32).op(Op.i64And).set(a);
    });
    // Add p back under a mask when a − b went negative.
    f.i64Const(0n).get(borrow).op(Op.i64Sub).set(mask);
    const c = f.local(I64);
    f.i64Const(0n).set(c);
    A.forEach((a, i) => {
      f.get(a).i64Const(P_LIMBS[i]!).get(mask).op(Op.i64And).op(Op.i64Add).get(c).op(Op.i64Add).tee(c);
      lo(f).set(a);
      f.get(c);
      hi(f).set(c);
    });
    storeLimbs(f, 0, A);
  }

  /** (h, a): h = a/2, i.e. (a + p·(a mod 2))/2, with the parity applied as a mask. */
  const fpHalf = m.fn('fp_half', [I32, I32]);
  {
    const f = fpHalf;
    const A = loadLimbs(f, 1);
    const mask = f.local(I64);
    const c = f.local(I64);
    f.i64Const(0n).get(A[0]!).i64Const(1n).op(Op.i64And).op(Op.i64Sub).set(mask);
    f.i64Const(0n).set(c);
    A.forEach((a, i) => {
      f.get(a).i64Const(P_LIMBS[i]!).get(mask).op(Op.i64And).op(Op.i64Add).get(c).op(Op.i64Add).tee(c);
      lo(f).set(a);
      f.get(c);
      hi(f).set(c);
    });
    // a + p < 2^382: the top carry is 0, and the shifted-in bit of the top limb is 0.
    A.forEach((a, i) => {
      f.get(a).i64Const(1n).op(Op.i64ShrU);
      if (i + 1 < LIMBS)
        f.get(A[i + 1]!)
          .i64Const(31n)
          .op(Op.i64Shl)
          .i64Const(MASK32)
          .op(Op.i64And)
          .op(Op.i64Or);
      f.set(a);
    });
    storeLimbs(f, 0, A);
  }

  const zeroAddr = m.scratch(FP_BYTES); // stays zero: nothing writes it
  const fpNeg = m.fn('fp_neg', [I32, I32]);
  fpNeg.get(0).i32Const(zeroAddr).get(1).call(fpSub);

  const fpCopy = m.fn('fp_copy', [I32, I32]);
  for (let i = 0; i < FP_BYTES; i += 8) fpCopy.get(0).get(1).load64(i).store64(i);

  const orOfXor = (f: FunctionBody, bytes: number, withSecond: boolean) => {
    for (let i = 0; i < bytes; i += 8) {
      f.get(0).load64(i);
      if (withSecond) f.get(1).load64(i).op(Op.i64Xor);
      if (i > 0) f.op(Op.i64Or);
    }
    f.op(Op.i64Eqz);
  };
  const fpIsZero = m.fn('fp_is_zero', [I32], [I32]);
  orOfXor(fpIsZero, FP_BYTES, false);
  const fpEq = m.fn('fp_eq', [I32, I32], [I32]);
  orOfXor(fpEq, FP_BYTES, true);
  const fp2IsZero = m.fn('fp2_is_zero', [I32], [I32]);
  orOfXor(fp2IsZero, FP2_BYTES, false);
  const fp2Eq = m.fn('fp2_eq', [I32, I32], [I32]);
  orOfXor(fp2Eq, FP2_BYTES, true);

  const cmov = (name: string, bytes: number) => {
    const f = m.fn(name, [I32, I32, I32]);
    const mask = f.local(I64);
    f.i64Const(0n).get(2).op(Op.i64ExtendI32U).op(Op.i64Sub).set(mask);
    for (let i = 0; i < bytes; i += 8) {
      f.get(0);
      f.get(0).load64(i).get(0).load64(i).get(1).load64(i).op(Op.i64Xor).get(mask).op(Op.i64And).op(Op.i64Xor);
      f.store64(i);
    }
    return f;
  };
  const fpCmov = cmov('fp_cmov', FP_BYTES);
  const fp2Cmov = cmov('fp2_cmov', FP2_BYTES);

  const fpToMont = m.fn('fp_to_mont', [I32, I32]);
  fpToMont.get(0).get(1).i32Const(consts.r2).call(fpMul);
  const fpFromMont = m.fn('fp_from_mont', [I32, I32]);
  {
    // Multiply by plain 1 (limb 0 = 1): a·1·R⁻¹.
    const plainOne = m.scratch(FP_BYTES);
    fpFromMont.i32Const(plainOne).i32Const(1).mem(Op.i32Store, 2, 0);
    fpFromMont.get(0).get(1).i32Const(plainOne).call(fpMul);
  }

  const fpInv = m.fn('fp_inv', [I32, I32]);
  emitPow(fpInv, m, P - 2n, fpMul, fpSqr, fpCopy, FP_BYTES);
  const fpSqrtCandidate = m.fn('fp_sqrt_candidate', [I32, I32]);
  emitPow(fpSqrtCandidate, m, (P + 1n) / 4n, fpMul, fpSqr, fpCopy, FP_BYTES);
  const fpPowP34 = m.fn('fp_pow_p34', [I32, I32]);
  emitPow(fpPowP34, m, (P - 3n) / 4n, fpMul, fpSqr, fpCopy, FP_BYTES);

  // ---- Fp2 ---------------------------------------------------------------------------------
  const H = FP_BYTES;
  const c0 = (l: number): Addr => [l, 0];
  const c1 = (l: number): Addr => [l, H];
  const call = (f: FunctionBody, target: FunctionBody, ...args: Addr[]) => {
    for (const a of args) pushAddr(f, a);
    f.call(target);
  };
  const twice = (name: string, target: FunctionBody, arity: 1 | 2) => {
    const f = m.fn(name, arity === 2 ? [I32, I32, I32] : [I32, I32]);
    for (const part of [c0, c1]) {
      if (arity === 2) call(f, target, part(0), part(1), part(2));
      else call(f, target, part(0), part(1));
    }
    return f;
  };
  const fp2Add = twice('fp2_add', fpAdd, 2);
  const fp2Sub = twice('fp2_sub', fpSub, 2);
  const fp2Neg = twice('fp2_neg', fpNeg, 1);
  const fp2Copy = m.fn('fp2_copy', [I32, I32]);
  for (let i = 0; i < FP2_BYTES; i += 8) fp2Copy.get(0).get(1).load64(i).store64(i);

  const fp2Mul = m.fn('fp2_mul', [I32, I32, I32]);
  {
    // Karatsuba: (a0 + a1u)(b0 + b1u) = a0b0 − a1b1 + ((a0 + a1)(b0 + b1) − a0b0 − a1b1)u.
    const [t0, t1, s0, s1] = [0, 1, 2, 3].map(() => m.scratch(FP_BYTES)) as [number, number, number, number];
    const f = fp2Mul;
    call(f, fpMul, t0, c0(1), c0(2));
    call(f, fpMul, t1, c1(1), c1(2));
    call(f, fpAdd, s0, c0(1), c1(1));
    call(f, fpAdd, s1, c0(2), c1(2));
    call(f, fpMul, s0, s0, s1);
    call(f, fpSub, s0, s0, t0);
    call(f, fpSub, c1(0), s0, t1);
    call(f, fpSub, c0(0), t0, t1);
  }
  const fp2Sqr = m.fn('fp2_sqr', [I32, I32]);
  {
    // (a0 + a1u)² = (a0 + a1)(a0 − a1) + 2a0a1·u.
    const [s, d, p] = [0, 1, 2].map(() => m.scratch(FP_BYTES)) as [number, number, number];
    const f = fp2Sqr;
    call(f, fpAdd, s, c0(1), c1(1));
    call(f, fpSub, d, c0(1), c1(1));
    call(f, fpMul, p, c0(1), c1(1));
    call(f, fpMul, c0(0), s, d);
    call(f, fpAdd, c1(0), p, p);
  }
  const fp2MulNr = m.fn('fp2_mul_nr', [I32, I32]);
  {
    const t = m.scratch(FP_BYTES);
    const f = fp2MulNr;
    call(f, fpSub, t, c0(1), c1(1));
    call(f, fpAdd, c1(0), c0(1), c1(1));
    call(f, fpCopy, c0(0), t);
  }
  const fp2Conj = m.fn('fp2_conj', [I32, I32]);
  call(fp2Conj, fpCopy, c0(0), c0(1));
  call(fp2Conj, fpNeg, c1(0), c1(1));
  const fp2MulFp = m.fn('fp2_mul_fp', [I32, I32, I32]);
  call(fp2MulFp, fpMul, c0(0), c0(1), [2, 0]);
  call(fp2MulFp, fpMul, c1(0), c1(1), [2, 0]);
  const fp2Inv = m.fn('fp2_inv', [I32, I32]);
  {
    // 1/(a0 + a1u) = (a0 − a1u)/(a0² + a1²); 0 maps to 0 as in Fp.
    const [n, t] = [0, 1].map(() => m.scratch(FP_BYTES)) as [number, number];
    const f = fp2Inv;
    call(f, fpSqr, n, c0(1));
    call(f, fpSqr, t, c1(1));
    call(f, fpAdd, n, n, t);
    call(f, fpInv, n, n);
    call(f, fpMul, c0(0), c0(1), n);
    call(f, fpMul, t, c1(1), n);
    call(f, fpNeg, c1(0), t);
  }

  return {
    ...{ fpMul, fpSqr, fpAdd, fpSub, fpNeg, fpCopy, fpHalf, fpIsZero, fpEq, fpCmov, fpInv, fpSqrtCandidate, fpPowP34 },
    ...{ fpToMont, fpFromMont, fp2Mul, fp2Sqr, fp2Add, fp2Sub, fp2Neg, fp2Copy, fp2MulNr, fp2Conj },
    ...{ fp2MulFp, fp2Inv, fp2IsZero, fp2Eq, fp2Cmov },
  };
}

/**
 * h = a^e for a fixed public exponent: fixed 4-bit windows over a table of a^1..a^15, so the
 * sequence of squarings and multiplications is the same for every a. Params of `f` are (h, a);
 * h may alias a.
 */
export function emitPow(
  f: FunctionBody,
  m: ModuleBuilder,
  e: bigint,
  mul: FunctionBody,
  sqr: FunctionBody,
  copy: FunctionBody,
  bytes: number,
): void {
  const WINDOW = 4;
  const table = Array.from({ length: 1 << WINDOW }, (_, i) => (i === 0 ? -1 : m.scratch(bytes)));
  const acc = m.scratch(bytes);
  const entry = (i: number) => table[i]!;
  f.i32Const(entry(1)).get(1).call(copy);
  f.i32Const(entry(2)).i32Const(entry(1)).call(sqr);
  for (let i = 3; i < 1 << WINDOW; i++)
    f.i32Const(entry(i))
      .i32Const(entry(i - 1))
      .i32Const(entry(1))
      .call(mul);
  const digits: number[] = [];
  for (let k = e; k > 0n; k >>= BigInt(WINDOW)) digits.unshift(Number(k & BigInt((1 << WINDOW) - 1)));
  f.i32Const(acc).i32Const(entry(digits[0]!)).call(copy);
  for (const d of digits.slice(1)) {
    for (let i = 0; i < WINDOW; i++) f.i32Const(acc).i32Const(acc).call(sqr);
    if (d !== 0) f.i32Const(acc).i32Const(acc).i32Const(entry(d)).call(mul);
  }
  f.get(0).i32Const(acc).call(copy);
}
