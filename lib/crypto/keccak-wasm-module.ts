import {
  absorbExport,
  MEMORY_EXPORT,
  MEMORY_PAGES,
  PERMUTE_EXPORT,
  RATE_LANES,
  RC_OFFSET,
  STATE_OFFSET,
} from './keccak-wasm-layout.js';
import { encodeModule, FunctionBody, I32, I64, Op } from './wasm-emit.js';

/**
 * Generates the Keccak-f[1600] WebAssembly module (FIPS 202). Each exported sponge function
 * absorbs many full blocks per call with the 25 lanes held in locals, so a 256 KiB update costs
 * a few calls into wasm rather than one per 168-byte block.
 *
 * The memory map and export names are keccak-wasm-layout.ts, shared with keccak-wasm.ts.
 */

const ROUNDS = 24;
const lane = (x: number, y: number) => (x % 5) + 5 * (y % 5);

/** Round constants from the rc(t) LFSR of FIPS 202 §3.2.5 (x^8 + x^6 + x^5 + x^4 + 1). */
export function roundConstants(): bigint[] {
  const out: bigint[] = [];
  let r = 1;
  for (let i = 0; i < ROUNDS; i++) {
    let rc = 0n;
    for (let j = 0; j < 7; j++) {
      if (r & 1) rc |= 1n << BigInt((1 << j) - 1);
      r = r & 0x80 ? ((r << 1) ^ 0x71) & 0xff : r << 1;
    }
    out.push(rc);
  }
  return out;
}

/** ρ offsets, walking (x, y) → (y, 2x + 3y) from (1, 0) as in FIPS 202 §3.2.2. */
export function rhoOffsets(): number[] {
  const out = new Array<number>(25).fill(0);
  let x = 1;
  let y = 0;
  for (let t = 0; t < 24; t++) {
    out[lane(x, y)] = (((t + 1) * (t + 2)) / 2) % 64;
    [x, y] = [y, (2 * x + 3 * y) % 5];
  }
  return out;
}

/**
 * Lane complementing (the "Keccak implementation overview" note): if some lanes are stored
 * inverted, χ's `a ^ (~b & c)` can be computed with AND/OR on the stored values and far fewer
 * NOTs, while θ, ρ-π and ι run unchanged. This set needs 6 NOTs per round instead of 25: the
 * fewest of all 2^25 masks under `chiPlan`'s cost model, by an offline exhaustive search.
 * In V8 it is worth about 10%.
 */
export const COMPLEMENTED_LANES: readonly number[] = [
  lane(1, 0),
  lane(2, 1),
  lane(3, 1),
  lane(4, 2),
  lane(2, 3),
  lane(2, 4),
];

export interface GeneratorOptions {
  /** Rounds emitted per loop iteration (a divisor of 24); 24 unrolls the permutation fully. */
  readonly unroll: number;
  /** Lane indices (x + 5y) kept inverted inside the permutation; any set is correct. */
  readonly complementedLanes: readonly number[];
}

/**
 * From bench/shake.ts and bench/shake-browser.ts: one round per loop iteration is the fastest
 * in Node 20's V8 (~730 MB/s against 530-670 for 2-4 rounds) and level with 2 or 4 in
 * Chromium 156 (~690 MB/s); unrolling all 24 rounds is 30-50% slower in both.
 */
export const DEFAULT_OPTIONS: GeneratorOptions = { unroll: 1, complementedLanes: COMPLEMENTED_LANES };

/** How one χ output is computed from stored (possibly inverted) lanes. */
export interface ChiStep {
  /** out = [~]b[x] ^ ([~]b[x+1] OP [~]b[x+2]) */
  readonly invertOut: boolean;
  readonly invert1: boolean;
  readonly invert2: boolean;
  readonly or: boolean;
}

/**
 * For stored-inversion mask `mask` between rounds, picks for every χ output the cheapest
 * AND/OR form that is correct bit for bit, minimising NOTs per plane (a lane inverted for two
 * outputs is inverted once). On stored values θ inverts every lane of column x when the mask
 * parities of columns x-1 and x+1 differ, and ρ-π moves the mask with the lanes; both are
 * followed here.
 */
export function chiPlan(mask: readonly boolean[]): { steps: ChiStep[]; nots: number } {
  const parity = [0, 1, 2, 3, 4].map((x) => [0, 1, 2, 3, 4].filter((y) => mask[lane(x, y)]).length % 2);
  const afterTheta = mask.map((m, i) => m !== (parity[(i + 4) % 5] !== parity[(i + 1) % 5]));
  const chiIn = new Array<boolean>(25).fill(false);
  for (let y = 0; y < 5; y++) {
    for (let x = 0; x < 5; x++) chiIn[lane(y, 2 * x + 3 * y)] = afterTheta[lane(x, y)]!;
  }
  const forms = (i0: number, i1: number, i2: number, out: number): ChiStep[] => {
    const found: ChiStep[] = [];
    for (let k = 0; k < 16; k++) {
      const step = { invertOut: (k & 1) !== 0, invert1: (k & 2) !== 0, invert2: (k & 4) !== 0, or: (k & 8) !== 0 };
      let ok = true;
      for (let v = 0; v < 8 && ok; v++) {
        const [b0, b1, b2] = [v & 1, (v >> 1) & 1, (v >> 2) & 1];
        const s0 = b0 ^ +chiIn[i0]!;
        const s1 = b1 ^ +chiIn[i1]! ^ +step.invert1;
        const s2 = b2 ^ +chiIn[i2]! ^ +step.invert2;
        const got = s0 ^ +step.invertOut ^ (step.or ? s1 | s2 : s1 & s2);
        ok = got === (b0 ^ ((1 - b1) & b2) ^ +mask[out]!);
      }
      if (ok) found.push(step);
    }
    return found;
  };
  const steps: ChiStep[] = [];
  let nots = 0;
  for (let y = 0; y < 5; y++) {
    const options = [0, 1, 2, 3, 4].map((x) => forms(lane(x, y), lane(x + 1, y), lane(x + 2, y), lane(x, y)));
    let best: { cost: number; pick: ChiStep[] } = { cost: Infinity, pick: [] };
    const search = (x: number, pick: ChiStep[]) => {
      if (x === 5) {
        const inverted = new Set<number>();
        pick.forEach((s, i) => {
          if (s.invert1) inverted.add((i + 1) % 5);
          if (s.invert2) inverted.add((i + 2) % 5);
        });
        const cost = inverted.size + pick.filter((s) => s.invertOut).length;
        if (cost < best.cost) best = { cost, pick: [...pick] };
        return;
      }
      for (const s of options[x]!) search(x + 1, [...pick, s]);
    };
    search(0, []);
    steps.push(...best.pick);
    nots += best.cost;
  }
  return { steps, nots };
}

/**
 * `(in: i32, blocks: i32) -> ()`: for each of `blocks` blocks at `in`, XORs `rateLanes` lanes
 * into the state at STATE_OFFSET and applies Keccak-f[1600]. With rateLanes = 0 and blocks = 1
 * it is the bare permutation, used for squeezing. `blocks` must be at least 1.
 */
function spongeFunction(rateLanes: number, options: GeneratorOptions): FunctionBody {
  const { unroll } = options;
  if (!Number.isInteger(unroll) || unroll < 1 || ROUNDS % unroll !== 0) {
    throw new RangeError(`unroll must divide ${ROUNDS}, got ${unroll}`);
  }
  const f = new FunctionBody([I32, I32]);
  const input = 0;
  const blocks = 1;
  const A = Array.from({ length: 25 }, () => f.local(I64));
  const B = Array.from({ length: 25 }, () => f.local(I64));
  const C = Array.from({ length: 5 }, () => f.local(I64));
  const D = Array.from({ length: 5 }, () => f.local(I64));
  const round = f.local(I32);
  const mask = new Array<boolean>(25).fill(false);
  for (const i of options.complementedLanes) {
    if (!Number.isInteger(i) || i < 0 || i >= 25) throw new RangeError(`not a lane index: ${i}`);
    mask[i] = true;
  }
  const plan = chiPlan(mask).steps;
  const N = Array.from({ length: 25 }, () => f.local(I64)); // inverted copies of B lanes
  const rho = rhoOffsets();
  const rc = roundConstants();

  const at = (i: number) => A[i]!;
  const bt = (i: number) => B[i]!;

  const emitRound = (pushRoundConstant: () => void) => {
    // θ
    for (let x = 0; x < 5; x++) {
      f.get(at(lane(x, 0)));
      for (let y = 1; y < 5; y++) f.get(at(lane(x, y))).op(Op.i64Xor);
      f.set(C[x]!);
    }
    for (let x = 0; x < 5; x++) {
      f.get(C[(x + 4) % 5]!)
        .get(C[(x + 1) % 5]!)
        .i64Const(1n)
        .op(Op.i64Rotl)
        .op(Op.i64Xor)
        .set(D[x]!);
    }
    // ρ and π: B[y, 2x + 3y] = rot(A[x, y] ^ D[x], r[x, y])
    for (let y = 0; y < 5; y++) {
      for (let x = 0; x < 5; x++) {
        f.get(at(lane(x, y)))
          .get(D[x]!)
          .op(Op.i64Xor);
        const r = rho[lane(x, y)]!;
        if (r !== 0) f.i64Const(BigInt(r)).op(Op.i64Rotl);
        f.set(bt(lane(y, 2 * x + 3 * y)));
      }
    }
    // χ, with each lane inverted at most once per plane
    for (let y = 0; y < 5; y++) {
      const inverted = new Set<number>();
      for (let x = 0; x < 5; x++) {
        const step = plan[lane(x, y)]!;
        if (step.invert1) inverted.add(lane(x + 1, y));
        if (step.invert2) inverted.add(lane(x + 2, y));
      }
      for (const i of inverted) f.get(bt(i)).i64Const(-1n).op(Op.i64Xor).set(N[i]!);
      for (let x = 0; x < 5; x++) {
        const step = plan[lane(x, y)]!;
        f.get(bt(lane(x, y)));
        f.get(step.invert1 ? N[lane(x + 1, y)]! : bt(lane(x + 1, y)));
        f.get(step.invert2 ? N[lane(x + 2, y)]! : bt(lane(x + 2, y)));
        f.op(step.or ? Op.i64Or : Op.i64And).op(Op.i64Xor);
        if (step.invertOut) f.i64Const(-1n).op(Op.i64Xor);
        f.set(at(lane(x, y)));
      }
    }
    // ι
    f.get(at(0));
    pushRoundConstant();
    f.op(Op.i64Xor).set(at(0));
  };

  // Inverting on entry and exit keeps the stored state standard; absorbing commutes with it.
  for (let i = 0; i < 25; i++) {
    f.i32Const(0).load64(STATE_OFFSET + 8 * i);
    if (mask[i]) f.i64Const(-1n).op(Op.i64Xor);
    f.set(at(i));
  }

  f.loop();
  for (let i = 0; i < rateLanes; i++)
    f.get(at(i))
      .get(input)
      .load64(8 * i)
      .op(Op.i64Xor)
      .set(at(i));
  if (unroll === ROUNDS) {
    for (let r = 0; r < ROUNDS; r++) emitRound(() => f.i64Const(rc[r]!));
  } else {
    f.i32Const(0).set(round);
    f.loop();
    for (let u = 0; u < unroll; u++) emitRound(() => f.get(round).load64(RC_OFFSET + 8 * u));
    f.get(round)
      .i32Const(8 * unroll)
      .op(Op.i32Add)
      .tee(round)
      .i32Const(8 * ROUNDS)
      .op(Op.i32Ne)
      .brIf(0);
    f.op(Op.end);
  }
  f.get(input)
    .i32Const(8 * rateLanes)
    .op(Op.i32Add)
    .set(input);
  f.get(blocks).i32Const(1).op(Op.i32Sub).tee(blocks).brIf(0);
  f.op(Op.end);

  for (let i = 0; i < 25; i++) {
    f.i32Const(0).get(at(i));
    if (mask[i]) f.i64Const(-1n).op(Op.i64Xor);
    f.store64(STATE_OFFSET + 8 * i);
  }
  return f;
}

/** The module's bytes; deterministic for given options. */
export function keccakModuleBytes(options: GeneratorOptions = DEFAULT_OPTIONS): Uint8Array {
  const rcBytes = new Uint8Array(8 * ROUNDS);
  const view = new DataView(rcBytes.buffer);
  roundConstants().forEach((rc, i) => view.setBigUint64(8 * i, rc, true));
  return encodeModule({
    pages: MEMORY_PAGES,
    memoryName: MEMORY_EXPORT,
    functions: [
      ...RATE_LANES.map((lanes) => ({ name: absorbExport(lanes), body: spongeFunction(lanes, options) })),
      { name: PERMUTE_EXPORT, body: spongeFunction(0, options) },
    ],
    data: [{ offset: RC_OFFSET, bytes: rcBytes }],
  });
}
