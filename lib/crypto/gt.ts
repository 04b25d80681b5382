import type { Fp2, Fp6, Fp12 } from '@noble/curves/abstract/tower.js';
import { bls12_381 } from '@noble/curves/bls12-381.js';
import { bytesToNumberBE } from '@noble/curves/utils.js';
import { malformed } from '../errors.js';

/**
 * The pairing target group Gt of BLS12-381 (the order-r subgroup of Fp12*), in the 288-byte
 * compressed form of pg-curve, which noble does not have: the encoding keeps only the
 * w-coefficient c1 of f = c0 + c1·w and recovers c0 from the unitary relation
 * c0² = 1 + v·c1², with a sign bit that says which square root is meant.
 *
 * Also here: Gt exponentiation with a uniform operation sequence (secret exponents), and the
 * fast Gt membership test.
 */

export type { Fp12 } from '@noble/curves/abstract/tower.js';

export const GT_COMPRESSED_BYTES = 288;

const { Fp, Fp2: F2, Fp6: F6, Fp12: F12 } = bls12_381.fields;
const P = Fp.ORDER;
/** The group order r. */
export const R = bls12_381.fields.Fr.ORDER;
/** |x| for the BLS parameter x = -0xd201000000010000. */
const X_ABS = 0xd201000000010000n;
const HALF_P = (P - 1n) >> 1n;

// ---------------------------------------------------------------------------------------------
// "Lexicographically largest", as pg-curve defines it for its sign bits. noble's isOdd is the
// RFC 9380 sgn0 rule, which is a different predicate.

/** x is larger than its negation: x > (p - 1) / 2. */
export const lexFp = (x: bigint): boolean => x > HALF_P;

/** Decided by the imaginary part c1; by c0 only when c1 = 0. */
export const lexFp2 = (x: Fp2): boolean => lexFp(x.c1) || (x.c1 === 0n && lexFp(x.c0));

/** Decided by c2; by c1 when c2 = 0; by c0 when both are 0. */
export const lexFp6 = (x: Fp6): boolean =>
  lexFp2(x.c2) || (F2.is0(x.c2) && lexFp2(x.c1)) || (F2.is0(x.c2) && F2.is0(x.c1) && lexFp2(x.c0));

// ---------------------------------------------------------------------------------------------
// Square roots in Fp6. p^6 = 9 (mod 16), so we use the Atkin-style method for that case: with
// E = (p^6 - 9)/16, a square d and a non-square d', c = 2·d²·x and z = c^E·d, the value
// i = 2·z²·x = c^((p^6-1)/8) is a square root of -1 for exactly one of the two choices of d
// when x is a square, and then a = z·x·(i - 1) satisfies a² = x. We take d = 1 and d' = ξ = u + 1
// (a non-square of Fp2, hence of Fp6, whose degree over Fp2 is odd), so the constants (2·d²)^E
// lie in Fp2 and are cheap to compute.
//
// x^E itself is the expensive part. Writing E in base p, E = Σ e_k·p^k, turns it into
// Π frob_k(x)^(e_k): six 381-bit exponents sharing one chain of squarings instead of one
// 2286-bit chain.

const E = (P ** 6n - 9n) / 16n;

/** Bases frob_k(x) grouped by equal base-p digit of E (digits 0/4 and 1/5 coincide). */
const E_DIGIT_GROUPS: ReadonlyArray<{ digit: bigint; powers: number[] }> = (() => {
  const groups: Array<{ digit: bigint; powers: number[] }> = [];
  let rest = E;
  for (let k = 0; k < 6; k++) {
    const digit = rest % P;
    rest /= P;
    if (digit === 0n) continue;
    const g = groups.find((x) => x.digit === digit);
    if (g) g.powers.push(k);
    else groups.push({ digit, powers: [k] });
  }
  return groups;
})();

/** x^E through the Frobenius decomposition; variable-time in the (public) exponent only. */
function powE(x: Fp6): Fp6 {
  const bases = E_DIGIT_GROUPS.map(({ powers }) =>
    powers.map((k) => F6.frobeniusMap(x, k)).reduce((a, b) => F6.mul(a, b)),
  );
  const tables = bases.map((b) => {
    const t: Fp6[] = [F6.ONE, b];
    for (let i = 2; i < 16; i++) t.push(F6.mul(t[i - 1]!, b));
    return t;
  });
  const windows = Math.ceil(Fp.BITS / 4);
  let acc = F6.ONE;
  for (let w = windows - 1; w >= 0; w--) {
    if (w !== windows - 1) acc = F6.sqr(F6.sqr(F6.sqr(F6.sqr(acc))));
    const shift = BigInt(4 * w);
    for (let j = 0; j < tables.length; j++) {
      const digit = Number((E_DIGIT_GROUPS[j]!.digit >> shift) & 15n);
      if (digit !== 0) acc = F6.mul(acc, tables[j]![digit]!);
    }
  }
  return acc;
}

const XI: Fp2 = F2.NONRESIDUE; // u + 1
let sqrtConstants: { delta1: Fp2; delta2Xi: Fp2 } | undefined;

function getSqrtConstants() {
  if (!sqrtConstants) {
    // Elements of Fp2* have order dividing p² - 1, so their exponent can be reduced first.
    const e = E % (P * P - 1n);
    const two = F2.fromBigTuple([2n, 0n]);
    sqrtConstants = {
      delta1: F2.pow(two, e),
      delta2Xi: F2.mul(F2.pow(F2.mul(two, F2.sqr(XI)), e), XI),
    };
  }
  return sqrtConstants;
}

/** A square root of x in Fp6, or undefined when x is not a square. Which root is unspecified. */
export function sqrtFp6(x: Fp6): Fp6 | undefined {
  if (F6.is0(x)) return x;
  const { delta1, delta2Xi } = getSqrtConstants();
  const t = powE(x);
  for (const factor of [delta1, delta2Xi]) {
    const z = F6.mulByFp2(t, factor);
    const i = F6.mul(F6.mul(F6.sqr(z), x), 2n);
    const a = F6.mul(F6.mul(z, x), F6.sub(i, F6.ONE));
    if (F6.eql(F6.sqr(a), x)) return a;
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Membership. f is in Gt iff f is in the cyclotomic subgroup (f^(p^4 - p^2 + 1) = 1, checked
// with Frobenius maps) and f^p = f^x. The second test works because p = x (mod r) and
// gcd(p - x, p^4 - p^2 + 1) = r for BLS12-381 (Scott, eprint 2021/1130); gt.test.ts
// re-derives both facts and compares the test with f^r = 1. About eight times cheaper than
// computing f^r.

export function isGtElement(f: Fp12): boolean {
  if (F12.is0(f)) return false;
  const cyclotomic = F12.eql(F12.mul(F12.frobeniusMap(f, 4), f), F12.frobeniusMap(f, 2));
  if (!cyclotomic) return false;
  // f^x = conj(f^|x|) because inversion is conjugation in the cyclotomic subgroup.
  return F12.eql(F12.frobeniusMap(f, 1), F12.conjugate(F12._cyclotomicExp(f, X_ABS)));
}

// ---------------------------------------------------------------------------------------------
// Encoding

/** pg-curve's 288-byte compressed form of a Gt element. */
export function compressGt(f: Fp12): Uint8Array {
  const out = F6.toBytes(f.c1);
  out[0]! |= 0x80;
  if (lexFp6(f.c0)) out[0]! |= 0x40;
  return out;
}

function readFp(bytes: Uint8Array, offset: number): bigint {
  const v = bytesToNumberBE(bytes.subarray(offset, offset + Fp.BYTES));
  if (v >= P) throw malformed('Gt element: coordinate is not below the field modulus');
  return v;
}

/**
 * Inverse of compressGt. Throws a FormatError (MALFORMED) when the compression bit is clear,
 * a coordinate is not canonical, 1 + v·c1² has no square root, or (with checkSubgroup, the
 * default) the element is not in Gt. Without checkSubgroup this accepts what pg-curve's
 * from_compressed_unchecked accepts (the variant ibe 0.3.0 uses for master public keys).
 */
export function decompressGt(bytes: Uint8Array, opts: { checkSubgroup?: boolean } = {}): Fp12 {
  if (bytes.length !== GT_COMPRESSED_BYTES) {
    throw malformed(`Gt element: expected ${GT_COMPRESSED_BYTES} bytes, got ${bytes.length}`);
  }
  const flags = bytes[0]!;
  if ((flags & 0x80) === 0) throw malformed('Gt element: compression flag is not set');
  const c1Bytes = bytes.slice();
  c1Bytes[0]! &= 0x3f;
  const c: bigint[] = [];
  for (let i = 0; i < 6; i++) c.push(readFp(c1Bytes, i * Fp.BYTES));
  const c1 = F6.fromBigSix(c as [bigint, bigint, bigint, bigint, bigint, bigint]);
  // c0² - v·c1² = 1 for unitary f.
  const root = sqrtFp6(F6.add(F6.ONE, F6.mulByNonresidue(F6.sqr(c1))));
  if (!root) throw malformed('Gt element: not the compression of a unitary element');
  const c0 = lexFp6(root) === ((flags & 0x40) !== 0) ? root : F6.neg(root);
  const f = F12.create({ c0, c1 });
  if ((opts.checkSubgroup ?? true) && !isGtElement(f)) throw malformed('Gt element: not in the order-r subgroup');
  return f;
}

// ---------------------------------------------------------------------------------------------
// Exponentiation. For f in Gt, f^p = f^x, so with X = |x|: f^(X^i) is a Frobenius map of f,
// conjugated for odd i. Writing k = k0 + k1·X + k2·X² + k3·X³ (each below 2^64, since
// r < X^4) gives f^k = Π g_i^(k_i), one 64-step chain of cyclotomic squarings for all four.

/** Precomputed data for raising one fixed element of Gt to many exponents. */
export class GtPowBase {
  /** table[m] = product of g_i over the bits i set in m. */
  private readonly table: Fp12[];

  /** `base` must be in Gt (the decomposition relies on f^p = f^x). */
  constructor(readonly base: Fp12) {
    const g = [
      base,
      F12.conjugate(F12.frobeniusMap(base, 1)),
      F12.frobeniusMap(base, 2),
      F12.conjugate(F12.frobeniusMap(base, 3)),
    ];
    const table: Fp12[] = [F12.ONE];
    for (let m = 1; m < 16; m++) {
      const low = 31 - Math.clz32(m & -m);
      table.push(m === 1 << low ? g[low]! : F12.mul(table[m & (m - 1)]!, g[low]!));
    }
    this.table = table;
  }

  /**
   * base^k for 0 <= k < r. Every call performs the same sequence of field operations whatever
   * k is (one cyclotomic squaring and one multiplication per step, table reads by full scan),
   * so k may be secret, within what BigInt arithmetic allows.
   */
  pow(k: bigint): Fp12 {
    const { table } = this;
    let acc = F12.ONE;
    for (const m of this.digits(k)) {
      acc = F12._cyclotomicSquare(acc);
      let sel = table[0]!;
      for (let i = 1; i < 16; i++) sel = i === m ? table[i]! : sel;
      acc = F12.mul(acc, sel);
    }
    return acc;
  }

  /** The table entries, for another backend (bls-wasm.ts) that runs the same steps. */
  get entries(): readonly Fp12[] {
    return this.table;
  }

  /**
   * The table index of each of pow's 64 steps, most significant first: k in base |x| (k < r <
   * |x|^4), bit j of step i's index is bit 63 - i of digit j.
   */
  digits(k: bigint): Uint8Array {
    if (k < 0n || k >= R) throw new RangeError('Gt exponent out of range');
    const d = [k % X_ABS, (k / X_ABS) % X_ABS, (k / X_ABS / X_ABS) % X_ABS, k / X_ABS / X_ABS / X_ABS];
    const out = new Uint8Array(64);
    for (let bit = 63n, i = 0; bit >= 0n; bit--, i++) {
      out[i] = Number(
        ((d[0]! >> bit) & 1n) |
          (((d[1]! >> bit) & 1n) << 1n) |
          (((d[2]! >> bit) & 1n) << 2n) |
          (((d[3]! >> bit) & 1n) << 3n),
      );
    }
    return out;
  }
}

let generator: GtPowBase | undefined;

/** e(g1, g2), the generator pg-curve hard-codes, with exponentiation tables. */
export function gtGenerator(): GtPowBase {
  generator ??= new GtPowBase(bls12_381.pairing(bls12_381.G1.Point.BASE, bls12_381.G2.Point.BASE));
  return generator;
}

export const gtEquals = (a: Fp12, b: Fp12): boolean => F12.eql(a, b);
export const GT_ONE: Fp12 = F12.ONE;
