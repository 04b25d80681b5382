/**
 * What the ristretto255 WebAssembly module and its JavaScript side agree on: the memory map, the
 * table geometry, and the options both are made for. ristretto-wasm-module.ts emits the module to
 * this layout and ristretto-wasm.ts drives it; keeping the layout here keeps the emitter out of
 * the runtime (and out of the package, which ships the emitted bytes, lib/crypto/wasm-bytes.ts).
 *
 * Linear memory (fixed size, never grows):
 *   [0, 1024)                constants: 1, d, 2d, √−1, 1/√(a−d), the base point
 *   [1024, SCRATCH_END)      per-function temporaries (see ModuleBuilder.scratch)
 *   [IO_OFFSET, ...)         scalar and byte buffers the caller fills, digit arrays
 *   [BUILD_OFFSET, ...)      table construction workspace (also check_once's window table)
 *   [baseTable, +baseTableBytes)
 *   [slot(i), +slotBytes)    verifierSlots tables of Q, managed by the JavaScript side
 */

export interface RistrettoOptions {
  /**
   * The base table has 32 rows j·256^i·B. With 8, each row holds j = 1..128 (480 KiB) and
   * verification adds one entry per radix-256 digit (32 additions, no doublings); with 4, rows
   * hold j = 1..8 (30 KiB) and verification is a two-pass radix-16 comb (64 additions + 4
   * doublings). Signing always scans the first 8 entries of each row.
   */
  readonly baseWindow: 4 | 8;
  /** Width w of the signed digits of d in a verifier's table of Q (2..8, 253 mod w ≠ 0). */
  readonly verifierWindow: number;
  /** Table rows are 2^(w·teeth) apart; digits are added in `teeth` passes with w doublings between. */
  readonly verifierTeeth: number;
  /** Window width for d·Q in `check_once` (double-and-add over a small table). */
  readonly onceWindow: number;
  /** How many verifier tables fit in wasm memory at once. */
  readonly verifierSlots: number;
}

/**
 * From bench/ristretto.ts (Node 20, µs): a radix-16 base table costs signing 32 instead of 20
 * and verification 25 instead of 20; verifier windows 4/5/6/7 check in 21/20/18/17 and prepare
 * in 0.41/0.49/0.72/1.16 ms with tables of 60/96/160/280 KiB, so 5 balances one-segment
 * streams against long ones; two teeth halve the table but cost 1-2 µs per check; the one-shot
 * window hardly matters (4: 65, 5: 64, 6: 66).
 */
export const DEFAULT_RISTRETTO_OPTIONS: RistrettoOptions = {
  baseWindow: 8,
  verifierWindow: 5,
  verifierTeeth: 1,
  onceWindow: 5,
  verifierSlots: 4,
};

const SCALAR_BITS = 253; // every canonical scalar is below ℓ < 2^253
const PAGE = 65536;
/** A field element in memory: ten 32-bit limbs of 25.5 bits (ristretto-wasm-field.ts). */
export const FE_BYTES = 40;
/** Bytes of an affine table entry (y+x, y−x, 2dxy). */
export const PRECOMP_BYTES = 3 * FE_BYTES;
/** Bytes of a point in extended coordinates (X, Y, Z, T). */
export const P3_BYTES = 4 * FE_BYTES;
const MAX_ENTRIES = 128;

export const SCRATCH_START = 1024;
export const SCRATCH_END = 32768;
const IO_OFFSET = SCRATCH_END;
/** Scalar buffers are 48 bytes: recoding reads up to 8 bytes past the 32-byte scalar. */
export const SCALAR_BUFFER = 48;
export const DIGITS_BYTES = 4 * 256;
const BUILD_OFFSET = IO_OFFSET + 4096;
export const BUILD_POINTS = BUILD_OFFSET;
export const BUILD_PREFIX = BUILD_POINTS + MAX_ENTRIES * P3_BYTES;
const TABLES_OFFSET = 65536;

/** Where the JavaScript side puts inputs and finds outputs, and the table geometry. */
export interface RistrettoLayout {
  readonly pages: number;
  readonly scalarA: number;
  readonly scalarB: number;
  readonly bytesIn: number;
  readonly bytesOut: number;
  readonly baseTable: number;
  readonly baseTableBytes: number;
  readonly slotBytes: number;
  readonly slotCount: number;
  /** Bytes free for the caller's own use except during `build_table`, `prepare` and `check_once`. */
  readonly workspace: number;
  readonly workspaceBytes: number;
  slot(index: number): number;
}

/** A comb's geometry: signed digits of `window` bits, added in `teeth` passes. */
export interface Comb {
  readonly window: number;
  readonly teeth: number;
  readonly digits: number;
  readonly rows: number;
  readonly entries: number;
  readonly rowBytes: number;
}

export function comb(window: number, teeth: number, what: string): Comb {
  if (!Number.isInteger(window) || window < 2 || window > 8 || SCALAR_BITS % window === 0) {
    throw new RangeError(`${what}: window must be 2..8 and not divide ${SCALAR_BITS}, got ${window}`);
  }
  if (!Number.isInteger(teeth) || teeth < 1 || teeth > 8) throw new RangeError(`${what}: teeth must be 1..8`);
  // With 253 mod w ≠ 0 the top digit absorbs the last carry without exceeding 2^(w−1).
  const digits = Math.ceil(SCALAR_BITS / window);
  const entries = 1 << (window - 1);
  const rows = Math.ceil(digits / teeth);
  return { window, teeth, digits, rows, entries, rowBytes: entries * PRECOMP_BYTES };
}

const align = (n: number, to: number) => Math.ceil(n / to) * to;

/** The layout for `options`, with the combs' geometry and the digit arrays the module uses. */
export function ristrettoLayout(options: RistrettoOptions = DEFAULT_RISTRETTO_OPTIONS) {
  const base = options.baseWindow === 8 ? comb(8, 1, 'baseWindow') : comb(4, 2, 'baseWindow');
  if (options.baseWindow !== 8 && options.baseWindow !== 4) throw new RangeError('baseWindow must be 4 or 8');
  const verifier = comb(options.verifierWindow, options.verifierTeeth, 'verifier');
  const once = comb(options.onceWindow, 1, 'onceWindow');
  const slots = options.verifierSlots;
  if (!Number.isInteger(slots) || slots < 1 || slots > 64) throw new RangeError('verifierSlots must be 1..64');
  const baseTable = TABLES_OFFSET;
  const baseTableBytes = base.rows * base.rowBytes;
  const slotBytes = verifier.rows * verifier.rowBytes;
  const slotStride = align(slotBytes, 64);
  const slotsOffset = align(baseTable + baseTableBytes, 64);
  const layout: RistrettoLayout = {
    pages: Math.ceil((slotsOffset + slots * slotStride) / PAGE),
    scalarA: IO_OFFSET,
    scalarB: IO_OFFSET + SCALAR_BUFFER,
    bytesIn: IO_OFFSET + 2 * SCALAR_BUFFER,
    bytesOut: IO_OFFSET + 2 * SCALAR_BUFFER + 32,
    baseTable,
    baseTableBytes,
    slotBytes,
    slotCount: slots,
    workspace: BUILD_OFFSET,
    workspaceBytes: TABLES_OFFSET - BUILD_OFFSET,
    slot(index: number) {
      if (!Number.isInteger(index) || index < 0 || index >= slots) throw new RangeError(`no verifier slot ${index}`);
      return slotsOffset + index * slotStride;
    },
  };
  const digitsA = layout.bytesOut + 32;
  const digitsB = digitsA + DIGITS_BYTES;
  if (digitsB + DIGITS_BYTES > BUILD_OFFSET) throw new Error('IO region overflows');
  return { layout, base, verifier, once, digitsA, digitsB };
}
