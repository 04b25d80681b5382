/**
 * What the BLS12-381 WebAssembly module and its JavaScript side agree on: how a base field element
 * sits in memory (Montgomery form, bls-wasm-field.ts), the memory map and the sizes of its tables,
 * and the curve constants both use. bls-wasm-module.ts emits the module to this layout and
 * bls-wasm.ts drives it; keeping the layout here keeps the emitter out of the runtime (and out of
 * the package, which ships the emitted bytes, lib/crypto/wasm-bytes.ts).
 *
 * Linear memory (fixed size):
 *   [0, 4096)             constants (one, R², Frobenius coefficients, curve constants)
 *   [4096, SCRATCH_END)   per-function temporaries
 *   [IO, ...)             inputs and outputs, see BlsLayout
 */

export const P = BigInt(
  '0x1a0111ea397fe69a4b1ba7b6434bacd764774b84f38512bf6730d2a0f6b0f6241eabfffeb153ffffb9feffffffffaaab',
);
export const FP_BYTES = 48;
export const FP2_BYTES = 96;
/** The Montgomery radix R = 2^384 mod p: an element x sits in memory as x·R mod p. */
export const R_MONT = (1n << 384n) % P;

export const modP = (x: bigint): bigint => ((x % P) + P) % P;

/** 48 bytes: x·R mod p as little-endian 32-bit limbs (how an element sits in wasm memory). */
export function fpBytes(x: bigint): Uint8Array {
  const out = new Uint8Array(FP_BYTES);
  let v = (modP(x) * R_MONT) % P;
  for (let i = 0; i < FP_BYTES; i++, v >>= 8n) out[i] = Number(v & 0xffn);
  return out;
}

/** The value of an element in wasm memory (inverse of fpBytes). */
export function fpValue(bytes: Uint8Array, offset = 0): bigint {
  let v = 0n;
  for (let i = FP_BYTES - 1; i >= 0; i--) v = (v << 8n) | BigInt(bytes[offset + i]!);
  rInverse ??= modPow(R_MONT, P - 2n);
  return (v * rInverse) % P;
}

let rInverse: bigint | undefined;

export function modPow(b: bigint, e: bigint, m = P): bigint {
  let r = 1n;
  let x = ((b % m) + m) % m;
  for (let k = e; k > 0n; k >>= 1n) {
    if (k & 1n) r = (r * x) % m;
    x = (x * x) % m;
  }
  return r;
}

export const FP6_BYTES = 3 * FP2_BYTES;
export const FP12_BYTES = 2 * FP6_BYTES;
export const LINE_BYTES = 3 * FP2_BYTES;
const PAGE = 65536;
export const SCRATCH_START = 4096;
export const SCRATCH_END = 4 * PAGE;
const IO = SCRATCH_END;

/** |x| of BLS12-381; x itself is negative. */
export const BLS_X = 0xd201000000010000n;

/** noble's NAF of |x| (marker bit dropped), most significant digit first. */
export const ATE_NAF: readonly number[] = (() => {
  const res: number[] = [];
  for (let a = BLS_X; a > 1n; a >>= 1n) {
    if ((a & 1n) === 0n) res.unshift(0);
    else if ((a & 3n) === 3n) {
      res.unshift(-1);
      a += 1n;
    } else res.unshift(1);
  }
  return res;
})();

/** Lines per G2 point: one per doubling, one more per non-zero NAF digit. */
export const LINES_PER_POINT = ATE_NAF.length + ATE_NAF.filter((d) => d !== 0).length;
export const MAX_PAIRS = 6;

export interface BlsLayout {
  readonly pages: number;
  /** Fp12 result of miller / final_exp (576 bytes). */
  readonly f: number;
  /** Second Fp12 buffer. */
  readonly g: number;
  /** Input: plain little-endian limbs of x.c0 ‖ x.c1 for g2_decompress. */
  readonly xIn: number;
  /** Affine G2 point x ‖ y (Montgomery form), out of g2_decompress. */
  readonly q: number;
  /** G1 points (x ‖ y Montgomery form, 96 bytes each) for miller. */
  readonly points: number;
  /** Line coefficients, LINES_PER_POINT × 288 bytes per point. */
  readonly lines: number;
  readonly linesBytes: number;
  /** General purpose buffer for conversions (1024 bytes). */
  readonly buf: number;
  /** A table for g1_msm (up to 64 projective G1 points) or gt_pow (16 Fp12 elements). */
  readonly table: number;
  /** One table index per step of g1_msm (128) or gt_pow (64). */
  readonly digits: number;
}

/** Entries of a joint G1 table: two bases (P and φ(P)) per scalar, up to three scalars. */
export const G1_TABLE_MAX = 64;
export const G1_PROJECTIVE_BYTES = 3 * FP_BYTES;
export const G1_MSM_STEPS = 128;
export const GT_TABLE_ENTRIES = 16;
export const GT_POW_STEPS = 64;
const TABLE_BYTES = Math.max(G1_TABLE_MAX * G1_PROJECTIVE_BYTES, GT_TABLE_ENTRIES * FP12_BYTES);

export function blsLayout(): BlsLayout {
  const f = IO;
  const g = f + FP12_BYTES;
  const xIn = g + FP12_BYTES;
  const q = xIn + FP2_BYTES;
  const points = q + 2 * FP2_BYTES;
  const buf = points + MAX_PAIRS * 2 * FP_BYTES;
  const lines = buf + 1024;
  const linesBytes = LINES_PER_POINT * LINE_BYTES;
  const table = lines + MAX_PAIRS * linesBytes;
  const digits = table + TABLE_BYTES;
  const end = digits + G1_MSM_STEPS;
  return { pages: Math.ceil(end / PAGE), f, g, xIn, q, points, lines, linesBytes, buf, table, digits };
}

/** β of G1's endomorphism φ(x, y) = (β·x, −y), which acts as λ = x² (cgwkv.ts, bls-wasm.ts). */
export const G1_BETA = BigInt('0x5f19672fdf76ce51ba69c6076a0f77eaddb3a93be6f89688de17d813620a00022e01fffffffefffe');
