import { FE_BYTES } from './ristretto-wasm-layout.js';
import { FunctionBody, I32, I64, Op, type ValType } from './wasm-emit.js';

/**
 * Code generators for arithmetic modulo p = 2^255 - 19 in WebAssembly, in the representation of
 * the ref10 Ed25519 code: ten signed limbs alternating 26 and 25 bits (radix 2^25.5), so every
 * limb product fits an i64 and a multiplication is 100 `i64.mul` — WebAssembly has no 64×64→128
 * multiply, which rules out the 5×51 representation. An element lives in linear memory as ten
 * little-endian i32 limbs (40 bytes); the functions take i32 addresses and may alias freely
 * (all inputs are loaded before anything is stored).
 *
 * Bounds (as in ref10): `mul`, `sq`, `carry`, `frombytes` output "reduced" limbs, |even| ≤ 2^25
 * and |odd| ≤ 2^24 (plus a few units); `add` / `sub` do not carry, and `mul` / `sq` accept sums
 * or differences of up to three reduced elements. Every exit to bytes (`tobytes`, `eq`, `isneg`,
 * `iszero`) carries first, so it accepts those too.
 *
 * Everything here is constant time: no branches or addresses depend on values, and masks are
 * made with shifts rather than comparisons.
 */

export const P = 2n ** 255n - 19n;
const LIMBS = 10;
const BITS = [26, 25, 26, 25, 26, 25, 26, 25, 26, 25] as const;
const START = [0, 26, 51, 77, 102, 128, 153, 179, 204, 230] as const;
const bits = (i: number) => BITS[i]!;

export const mod = (x: bigint, m = P): bigint => ((x % m) + m) % m;

/** The carried (signed) limbs of x mod p, as `carry` would leave them. */
export function toLimbs(x: bigint): number[] {
  let v = mod(x);
  const h: bigint[] = [];
  for (let i = 0; i < LIMBS; i++) {
    h.push(v & ((1n << BigInt(bits(i))) - 1n));
    v >>= BigInt(bits(i));
  }
  for (const i of CARRY_ORDER) {
    const b = BigInt(bits(i));
    const c = (h[i]! + (1n << (b - 1n))) >> b;
    h[i] = h[i]! - (c << b);
    if (i === 9) h[0] = h[0]! + 19n * c;
    else h[i + 1] = h[i + 1]! + c;
  }
  return h.map(Number);
}

/** The value (mod p) of limbs in any range. */
export function fromLimbs(limbs: ArrayLike<number>): bigint {
  let x = 0n;
  for (let i = 0; i < LIMBS; i++) x += BigInt(limbs[i]!) << BigInt(START[i]!);
  return mod(x);
}

/** 40 bytes: the element's limbs as little-endian i32. */
export function limbBytes(x: bigint): Uint8Array {
  const out = new Uint8Array(FE_BYTES);
  const view = new DataView(out.buffer);
  toLimbs(x).forEach((l, i) => view.setInt32(4 * i, l, true));
  return out;
}

/** ref10's carry order: each carry is absorbed before its limb is carried again. */
const CARRY_ORDER = [0, 4, 1, 5, 2, 6, 3, 7, 4, 8, 9, 0] as const;

/** An address operand: an absolute address, or a local (i32) plus a constant offset. */
export type Addr = number | readonly [local: number, offset: number];

export function pushAddr(f: FunctionBody, a: Addr): void {
  if (typeof a === 'number') {
    f.i32Const(a);
  } else {
    f.get(a[0]);
    if (a[1] !== 0) f.i32Const(a[1]).op(Op.i32Add);
  }
}

/** Pushes the dynamic part of an address and returns the static part (a memarg offset). */
function pushBase(f: FunctionBody, a: Addr): number {
  if (typeof a === 'number') {
    f.i32Const(0);
    return a;
  }
  f.get(a[0]);
  return a[1];
}

/**
 * Collects the module's functions and hands out scratch memory: each generated function that
 * needs temporaries gets its own fixed region, so no two functions on one call chain share one.
 */
export class ModuleBuilder {
  readonly functions: { name?: string; body: FunctionBody }[] = [];
  private next: number;

  constructor(
    scratchStart: number,
    private readonly scratchEnd: number,
  ) {
    this.next = scratchStart;
  }

  fn(name: string | undefined, params: readonly ValType[], results: readonly ValType[] = []): FunctionBody {
    const body = new FunctionBody(params, results);
    this.functions.push(name === undefined ? { body } : { name, body });
    return body;
  }

  scratch(bytes: number): number {
    const at = this.next;
    this.next += Math.ceil(bytes / 8) * 8;
    if (this.next > this.scratchEnd) throw new RangeError('scratch region exhausted');
    return at;
  }

  /** One scratch field element per name. */
  scratchFe<K extends string>(...names: K[]): Record<K, number> {
    return Object.fromEntries(names.map((name) => [name, this.scratch(FE_BYTES)])) as Record<K, number>;
  }
}

function loadLimbs(f: FunctionBody, a: Addr): number[] {
  return Array.from({ length: LIMBS }, (_, i) => {
    const local = f.local(I64);
    const off = pushBase(f, a);
    f.mem(Op.i64Load32S, 2, off + 4 * i).set(local);
    return local;
  });
}

function storeLimbs(f: FunctionBody, a: Addr, h: readonly number[]): void {
  h.forEach((local, i) => {
    const off = pushBase(f, a);
    f.get(local).mem(Op.i64Store32, 2, off + 4 * i);
  });
}

/** The rounding carry chain: leaves |even| ≤ 2^25, |odd| ≤ 2^24 (+ small), value unchanged mod p. */
function carryChain(f: FunctionBody, h: readonly number[]): void {
  const c = f.local(I64);
  for (const i of CARRY_ORDER) {
    const b = bits(i);
    f.get(h[i]!)
      .i64Const(1n << BigInt(b - 1))
      .op(Op.i64Add)
      .i64Const(BigInt(b))
      .op(Op.i64ShrS)
      .set(c);
    if (i === 9) f.get(h[0]!).get(c).i64Const(19n).op(Op.i64Mul).op(Op.i64Add).set(h[0]!);
    else
      f.get(h[i + 1]!)
        .get(c)
        .op(Op.i64Add)
        .set(h[i + 1]!);
    f.get(h[i]!).get(c).i64Const(BigInt(b)).op(Op.i64Shl).op(Op.i64Sub).set(h[i]!);
  }
}

/** Emits h = f·g (limb locals in, fresh locals out, not carried). */
function emitMul(f: FunctionBody, F: readonly number[], G: readonly number[]): number[] {
  const scaled = (x: number, k: bigint) => {
    const local = f.local(I64);
    f.get(x).i64Const(k).op(Op.i64Mul).set(local);
    return local;
  };
  const G19 = G.map((g, j) => (j === 0 ? g : scaled(g, 19n)));
  const F2 = F.map((x, i) => (i % 2 === 1 ? scaled(x, 2n) : x));
  return Array.from({ length: LIMBS }, (_, k) => {
    for (let i = 0; i < LIMBS; i++) {
      const j = (k - i + LIMBS) % LIMBS;
      // Two odd limbs sit half a bit apart from their product's limb; wrapping past 2^255 is ×19.
      f.get(i % 2 === 1 && j % 2 === 1 ? F2[i]! : F[i]!)
        .get(i + j >= LIMBS ? G19[j]! : G[j]!)
        .op(Op.i64Mul);
      if (i > 0) f.op(Op.i64Add);
    }
    const h = f.local(I64);
    f.set(h);
    return h;
  });
}

/** Emits h = f² (or 2f²), using the 55 distinct products. Reuses `scratch` locals across calls. */
function emitSquare(f: FunctionBody, F: readonly number[], double: boolean, H: readonly number[]): void {
  const multiples = new Map<string, number>();
  const times = (i: number, k: number): number => {
    if (k === 1) return F[i]!;
    const key = `${i}*${k}`;
    let local = multiples.get(key);
    if (local === undefined) {
      local = f.local(I64);
      multiples.set(key, local);
      f.get(F[i]!).i64Const(BigInt(k)).op(Op.i64Mul).set(local);
    }
    return local;
  };
  const terms: [number, number][][] = Array.from({ length: LIMBS }, () => []);
  for (let i = 0; i < LIMBS; i++) {
    for (let j = i; j < LIMBS; j++) {
      const twos = (i !== j ? 1 : 0) + (i % 2 === 1 && j % 2 === 1 ? 1 : 0);
      const wraps = i + j >= LIMBS;
      const onJ = (wraps ? 19 : 1) * (twos >= 1 ? 2 : 1);
      const onI = twos === 2 ? 2 : 1;
      terms[(i + j) % LIMBS]!.push([times(i, onI), times(j, onJ)]);
    }
  }
  terms.forEach((list, k) => {
    list.forEach(([a, b], n) => {
      f.get(a).get(b).op(Op.i64Mul);
      if (n > 0) f.op(Op.i64Add);
    });
    if (double) f.tee(H[k]!).get(H[k]!).op(Op.i64Add);
    f.set(H[k]!);
  });
}

/** The canonical value (0 ≤ x < p) of carried limbs as four little-endian 64-bit words. */
function emitCanonicalWords(f: FunctionBody, h: readonly number[]): number[] {
  const q = f.local(I64);
  f.get(h[9]!)
    .i64Const(19n)
    .op(Op.i64Mul)
    .i64Const(1n << 24n)
    .op(Op.i64Add)
    .i64Const(25n)
    .op(Op.i64ShrS)
    .set(q);
  for (let i = 0; i < LIMBS; i++) {
    f.get(h[i]!)
      .get(q)
      .op(Op.i64Add)
      .i64Const(BigInt(bits(i)))
      .op(Op.i64ShrS)
      .set(q);
  }
  // q is now ⌊x / p⌋ ∈ {0, 1}; subtract q·p as + 19q and dropping bit 255.
  f.get(h[0]!).get(q).i64Const(19n).op(Op.i64Mul).op(Op.i64Add).set(h[0]!);
  const c = f.local(I64);
  for (let i = 0; i < LIMBS; i++) {
    const b = BigInt(bits(i));
    if (i < 9) {
      f.get(h[i]!).i64Const(b).op(Op.i64ShrS).set(c);
      f.get(h[i + 1]!)
        .get(c)
        .op(Op.i64Add)
        .set(h[i + 1]!);
    }
    f.get(h[i]!)
      .i64Const((1n << b) - 1n)
      .op(Op.i64And)
      .set(h[i]!);
  }
  return [0, 1, 2, 3].map((k) => {
    const w = f.local(I64);
    let first = true;
    for (let i = 0; i < LIMBS; i++) {
      const s = START[i]! - 64 * k;
      if (s >= 64 || s + bits(i) <= 0) continue;
      f.get(h[i]!);
      if (s > 0) f.i64Const(BigInt(s)).op(Op.i64Shl);
      if (s < 0) f.i64Const(BigInt(-s)).op(Op.i64ShrU);
      if (!first) f.op(Op.i64Or);
      first = false;
    }
    f.set(w);
    return w;
  });
}

/** The exported field functions (see the file comment for their contracts). */
export interface FieldFunctions {
  /** (h, f, g): h = f·g */ readonly mul: FunctionBody;
  /** (h, f): h = f² */ readonly sq: FunctionBody;
  /** (h, f): h = 2f² */ readonly sq2: FunctionBody;
  /** (h, f, n): h = f^(2^n), n ≥ 1 */ readonly sqn: FunctionBody;
  /** (h, f, g): h = f + g, not carried */ readonly add: FunctionBody;
  /** (h, f, g): h = f − g, not carried */ readonly sub: FunctionBody;
  /** (h, f): h = −f */ readonly neg: FunctionBody;
  /** (h, f): h = f */ readonly copy: FunctionBody;
  /** (h, f): h = f, carried */ readonly carry: FunctionBody;
  /** (f, g, b): f = b ? g : f, for b ∈ {0, 1} */ readonly cmov: FunctionBody;
  /** (out, f): 32 canonical little-endian bytes */ readonly tobytes: FunctionBody;
  /** (h, s): 32 bytes, bit 255 ignored, any value below 2^255 */ readonly frombytes: FunctionBody;
  /** (f) → i32: whether the canonical value is odd */ readonly isneg: FunctionBody;
  /** (f) → i32 */ readonly iszero: FunctionBody;
  /** (f, g) → i32 */ readonly eq: FunctionBody;
  /** (h, z): h = z^(p−2), 0 for 0 */ readonly invert: FunctionBody;
  /** (h, z): h = z^((p−5)/8) */ readonly pow22523: FunctionBody;
}

/** Typed call helpers for one function body: `fe.mul(h, a, b)` pushes the addresses and calls. */
export class Fe {
  constructor(
    readonly f: FunctionBody,
    readonly fns: FieldFunctions,
  ) {}

  private call(target: FunctionBody, ...args: Addr[]): void {
    for (const a of args) pushAddr(this.f, a);
    this.f.call(target);
  }

  mul(h: Addr, a: Addr, b: Addr): void {
    this.call(this.fns.mul, h, a, b);
  }
  sq(h: Addr, a: Addr): void {
    this.call(this.fns.sq, h, a);
  }
  sq2(h: Addr, a: Addr): void {
    this.call(this.fns.sq2, h, a);
  }
  sqn(h: Addr, a: Addr, n: number): void {
    for (const x of [h, a]) pushAddr(this.f, x);
    this.f.i32Const(n).call(this.fns.sqn);
  }
  add(h: Addr, a: Addr, b: Addr): void {
    this.call(this.fns.add, h, a, b);
  }
  sub(h: Addr, a: Addr, b: Addr): void {
    this.call(this.fns.sub, h, a, b);
  }
  neg(h: Addr, a: Addr): void {
    this.call(this.fns.neg, h, a);
  }
  copy(h: Addr, a: Addr): void {
    this.call(this.fns.copy, h, a);
  }
  carry(h: Addr, a: Addr): void {
    this.call(this.fns.carry, h, a);
  }
  invert(h: Addr, a: Addr): void {
    this.call(this.fns.invert, h, a);
  }
  pow22523(h: Addr, a: Addr): void {
    this.call(this.fns.pow22523, h, a);
  }
  tobytes(out: Addr, a: Addr): void {
    this.call(this.fns.tobytes, out, a);
  }
  frombytes(h: Addr, s: Addr): void {
    this.call(this.fns.frombytes, h, s);
  }
  /** f = cond ? g : f, where cond (0 or 1) is computed by `pushCond`. */
  cmov(f: Addr, g: Addr, pushCond: () => void): void {
    for (const x of [f, g]) pushAddr(this.f, x);
    pushCond();
    this.f.call(this.fns.cmov);
  }
  /** Pushes an i32 0/1. */
  isneg(a: Addr): void {
    this.call(this.fns.isneg, a);
  }
  iszero(a: Addr): void {
    this.call(this.fns.iszero, a);
  }
  eq(a: Addr, b: Addr): void {
    this.call(this.fns.eq, a, b);
  }
}

export function buildField(m: ModuleBuilder): FieldFunctions {
  const A0: Addr = [0, 0];
  const A1: Addr = [1, 0];
  const A2: Addr = [2, 0];

  const mul = m.fn('fe_mul', [I32, I32, I32]);
  {
    const H = emitMul(mul, loadLimbs(mul, A1), loadLimbs(mul, A2));
    carryChain(mul, H);
    storeLimbs(mul, A0, H);
  }

  const square = (name: string, double: boolean) => {
    const f = m.fn(name, [I32, I32]);
    const F = loadLimbs(f, A1);
    const H = F.map(() => f.local(I64));
    emitSquare(f, F, double, H);
    carryChain(f, H);
    storeLimbs(f, A0, H);
    return f;
  };
  const sq = square('fe_sq', false);
  const sq2 = square('fe_sq2', true);

  // Repeated squaring with the limbs in locals throughout (inversions are mostly this).
  const sqn = m.fn('fe_sqn', [I32, I32, I32]);
  {
    const F = loadLimbs(sqn, A1);
    const H = F.map(() => sqn.local(I64));
    sqn.loop();
    emitSquare(sqn, F, false, H);
    carryChain(sqn, H);
    H.forEach((h, i) => sqn.get(h).set(F[i]!));
    sqn.get(2).i32Const(1).op(Op.i32Sub).tee(2).brIf(0);
    sqn.op(Op.end);
    storeLimbs(sqn, A0, F);
  }

  const limbwise = (name: string, arity: 1 | 2, emit: (f: FunctionBody, i: number) => void) => {
    const f = m.fn(name, arity === 2 ? [I32, I32, I32] : [I32, I32]);
    for (let i = 0; i < LIMBS; i++) {
      f.get(0);
      emit(f, i);
      f.mem(Op.i32Store, 2, 4 * i);
    }
    return f;
  };
  const both = (f: FunctionBody, i: number) =>
    f
      .get(1)
      .mem(Op.i32Load, 2, 4 * i)
      .get(2)
      .mem(Op.i32Load, 2, 4 * i);
  const add = limbwise('fe_add', 2, (f, i) => both(f, i).op(Op.i32Add));
  const sub = limbwise('fe_sub', 2, (f, i) => both(f, i).op(Op.i32Sub));
  const neg = limbwise('fe_neg', 1, (f, i) =>
    f
      .i32Const(0)
      .get(1)
      .mem(Op.i32Load, 2, 4 * i)
      .op(Op.i32Sub),
  );
  const copy = limbwise('fe_copy', 1, (f, i) => f.get(1).mem(Op.i32Load, 2, 4 * i));

  const carry = m.fn('fe_carry', [I32, I32]);
  {
    const H = loadLimbs(carry, A1);
    carryChain(carry, H);
    storeLimbs(carry, A0, H);
  }

  const cmov = m.fn('fe_cmov', [I32, I32, I32]);
  {
    const mask = cmov.local(I32);
    cmov.i32Const(0).get(2).op(Op.i32Sub).set(mask);
    for (let i = 0; i < LIMBS; i++) {
      const off = 4 * i;
      cmov.get(0);
      cmov.get(0).mem(Op.i32Load, 2, off);
      cmov.get(mask).get(0).mem(Op.i32Load, 2, off).get(1).mem(Op.i32Load, 2, off).op(Op.i32Xor).op(Op.i32And);
      cmov.op(Op.i32Xor).mem(Op.i32Store, 2, off);
    }
  }

  const canonical = (f: FunctionBody, a: Addr) => {
    const H = loadLimbs(f, a);
    carryChain(f, H);
    return emitCanonicalWords(f, H);
  };

  const tobytes = m.fn('fe_tobytes', [I32, I32]);
  canonical(tobytes, A1).forEach((w, k) =>
    tobytes
      .get(0)
      .get(w)
      .mem(Op.i64Store, 0, 8 * k),
  );

  const frombytes = m.fn('fe_frombytes', [I32, I32]);
  {
    const f = frombytes;
    const W = [0, 1, 2, 3].map((k) => {
      const w = f.local(I64);
      f.get(1)
        .mem(Op.i64Load, 0, 8 * k)
        .set(w);
      return w;
    });
    const H = Array.from({ length: LIMBS }, (_, i) => {
      const s = START[i]!;
      const k = s >> 6;
      const sh = s & 63;
      f.get(W[k]!).i64Const(BigInt(sh)).op(Op.i64ShrU);
      if (sh + bits(i) > 64)
        f.get(W[k + 1]!)
          .i64Const(BigInt(64 - sh))
          .op(Op.i64Shl)
          .op(Op.i64Or);
      const h = f.local(I64);
      f.i64Const((1n << BigInt(bits(i))) - 1n)
        .op(Op.i64And)
        .set(h);
      return h;
    });
    carryChain(f, H);
    storeLimbs(f, A0, H);
  }

  const isneg = m.fn('fe_isneg', [I32], [I32]);
  isneg.get(canonical(isneg, A0)[0]!).op(Op.i32WrapI64).i32Const(1).op(Op.i32And);

  const iszero = m.fn('fe_iszero', [I32], [I32]);
  {
    const W = canonical(iszero, A0);
    iszero.get(W[0]!).get(W[1]!).op(Op.i64Or).get(W[2]!).op(Op.i64Or).get(W[3]!).op(Op.i64Or).op(Op.i64Eqz);
  }

  const eq = m.fn('fe_eq', [I32, I32], [I32]);
  {
    const X = canonical(eq, A0);
    const Y = canonical(eq, A1);
    X.forEach((x, k) => {
      eq.get(x).get(Y[k]!).op(Op.i64Xor);
      if (k > 0) eq.op(Op.i64Or);
    });
    eq.op(Op.i64Eqz);
  }

  const invert = m.fn('fe_invert', [I32, I32]);
  const pow22523 = m.fn('fe_pow22523', [I32, I32]);
  const fns: FieldFunctions = {
    ...{ mul, sq, sq2, sqn, add, sub, neg, copy, carry, cmov },
    ...{ tobytes, frombytes, isneg, iszero, eq, invert, pow22523 },
  };

  // Addition chains of ref10: z^(2^250 − 1) shared, then the two different tails.
  const chain250 = (f: FunctionBody, t: number[], z: Addr) => {
    const fe = new Fe(f, fns);
    const [t0, t1, t2, t3] = t as [number, number, number, number];
    fe.sq(t0, z); // 2
    fe.sqn(t1, t0, 2); // 8
    fe.mul(t1, z, t1); // 9
    fe.mul(t0, t0, t1); // 11
    fe.sq(t2, t0); // 22
    fe.mul(t1, t1, t2); // 2^5 − 1
    fe.sqn(t2, t1, 5);
    fe.mul(t1, t2, t1); // 2^10 − 1
    fe.sqn(t2, t1, 10);
    fe.mul(t2, t2, t1); // 2^20 − 1
    fe.sqn(t3, t2, 20);
    fe.mul(t2, t3, t2); // 2^40 − 1
    fe.sqn(t2, t2, 10);
    fe.mul(t1, t2, t1); // 2^50 − 1
    fe.sqn(t2, t1, 50);
    fe.mul(t2, t2, t1); // 2^100 − 1
    fe.sqn(t3, t2, 100);
    fe.mul(t2, t3, t2); // 2^200 − 1
    fe.sqn(t2, t2, 50);
    fe.mul(t1, t2, t1); // 2^250 − 1
    return fe;
  };
  {
    const t = [0, 1, 2, 3].map(() => m.scratch(FE_BYTES));
    const fe = chain250(invert, t, A1);
    fe.sqn(t[1]!, t[1]!, 5); // 2^255 − 32
    fe.mul(A0, t[1]!, t[0]!); // 2^255 − 21 = p − 2
  }
  {
    const t = [0, 1, 2, 3].map(() => m.scratch(FE_BYTES));
    const fe = chain250(pow22523, t, A1);
    fe.sqn(t[1]!, t[1]!, 2); // 2^252 − 4
    fe.mul(A0, t[1]!, A1); // 2^252 − 3
  }
  return fns;
}
