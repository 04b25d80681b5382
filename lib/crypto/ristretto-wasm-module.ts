import {
  buildField,
  Fe,
  limbBytes,
  mod,
  ModuleBuilder,
  P,
  pushAddr,
  type Addr,
  type FieldFunctions,
} from './ristretto-wasm-field.js';
import {
  BUILD_POINTS,
  BUILD_PREFIX,
  comb,
  DEFAULT_RISTRETTO_OPTIONS,
  DIGITS_BYTES,
  FE_BYTES,
  P3_BYTES,
  PRECOMP_BYTES,
  ristrettoLayout,
  SCALAR_BUFFER,
  SCRATCH_END,
  SCRATCH_START,
  type Comb,
  type RistrettoLayout,
  type RistrettoOptions,
} from './ristretto-wasm-layout.js';
import { encodeModule, FunctionBody, I32, I64, Op } from './wasm-emit.js';

/** The generator's options, with the layout they make (ristretto-wasm-layout.ts). */
export { DEFAULT_RISTRETTO_OPTIONS, type RistrettoOptions } from './ristretto-wasm-layout.js';

/**
 * Generates the ristretto255 WebAssembly module: edwards25519 in extended coordinates (the
 * ref10 formulas and point representations), RFC 9496 encode/decode, and the three operations
 * GG signatures spend their time in:
 *
 *   base_mul_encode(out, a)      enc(a·B), constant time in a (the signing nonce)
 *   check(out, table, b, d)      enc(b·B − d·Q) from a precomputed table of Q (verification)
 *   check_once(out, q, b, d)     the same for an encoded Q without a table; 0 if q is invalid
 *
 * Fixed-base multiplications use combs over precomputed tables of affine points
 * (y+x, y−x, 2dxy): the scalar is recoded into signed digits in [−2^(w−1), 2^(w−1)] and each
 * digit adds one table entry, so there are no doublings at all when a table has one row per
 * digit. The table of B (rows j·256^i·B) is built inside wasm by `init`, the table of a
 * verifier's Q by `prepare`.
 *
 * The memory map, the table geometry and the generator's options are ristretto-wasm-layout.ts,
 * shared with ristretto-wasm.ts.
 */

const CACHED_BYTES = 4 * FE_BYTES;
const [X, Y, Z, T] = [0, FE_BYTES, 2 * FE_BYTES, 3 * FE_BYTES];

const CONST_ONE = 0;
const CONST_D = 40;
const CONST_D2 = 80;
const CONST_SQRT_M1 = 120;
const CONST_INVSQRT_A_MINUS_D = 160;
const CONST_BASE = 200;

// ---- constants -------------------------------------------------------------------------------

function pow(b: bigint, e: bigint): bigint {
  let r = 1n;
  let x = mod(b);
  for (let k = e; k > 0n; k >>= 1n) {
    if (k & 1n) r = (r * x) % P;
    x = (x * x) % P;
  }
  return r;
}
const inv = (x: bigint) => pow(x, P - 2n);

export const ED25519_D = mod(-121665n * inv(121666n));
export const SQRT_M1 = 19681161376707505956807079304988542015446066515923890162744021073123829784752n;
export const INVSQRT_A_MINUS_D = 54469307008909316920995813868745141605393597292927456921205312896311721017578n;
const BASE_X = 15112221349535400772501151409588531511454012693041857206046113283949847762202n;
const BASE_Y = mod(4n * inv(5n));

function constantsSegment(): Uint8Array {
  const out = new Uint8Array(CONST_BASE + P3_BYTES);
  out.set(limbBytes(1n), CONST_ONE);
  out.set(limbBytes(ED25519_D), CONST_D);
  out.set(limbBytes(2n * ED25519_D), CONST_D2);
  out.set(limbBytes(SQRT_M1), CONST_SQRT_M1);
  out.set(limbBytes(INVSQRT_A_MINUS_D), CONST_INVSQRT_A_MINUS_D);
  out.set(limbBytes(BASE_X), CONST_BASE + X);
  out.set(limbBytes(BASE_Y), CONST_BASE + Y);
  out.set(limbBytes(1n), CONST_BASE + Z);
  out.set(limbBytes(BASE_X * BASE_Y), CONST_BASE + T);
  return out;
}

// ---- small code helpers ----------------------------------------------------------------------

const param = (index: number, offset = 0): Addr => [index, offset];

/** `while (cond) { body }` where `cond` pushes an i32. */
function whileLoop(f: FunctionBody, cond: () => void, body: () => void): void {
  f.block().loop();
  cond();
  f.op(Op.i32Eqz).brIf(1);
  body();
  f.br(0).op(Op.end).op(Op.end);
}

/** i32 local = expression pushed by `value`. */
function assign(f: FunctionBody, local: number, value: () => void): void {
  value();
  f.set(local);
}

// ---- the module ------------------------------------------------------------------------------

interface PointFunctions {
  readonly p2dbl: FunctionBody;
  readonly toP2: FunctionBody;
  readonly toP3: FunctionBody;
  readonly madd: FunctionBody;
  readonly msub: FunctionBody;
  readonly add: FunctionBody;
  readonly sub: FunctionBody;
  readonly toCached: FunctionBody;
  readonly identity: FunctionBody;
  readonly copyWords: FunctionBody;
  readonly zeroWords: FunctionBody;
  readonly dblN: FunctionBody;
  readonly addPrecomp: FunctionBody;
  readonly addCached: FunctionBody;
}

function buildPoints(m: ModuleBuilder, F: FieldFunctions): PointFunctions {
  const r = (o: number) => param(0, o);
  const p = (o: number) => param(1, o);
  const q = (o: number) => param(2, o);

  // (r: p1p1, p: p2) — also doubles a p3, whose first three coordinates are its p2.
  const p2dbl = m.fn('ge_p2_dbl', [I32, I32]);
  {
    const fe = new Fe(p2dbl, F);
    const t0 = m.scratch(FE_BYTES);
    fe.sq(r(X), p(X));
    fe.sq(r(Z), p(Y));
    fe.sq2(r(T), p(Z));
    fe.add(r(Y), p(X), p(Y));
    fe.sq(t0, r(Y));
    fe.add(r(Y), r(Z), r(X));
    fe.sub(r(Z), r(Z), r(X));
    fe.sub(r(X), t0, r(Y));
    fe.sub(r(T), r(T), r(Z));
  }

  // (r: p2 or p3, p: p1p1)
  const toP2 = m.fn('ge_p1p1_to_p2', [I32, I32]);
  const toP3 = m.fn('ge_p1p1_to_p3', [I32, I32]);
  for (const [f, withT] of [
    [toP2, false],
    [toP3, true],
  ] as const) {
    const fe = new Fe(f, F);
    fe.mul(r(X), p(X), p(T));
    fe.mul(r(Y), p(Y), p(Z));
    fe.mul(r(Z), p(Z), p(T));
    if (withT) fe.mul(r(T), p(X), p(Y));
  }

  // (r: p1p1, p: p3, q: precomp (y+x, y−x, 2dxy)) — r = p ± q
  const mixed = (name: string, minus: boolean) => {
    const f = m.fn(name, [I32, I32, I32]);
    const fe = new Fe(f, F);
    const t0 = m.scratch(FE_BYTES);
    fe.add(r(X), p(Y), p(X));
    fe.sub(r(Y), p(Y), p(X));
    fe.mul(r(Z), r(X), q(minus ? 40 : 0));
    fe.mul(r(Y), r(Y), q(minus ? 0 : 40));
    fe.mul(r(T), q(80), p(T));
    fe.add(t0, p(Z), p(Z));
    fe.sub(r(X), r(Z), r(Y));
    fe.add(r(Y), r(Z), r(Y));
    if (minus) {
      fe.sub(r(Z), t0, r(T));
      fe.add(r(T), t0, r(T));
    } else {
      fe.add(r(Z), t0, r(T));
      fe.sub(r(T), t0, r(T));
    }
    return f;
  };
  const madd = mixed('ge_madd', false);
  const msub = mixed('ge_msub', true);

  // (r: p1p1, p: p3, q: cached (Y+X, Y−X, Z, 2dT)) — r = p ± q
  const projective = (name: string, minus: boolean) => {
    const f = m.fn(name, [I32, I32, I32]);
    const fe = new Fe(f, F);
    const t0 = m.scratch(FE_BYTES);
    fe.add(r(X), p(Y), p(X));
    fe.sub(r(Y), p(Y), p(X));
    fe.mul(r(Z), r(X), q(minus ? 40 : 0));
    fe.mul(r(Y), r(Y), q(minus ? 0 : 40));
    fe.mul(r(T), q(120), p(T));
    fe.mul(r(X), p(Z), q(80));
    fe.add(t0, r(X), r(X));
    fe.sub(r(X), r(Z), r(Y));
    fe.add(r(Y), r(Z), r(Y));
    if (minus) {
      fe.sub(r(Z), t0, r(T));
      fe.add(r(T), t0, r(T));
    } else {
      fe.add(r(Z), t0, r(T));
      fe.sub(r(T), t0, r(T));
    }
    return f;
  };
  const add = projective('ge_add', false);
  const sub = projective('ge_sub', true);

  const toCached = m.fn('ge_p3_to_cached', [I32, I32]);
  {
    const fe = new Fe(toCached, F);
    fe.add(r(0), p(Y), p(X));
    fe.sub(r(40), p(Y), p(X));
    fe.copy(r(80), p(Z));
    fe.mul(r(120), p(T), CONST_D2);
  }

  // (dst, src, words): 8-byte words; used for copies and for wiping secrets.
  const copyWords = m.fn('copy_words', [I32, I32, I32]);
  whileLoop(
    copyWords,
    () => copyWords.get(2),
    () => {
      copyWords.get(0).get(1).load64(0).store64(0);
      for (const [local, step] of [
        [0, 8],
        [1, 8],
        [2, -1],
      ] as const) {
        copyWords.get(local).i32Const(step).op(Op.i32Add).set(local);
      }
    },
  );
  const zeroWords = m.fn('zero_words', [I32, I32]);
  whileLoop(
    zeroWords,
    () => zeroWords.get(1),
    () => {
      zeroWords.get(0).i64Const(0n).store64(0);
      zeroWords.get(0).i32Const(8).op(Op.i32Add).set(0);
      zeroWords.get(1).i32Const(1).op(Op.i32Sub).set(1);
    },
  );

  // (p: p3): the neutral element (0, 1, 1, 0)
  const identity = m.fn('ge_identity', [I32]);
  identity
    .get(0)
    .i32Const(P3_BYTES / 8)
    .call(zeroWords);
  for (const o of [Y, Z]) identity.get(0).i32Const(1).mem(Op.i32Store, 2, o);

  // (p: p3, n): p = 2^n·p; n = 0 leaves p alone
  const dblN = m.fn('ge_dbl_n', [I32, I32]);
  {
    const f = dblN;
    const R = m.scratch(P3_BYTES);
    f.get(1).op(Op.i32Eqz).if().op(Op.return).op(Op.end);
    f.block().loop();
    pushAddr(f, R);
    f.get(0).call(p2dbl);
    f.get(1).i32Const(1).op(Op.i32Sub).tee(1).op(Op.i32Eqz).brIf(1);
    f.get(0);
    pushAddr(f, R);
    f.call(toP2).br(0);
    f.op(Op.end).op(Op.end);
    f.get(0);
    pushAddr(f, R);
    f.call(toP3);
  }

  // (h: p3, q, minus): h = h ± q; variable time in `minus` (public data only)
  const accumulate = (name: string, plus: FunctionBody, minus: FunctionBody) => {
    const f = m.fn(name, [I32, I32, I32]);
    const R = m.scratch(P3_BYTES);
    for (const [which, fn] of [
      [true, minus],
      [false, plus],
    ] as const) {
      f.get(2);
      if (!which) f.op(Op.i32Eqz);
      f.if();
      pushAddr(f, R);
      f.get(0).get(1).call(fn);
      f.op(Op.end);
    }
    f.get(0);
    pushAddr(f, R);
    f.call(toP3);
    return f;
  };
  const addPrecomp = accumulate('ge_acc_precomp', madd, msub);
  const addCached = accumulate('ge_acc_cached', add, sub);

  return {
    ...{ p2dbl, toP2, toP3, madd, msub, add, sub, toCached },
    ...{ identity, copyWords, zeroWords, dblN, addPrecomp, addCached },
  };
}

interface RistrettoFunctions {
  readonly sqrtRatio: FunctionBody;
  readonly decode: FunctionBody;
  readonly encode: FunctionBody;
}

function buildRistretto(m: ModuleBuilder, F: FieldFunctions): RistrettoFunctions {
  const fe0 = (f: FunctionBody) => new Fe(f, F);
  /** h = |h| (the non-negative, i.e. even, one of ±h) */
  const abs = (fe: Fe, h: Addr, tmp: Addr) => {
    fe.neg(tmp, h);
    fe.cmov(h, tmp, () => fe.isneg(h));
  };

  // (r, u, v) → was_square: r = CT_ABS(√(u/v)) or CT_ABS(√(i·u/v)) (RFC 9496 §4.2)
  const sqrtRatio = m.fn('sqrt_ratio_m1', [I32, I32, I32], [I32]);
  {
    const f = sqrtRatio;
    const fe = fe0(f);
    const { v3, v7, t, rr, chk, nu, rp } = m.scratchFe('v3', 'v7', 't', 'rr', 'chk', 'nu', 'rp');
    const u = param(1);
    const v = param(2);
    const correct = f.local(I32);
    const flipped = f.local(I32);
    fe.sq(v3, v);
    fe.mul(v3, v3, v);
    fe.sq(v7, v3);
    fe.mul(v7, v7, v);
    fe.mul(t, u, v7);
    fe.pow22523(t, t);
    fe.mul(rr, u, v3);
    fe.mul(rr, rr, t);
    fe.sq(chk, rr);
    fe.mul(chk, chk, v);
    fe.eq(chk, u);
    f.set(correct);
    fe.neg(nu, u);
    fe.eq(chk, nu);
    f.set(flipped);
    fe.mul(t, nu, CONST_SQRT_M1);
    fe.mul(rp, rr, CONST_SQRT_M1);
    fe.cmov(rr, rp, () => {
      f.get(flipped);
      fe.eq(chk, t);
      f.op(Op.i32Or);
    });
    abs(fe, rr, t);
    fe.copy(param(0), rr);
    f.get(correct).get(flipped).op(Op.i32Or);
  }

  // (p: p3, s: 32 bytes) → 1 if s is a valid canonical encoding (then p is its point), else 0
  const decode = m.fn('ristretto_decode', [I32, I32], [I32]);
  {
    const f = decode;
    const fe = fe0(f);
    const { s, bytes, ss, u1, u2, u2sq, v, t, invsq, denx, deny, x, y, xy } = m.scratchFe(
      's',
      'bytes',
      'ss',
      'u1',
      'u2',
      'u2sq',
      'v',
      't',
      'invsq',
      'denx',
      'deny',
      'x',
      'y',
      'xy',
    );
    const ok = f.local(I32);
    fe.frombytes(s, param(1));
    fe.tobytes(bytes, s);
    // Canonical: re-encoding gives the same 32 bytes (so s < p and bit 255 clear).
    for (let k = 0; k < 4; k++) {
      f.i32Const(bytes)
        .load64(8 * k)
        .get(1)
        .mem(Op.i64Load, 0, 8 * k)
        .op(Op.i64Xor);
      if (k > 0) f.op(Op.i64Or);
    }
    f.op(Op.i64Eqz);
    fe.isneg(s);
    f.op(Op.i32Eqz).op(Op.i32And).set(ok);
    fe.sq(ss, s);
    fe.sub(u1, CONST_ONE, ss);
    fe.add(u2, CONST_ONE, ss);
    fe.sq(u2sq, u2);
    fe.sq(t, u1);
    fe.mul(t, CONST_D, t);
    fe.neg(t, t);
    fe.sub(v, t, u2sq);
    fe.carry(v, v);
    fe.mul(t, v, u2sq);
    pushAddr(f, invsq);
    pushAddr(f, CONST_ONE);
    pushAddr(f, t);
    f.call(sqrtRatio).get(ok).op(Op.i32And).set(ok);
    fe.mul(denx, invsq, u2);
    fe.mul(deny, invsq, denx);
    fe.mul(deny, deny, v);
    fe.add(t, s, s);
    fe.mul(x, t, denx);
    abs(fe, x, t);
    fe.mul(y, u1, deny);
    fe.mul(xy, x, y);
    f.get(ok);
    fe.isneg(xy);
    f.op(Op.i32Eqz).op(Op.i32And);
    fe.iszero(y);
    f.op(Op.i32Eqz).op(Op.i32And).set(ok);
    fe.copy(param(0, X), x);
    fe.copy(param(0, Y), y);
    fe.copy(param(0, Z), CONST_ONE);
    fe.copy(param(0, T), xy);
    f.get(ok);
  }

  // (out: 32 bytes, p: p3), constant time (RFC 9496 §4.3.2)
  const encode = m.fn('ristretto_encode', [I32, I32]);
  {
    const f = encode;
    const fe = fe0(f);
    const { t1, t2, u1, u2, invsq, den1, den2, zinv, ix, iy, ench, x, y, den, s } = m.scratchFe(
      't1',
      't2',
      'u1',
      'u2',
      'invsq',
      'den1',
      'den2',
      'zinv',
      'ix',
      'iy',
      'ench',
      'x',
      'y',
      'den',
      's',
    );
    const pt = (o: number) => param(1, o);
    const rotate = f.local(I32);
    fe.add(t1, pt(Z), pt(Y));
    fe.sub(t2, pt(Z), pt(Y));
    fe.mul(u1, t1, t2);
    fe.mul(u2, pt(X), pt(Y));
    fe.sq(t1, u2);
    fe.mul(t1, u1, t1);
    pushAddr(f, invsq);
    pushAddr(f, CONST_ONE);
    pushAddr(f, t1);
    f.call(sqrtRatio).op(Op.drop);
    fe.mul(den1, invsq, u1);
    fe.mul(den2, invsq, u2);
    fe.mul(t1, den1, den2);
    fe.mul(zinv, t1, pt(T));
    fe.mul(ix, pt(X), CONST_SQRT_M1);
    fe.mul(iy, pt(Y), CONST_SQRT_M1);
    fe.mul(ench, den1, CONST_INVSQRT_A_MINUS_D);
    fe.mul(t1, pt(T), zinv);
    fe.isneg(t1);
    f.set(rotate);
    fe.copy(x, pt(X));
    fe.cmov(x, iy, () => f.get(rotate));
    fe.copy(y, pt(Y));
    fe.cmov(y, ix, () => f.get(rotate));
    fe.copy(den, den2);
    fe.cmov(den, ench, () => f.get(rotate));
    fe.mul(t1, x, zinv);
    fe.neg(t2, y);
    fe.cmov(y, t2, () => fe.isneg(t1));
    fe.sub(t1, pt(Z), y);
    fe.mul(s, den, t1);
    abs(fe, s, t1);
    fe.tobytes(param(0), s);
  }
  return { sqrtRatio, decode, encode };
}

/** The module's bytes and the memory layout its caller needs; deterministic for given options. */
export function ristrettoModule(options: RistrettoOptions = DEFAULT_RISTRETTO_OPTIONS): {
  bytes: Uint8Array;
  layout: RistrettoLayout;
} {
  const { layout, base, verifier, once, digitsA, digitsB } = ristrettoLayout(options);
  const m = new ModuleBuilder(SCRATCH_START, SCRATCH_END);
  const F = buildField(m);
  const G = buildPoints(m, F);
  const R = buildRistretto(m, F);

  // (digits, scalar, w, n): n signed digits in [−2^(w−1), 2^(w−1)] of a scalar < 2^253, as i32.
  // Constant time: the loop and every address depend only on w and n.
  const recode = m.fn('scalar_recode', [I32, I32, I32, I32]);
  {
    const f = recode;
    const [digits, scalar, w, n] = [0, 1, 2, 3];
    const i = f.local(I32);
    const carry = f.local(I32);
    const v = f.local(I32);
    const pos = f.local(I32);
    const windowBits = () => {
      assign(f, pos, () => f.get(i).get(w).op(Op.i32Mul));
      f.get(scalar).get(pos).i32Const(3).op(Op.i32ShrU).op(Op.i32Add).mem(Op.i64Load, 0, 0);
      f.get(pos).i32Const(7).op(Op.i32And).op(Op.i64ExtendI32U).op(Op.i64ShrU).op(Op.i32WrapI64);
      f.i32Const(1).get(w).op(Op.i32Shl).i32Const(1).op(Op.i32Sub).op(Op.i32And);
      f.get(carry).op(Op.i32Add).set(v);
    };
    const storeDigit = () => f.get(digits).get(i).i32Const(2).op(Op.i32Shl).op(Op.i32Add).get(v).mem(Op.i32Store, 2, 0);
    whileLoop(
      f,
      () => f.get(i).get(n).i32Const(1).op(Op.i32Sub).op(Op.i32LtS),
      () => {
        windowBits();
        assign(f, carry, () =>
          f.get(v).i32Const(1).get(w).i32Const(1).op(Op.i32Sub).op(Op.i32Shl).op(Op.i32Add).get(w).op(Op.i32ShrS),
        );
        assign(f, v, () => f.get(v).get(carry).get(w).op(Op.i32Shl).op(Op.i32Sub));
        storeDigit();
        assign(f, i, () => f.get(i).i32Const(1).op(Op.i32Add));
      },
    );
    windowBits();
    storeDigit();
  }

  // (t: precomp, row, digit): t = digit·(row entry 1), reading all 8 entries of the row.
  const SIGN_ENTRIES = 8;
  const select = m.fn('ge_select_ct', [I32, I32, I32]);
  {
    const f = select;
    const [t, row, digit] = [0, 1, 2];
    const negative = f.local(I32);
    const magnitude = f.local(I32);
    const mask = f.local(I64);
    const words = Array.from({ length: PRECOMP_BYTES / 8 }, () => f.local(I64));
    f.get(digit).i32Const(31).op(Op.i32ShrU).set(negative);
    f.get(digit).i32Const(0).get(negative).op(Op.i32Sub).get(digit).i32Const(1).op(Op.i32Shl).op(Op.i32And);
    f.op(Op.i32Sub).set(magnitude);
    // The neutral element (y+x, y−x, 2dxy) = (1, 1, 0); limb 0 is the low half of word 0.
    words.forEach((w, k) => f.i64Const(k === 0 || k === 5 ? 1n : 0n).set(w));
    for (let j = 1; j <= SIGN_ENTRIES; j++) {
      // mask = all ones iff magnitude == j, computed as ((magnitude ^ j) − 1) >>> 31
      f.i64Const(0n).get(magnitude).i32Const(j).op(Op.i32Xor).i32Const(1).op(Op.i32Sub).i32Const(31);
      f.op(Op.i32ShrU).op(Op.i64ExtendI32U).op(Op.i64Sub).set(mask);
      words.forEach((w, k) => {
        f.get(w)
          .get(mask)
          .get(w)
          .get(row)
          .load64((j - 1) * PRECOMP_BYTES + 8 * k)
          .op(Op.i64Xor)
          .op(Op.i64And);
        f.op(Op.i64Xor).set(w);
      });
    }
    // −(y+x, y−x, 2dxy) = (y−x, y+x, −2dxy): a masked swap, then a masked negation.
    const swap = f.local(I64);
    f.i64Const(0n).get(negative).op(Op.i64ExtendI32U).op(Op.i64Sub).set(mask);
    for (let k = 0; k < 5; k++) {
      f.get(mask)
        .get(words[k]!)
        .get(words[k + 5]!)
        .op(Op.i64Xor)
        .op(Op.i64And)
        .set(swap);
      f.get(words[k]!).get(swap).op(Op.i64Xor).set(words[k]!);
      f.get(words[k + 5]!)
        .get(swap)
        .op(Op.i64Xor)
        .set(words[k + 5]!);
    }
    words.forEach((w, k) =>
      f
        .get(t)
        .get(w)
        .store64(8 * k),
    );
    const mask32 = f.local(I32);
    const limb = f.local(I32);
    f.i32Const(0).get(negative).op(Op.i32Sub).set(mask32);
    for (let k = 0; k < 10; k++) {
      const off = 2 * FE_BYTES + 4 * k;
      f.get(t).mem(Op.i32Load, 2, off).set(limb);
      f.get(t).get(limb).get(mask32).get(limb).i32Const(0).get(limb).op(Op.i32Sub).op(Op.i32Xor).op(Op.i32And);
      f.op(Op.i32Xor).mem(Op.i32Store, 2, off);
    }
  }

  // (h: p3, digits, table, rowBytes): h = Σ digit_i·16^i·B over 64 radix-16 digits, constant
  // time. Odd digits first, ×16, then even digits: rows are 256^i apart (ref10's layout).
  const baseMul = m.fn(undefined, [I32, I32, I32, I32]);
  {
    const f = baseMul;
    const [h, digits, table, rowBytes] = [0, 1, 2, 3];
    const i = f.local(I32);
    const row = f.local(I32);
    const t = m.scratch(PRECOMP_BYTES);
    const r = m.scratch(P3_BYTES);
    f.get(h).call(G.identity);
    for (const pass of [1, 0]) {
      f.i32Const(pass).set(i);
      f.get(table).set(row);
      whileLoop(
        f,
        () => f.get(i).i32Const(64).op(Op.i32LtS),
        () => {
          pushAddr(f, t);
          f.get(row).get(digits).get(i).i32Const(2).op(Op.i32Shl).op(Op.i32Add).mem(Op.i32Load, 2, 0);
          f.call(select);
          pushAddr(f, r);
          f.get(h);
          pushAddr(f, t);
          f.call(G.madd);
          f.get(h);
          pushAddr(f, r);
          f.call(G.toP3);
          f.get(i).i32Const(2).op(Op.i32Add).set(i);
          f.get(row).get(rowBytes).op(Op.i32Add).set(row);
        },
      );
      if (pass === 1) f.get(h).i32Const(4).call(G.dblN);
    }
    pushAddr(f, t);
    f.i32Const(PRECOMP_BYTES / 8).call(G.zeroWords);
  }

  // (h: p3, digits, n, teeth, w, table, rowBytes, negate): h = ±Σ digit_i·2^(w·i)·P for the
  // point P whose table this is. Variable time: skips zero digits (public scalars only).
  const combVt = m.fn('comb_vartime', [I32, I32, I32, I32, I32, I32, I32, I32]);
  {
    const f = combVt;
    const [h, digits, n, teeth, w, table, rowBytes, negate] = [0, 1, 2, 3, 4, 5, 6, 7];
    const pass = f.local(I32);
    const i = f.local(I32);
    const row = f.local(I32);
    const d = f.local(I32);
    const sign = f.local(I32);
    f.get(h).call(G.identity);
    f.get(teeth).i32Const(1).op(Op.i32Sub).set(pass);
    f.block().loop();
    f.get(pass).set(i);
    f.get(table).set(row);
    whileLoop(
      f,
      () => f.get(i).get(n).op(Op.i32LtS),
      () => {
        f.get(digits).get(i).i32Const(2).op(Op.i32Shl).op(Op.i32Add).mem(Op.i32Load, 2, 0).tee(d);
        f.if();
        f.get(d).i32Const(31).op(Op.i32ShrS).set(sign);
        f.get(h);
        // entry |d| of the row, at row + (|d| − 1)·120
        f.get(row).get(d).get(sign).op(Op.i32Xor).get(sign).op(Op.i32Sub).i32Const(1).op(Op.i32Sub);
        f.i32Const(PRECOMP_BYTES).op(Op.i32Mul).op(Op.i32Add);
        f.get(sign).i32Const(1).op(Op.i32And).get(negate).op(Op.i32Xor);
        f.call(G.addPrecomp);
        f.op(Op.end);
        f.get(i).get(teeth).op(Op.i32Add).set(i);
        f.get(row).get(rowBytes).op(Op.i32Add).set(row);
      },
    );
    f.get(pass).op(Op.i32Eqz).brIf(1);
    f.get(h).get(w).call(G.dblN);
    f.get(pass).i32Const(1).op(Op.i32Sub).set(pass);
    f.br(0);
    f.op(Op.end).op(Op.end);
  }

  // (out: precomp, e: p3, zinv): out = (y+x, y−x, 2dxy) for x = X·zinv, y = Y·zinv, carried.
  const toPrecomp = m.fn(undefined, [I32, I32, I32]);
  {
    const fe = new Fe(toPrecomp, F);
    const { tx, ty, tmp } = m.scratchFe('tx', 'ty', 'tmp');
    fe.mul(tx, param(1, X), param(2));
    fe.mul(ty, param(1, Y), param(2));
    fe.add(tmp, ty, tx);
    fe.carry(param(0, 0), tmp);
    fe.sub(tmp, ty, tx);
    fe.carry(param(0, 40), tmp);
    fe.mul(tmp, tx, ty);
    fe.mul(param(0, 80), tmp, CONST_D2);
  }

  // (table, p: p3, w, teeth, rows): row r holds j·2^(w·teeth·r)·P for j = 1..2^(w−1). Each
  // row is built in extended coordinates, then made affine with one inversion (Montgomery's trick).
  const buildTable = m.fn('build_table', [I32, I32, I32, I32, I32]);
  {
    const f = buildTable;
    const fe = new Fe(f, F);
    const [table, point, w, teeth, rows] = [0, 1, 2, 3, 4];
    const n = f.local(I32);
    const r = f.local(I32);
    const j = f.local(I32);
    const a = f.local(I32);
    const b = f.local(I32);
    const c = f.local(I32);
    const cur = m.scratch(P3_BYTES);
    const cached = m.scratch(CACHED_BYTES);
    const sum = m.scratch(P3_BYTES);
    const zinv = m.scratch(FE_BYTES);
    const acc = m.scratch(FE_BYTES);
    const pointAt = (local: number) =>
      assign(f, local, () => f.get(j).i32Const(P3_BYTES).op(Op.i32Mul).i32Const(BUILD_POINTS).op(Op.i32Add));
    const prefixAt = (local: number, delta: number) =>
      assign(f, local, () =>
        f.get(j).i32Const(delta).op(Op.i32Add).i32Const(FE_BYTES).op(Op.i32Mul).i32Const(BUILD_PREFIX).op(Op.i32Add),
      );
    const copyPoint = (dst: Addr, src: Addr) => {
      pushAddr(f, dst);
      pushAddr(f, src);
      f.i32Const(P3_BYTES / 8).call(G.copyWords);
    };

    f.i32Const(1).get(w).i32Const(1).op(Op.i32Sub).op(Op.i32Shl).set(n);
    copyPoint(cur, param(point));
    whileLoop(
      f,
      () => f.get(r).get(rows).op(Op.i32LtS),
      () => {
        copyPoint(BUILD_POINTS, cur);
        pushAddr(f, cached);
        pushAddr(f, cur);
        f.call(G.toCached);
        f.i32Const(1).set(j);
        whileLoop(
          f,
          () => f.get(j).get(n).op(Op.i32LtS),
          () => {
            pointAt(a);
            pushAddr(f, sum);
            f.get(a).i32Const(P3_BYTES).op(Op.i32Sub);
            pushAddr(f, cached);
            f.call(G.add);
            f.get(a);
            pushAddr(f, sum);
            f.call(G.toP3);
            f.get(j).i32Const(1).op(Op.i32Add).set(j);
          },
        );
        // The next row's base: 2^(w·teeth) times this one's, from its last entry 2^(w−1)·base.
        f.get(n).i32Const(1).op(Op.i32Sub).set(j);
        pointAt(a);
        copyPoint(cur, [a, 0]);
        pushAddr(f, cur);
        f.i32Const(1).get(w).get(teeth).i32Const(1).op(Op.i32Sub).op(Op.i32Mul).op(Op.i32Add).call(G.dblN);

        // prefix_j = Z_0 ··· Z_j
        fe.copy(BUILD_PREFIX, BUILD_POINTS + Z);
        f.i32Const(1).set(j);
        whileLoop(
          f,
          () => f.get(j).get(n).op(Op.i32LtS),
          () => {
            pointAt(a);
            prefixAt(b, 0);
            prefixAt(c, -1);
            fe.mul([b, 0], [c, 0], [a, Z]);
            f.get(j).i32Const(1).op(Op.i32Add).set(j);
          },
        );
        f.get(n).i32Const(1).op(Op.i32Sub).set(j);
        prefixAt(b, 0);
        fe.invert(acc, [b, 0]);
        // Walking back: acc = 1/(Z_0 ··· Z_j), so 1/Z_j = acc·prefix_(j−1).
        whileLoop(
          f,
          () => f.get(j),
          () => {
            pointAt(a);
            prefixAt(c, -1);
            fe.mul(zinv, acc, [c, 0]);
            fe.mul(acc, acc, [a, Z]);
            assign(f, b, () => f.get(table).get(j).i32Const(PRECOMP_BYTES).op(Op.i32Mul).op(Op.i32Add));
            f.get(b).get(a);
            pushAddr(f, zinv);
            f.call(toPrecomp);
            f.get(j).i32Const(1).op(Op.i32Sub).set(j);
          },
        );
        f.get(table);
        pushAddr(f, BUILD_POINTS);
        pushAddr(f, acc);
        f.call(toPrecomp);
        f.get(table).get(n).i32Const(PRECOMP_BYTES).op(Op.i32Mul).op(Op.i32Add).set(table);
        f.get(r).i32Const(1).op(Op.i32Add).set(r);
      },
    );
  }

  const h1 = m.scratch(P3_BYTES);
  const h2 = m.scratch(P3_BYTES);
  const qPoint = m.scratch(P3_BYTES);
  const cachedH2 = m.scratch(CACHED_BYTES);

  const recodeInto = (f: FunctionBody, digits: number, scalar: Addr, c: Comb) => {
    f.i32Const(digits);
    pushAddr(f, scalar);
    f.i32Const(c.window).i32Const(c.digits).call(recode);
  };
  const runComb = (f: FunctionBody, h: number, digits: number, c: Comb, table: Addr, negate: boolean) => {
    f.i32Const(h).i32Const(digits).i32Const(c.digits).i32Const(c.teeth).i32Const(c.window);
    pushAddr(f, table);
    f.i32Const(c.rowBytes)
      .i32Const(negate ? 1 : 0)
      .call(combVt);
  };
  /** h1 += b·B, then enc(h1) to out. */
  const finishCheck = (f: FunctionBody, out: Addr, b: Addr) => {
    recodeInto(f, digitsB, b, base);
    runComb(f, h2, digitsB, base, layout.baseTable, false);
    f.i32Const(cachedH2).i32Const(h2).call(G.toCached);
    f.i32Const(h1).i32Const(cachedH2).i32Const(0).call(G.addCached);
    pushAddr(f, out);
    f.i32Const(h1).call(R.encode);
  };

  const init = m.fn('init', []);
  init.i32Const(layout.baseTable).i32Const(CONST_BASE);
  init.i32Const(base.window).i32Const(base.teeth).i32Const(base.rows).call(buildTable);

  // (out, a) — a: 32-byte scalar below ℓ in a 48-byte zero-padded buffer; both wiped after.
  const baseMulEncode = m.fn('base_mul_encode', [I32, I32]);
  {
    const f = baseMulEncode;
    recodeInto(f, digitsA, param(1), comb(4, 1, 'sign'));
    f.i32Const(h1).i32Const(digitsA).i32Const(layout.baseTable).i32Const(base.rowBytes).call(baseMul);
    f.get(0).i32Const(h1).call(R.encode);
    f.i32Const(digitsA)
      .i32Const(DIGITS_BYTES / 8)
      .call(G.zeroWords);
    f.get(1)
      .i32Const(SCALAR_BUFFER / 8)
      .call(G.zeroWords);
  }

  // (table, q) → 1 if q decodes (and the table of Q is built), else 0
  const prepare = m.fn('prepare', [I32, I32], [I32]);
  {
    const f = prepare;
    f.i32Const(qPoint).get(1).call(R.decode).op(Op.i32Eqz).if().i32Const(0).op(Op.return).op(Op.end);
    f.get(0).i32Const(qPoint).i32Const(verifier.window).i32Const(verifier.teeth).i32Const(verifier.rows);
    f.call(buildTable).i32Const(1);
  }

  // (out, table, b, d): out = enc(b·B − d·Q) where table was built by `prepare` for Q
  const check = m.fn('check', [I32, I32, I32, I32]);
  recodeInto(check, digitsA, param(3), verifier);
  runComb(check, h1, digitsA, verifier, param(1), true);
  finishCheck(check, param(0), param(2));

  // (out, q, b, d) → 0 if q is not a valid encoding, else 1 and out = enc(b·B − d·Q)
  const checkOnce = m.fn('check_once', [I32, I32, I32, I32], [I32]);
  {
    const f = checkOnce;
    const j = f.local(I32);
    const d = f.local(I32);
    const sign = f.local(I32);
    const walker = m.scratch(P3_BYTES);
    f.i32Const(qPoint).get(1).call(R.decode).op(Op.i32Eqz).if().i32Const(0).op(Op.return).op(Op.end);
    // BUILD_POINTS[j − 1] = j·Q in cached form, j = 1..2^(w−1)
    f.i32Const(BUILD_POINTS).i32Const(qPoint).call(G.toCached);
    f.i32Const(walker)
      .i32Const(qPoint)
      .i32Const(P3_BYTES / 8)
      .call(G.copyWords);
    for (let k = 1; k < once.entries; k++) {
      f.i32Const(walker).i32Const(BUILD_POINTS).i32Const(0).call(G.addCached);
      f.i32Const(BUILD_POINTS + k * CACHED_BYTES)
        .i32Const(walker)
        .call(G.toCached);
    }
    recodeInto(f, digitsA, param(3), once);
    f.i32Const(h1).call(G.identity);
    f.i32Const(once.digits - 1).set(j);
    f.block().loop();
    f.i32Const(digitsA).get(j).i32Const(2).op(Op.i32Shl).op(Op.i32Add).mem(Op.i32Load, 2, 0).tee(d);
    f.if();
    f.get(d).i32Const(31).op(Op.i32ShrS).set(sign);
    f.i32Const(h1);
    f.get(d).get(sign).op(Op.i32Xor).get(sign).op(Op.i32Sub).i32Const(1).op(Op.i32Sub);
    f.i32Const(CACHED_BYTES).op(Op.i32Mul).i32Const(BUILD_POINTS).op(Op.i32Add);
    // −d·Q: a positive digit subtracts
    f.get(sign).i32Const(1).op(Op.i32Add).call(G.addCached);
    f.op(Op.end);
    f.get(j).op(Op.i32Eqz).brIf(1);
    f.i32Const(h1).i32Const(once.window).call(G.dblN);
    f.get(j).i32Const(1).op(Op.i32Sub).set(j);
    f.br(0);
    f.op(Op.end).op(Op.end);
    finishCheck(f, param(0), param(2));
    f.i32Const(1);
  }

  const bytes = encodeModule({
    pages: layout.pages,
    memoryName: 'memory',
    functions: m.functions,
    data: [{ offset: 0, bytes: constantsSegment() }],
  });
  return { bytes, layout };
}
