import { ErrorCode, InputError, invalidKey } from '../errors.js';
import { ristrettoLayout, type RistrettoLayout } from './ristretto-wasm-layout.js';
import { ristrettoWasmBytes } from './wasm-bytes.js';

/**
 * ristretto255 on WebAssembly for GG signatures: the per-segment elliptic-curve work of signing
 * (enc(a·B) for a secret nonce a) and of verifying (b·B − d·Q = ga for a fixed signer point
 * Q = gr + c·PK). About 20 µs each, against ~240 µs for @noble/curves in Node 20 and ~80 µs in
 * Chromium 156 (bench/ristretto.ts, bench/ristretto-browser.ts). The module is generated at load
 * time (ristretto-wasm-module.ts), so nothing binary is committed and no build step exists.
 *
 * Where the tables live. The base-point table (32 rows of j·256^i·B, 480 KiB) is built once per
 * instance, inside wasm (~2 ms). A verifier's table of Q (96 KiB) is owned by its JavaScript
 * object, and wasm memory has a fixed number of slots (4) that cache the most recently used
 * ones: `check` on a verifier whose table is still in a slot runs directly; otherwise the least
 * recently used slot is overwritten with a copy of the verifier's table (~1.5 µs). So wasm
 * memory (960 KiB) never grows, a dropped verifier is reclaimed by the garbage collector like
 * any object, and interleaving more streams than slots costs a copy per check, nothing more.
 *
 * JavaScript is single-threaded and wasm calls are synchronous, so no two calls ever share the
 * buffers. Each worker (realm) compiles its own instance.
 */

export interface RistrettoVerifier {
  /** The 32-byte encoding of Q the verifier was prepared for. */
  readonly q: Uint8Array;
  /**
   * Whether b·B − d·Q is the point encoded by `ga`. False (never an exception) for a scalar
   * that is not 32 canonical bytes (< ℓ) and for a `ga` that is not a valid canonical encoding.
   * Variable time: for public inputs only.
   */
  check(b: Uint8Array, d: Uint8Array, ga: Uint8Array): boolean;
}

export interface RistrettoWasm {
  /**
   * enc(a·B) for a 32-byte little-endian scalar a < ℓ (0 gives the identity's encoding).
   * Constant time in a: a fixed sequence of operations and table reads. Throws INVALID_INPUT
   * for anything but 32 bytes encoding a value below ℓ.
   */
  baseMulEncode(scalar: Uint8Array): Uint8Array;
  /**
   * Decodes Q and precomputes its table (~0.5 ms), for many `check`s against the same Q.
   * Throws INVALID_INPUT unless q is 32 bytes and INVALID_KEY if they do not encode a point.
   */
  prepareVerifier(q: Uint8Array): RistrettoVerifier;
  /**
   * `prepareVerifier(q).check(b, d, ga)` without the table (~65 µs): for a Q used only once or
   * a few times, e.g. a one-segment message. False for an invalid q as well.
   */
  checkOnce(q: Uint8Array, b: Uint8Array, d: Uint8Array, ga: Uint8Array): boolean;
}

interface Exports {
  readonly memory: WebAssembly.Memory;
  readonly init: () => void;
  readonly base_mul_encode: (out: number, scalar: number) => void;
  readonly prepare: (table: number, q: number) => number;
  readonly check: (out: number, table: number, b: number, d: number) => void;
  readonly check_once: (out: number, q: number, b: number, d: number) => number;
}

/** ℓ = 2^252 + 27742317777372353535851937790883648493, little-endian. */
const L_BYTES = (() => {
  const out = new Uint8Array(32);
  let l = 2n ** 252n + 27742317777372353535851937790883648493n;
  for (let i = 0; i < 32; i++, l >>= 8n) out[i] = Number(l & 0xffn);
  return out;
})();

const is32 = (x: unknown): x is Uint8Array => x instanceof Uint8Array && x.length === 32;

/** s < ℓ, variable time (public scalars). */
function isCanonicalScalar(s: Uint8Array): boolean {
  for (let i = 31; i >= 0; i--) {
    if (s[i] !== L_BYTES[i]) return s[i]! < L_BYTES[i]!;
  }
  return false;
}

/** s < ℓ without branching on s: the borrow out of s − ℓ. */
function isCanonicalScalarCt(s: Uint8Array): boolean {
  let borrow = 0;
  for (let i = 0; i < 32; i++) borrow = (s[i]! - L_BYTES[i]! - borrow) >>> 31;
  return borrow === 1;
}

const invalidInput = (what: string) => new InputError(ErrorCode.INVALID_INPUT, what);

class Engine {
  /** Fixed-size memory: the view stays valid because the module cannot grow it. */
  readonly mem: Uint8Array;
  private readonly owner: number[];
  private readonly lastUse: number[];
  private clock = 0;
  private ids = 0;

  constructor(
    readonly wasm: Exports,
    readonly layout: RistrettoLayout,
  ) {
    this.mem = new Uint8Array(wasm.memory.buffer);
    this.owner = new Array<number>(layout.slotCount).fill(0);
    this.lastUse = new Array<number>(layout.slotCount).fill(0);
  }

  newId(): number {
    return ++this.ids;
  }

  /** The slot to overwrite: a free one, else the least recently used. */
  private victim(): number {
    let best = 0;
    for (let i = 1; i < this.owner.length; i++) {
      if (this.lastUse[i]! < this.lastUse[best]!) best = i;
    }
    return best;
  }

  private claim(slot: number, id: number): number {
    this.owner[slot] = id;
    this.lastUse[slot] = ++this.clock;
    return this.layout.slot(slot);
  }

  /** Builds Q's table in a slot and returns a copy, or undefined if q does not decode. */
  build(q: Uint8Array, id: number): { table: Uint8Array; slot: number } | undefined {
    const { mem, wasm, layout } = this;
    const slot = this.victim();
    const at = this.claim(slot, 0);
    mem.set(q, layout.bytesIn);
    if (wasm.prepare(at, layout.bytesIn) !== 1) return undefined;
    this.owner[slot] = id;
    return { table: mem.slice(at, at + layout.slotBytes), slot };
  }

  /** The address of the verifier's table in wasm memory, copying it into a slot if needed. */
  tableOf(id: number, hint: number, table: Uint8Array): { at: number; slot: number } {
    if (this.owner[hint] === id) return { at: this.claim(hint, id), slot: hint };
    const slot = this.victim();
    const at = this.claim(slot, id);
    this.mem.set(table, at);
    return { at, slot };
  }

  /** enc(b·B − d·Q) = ga for the table at `table`; the inputs are already validated. */
  check(table: number, b: Uint8Array, d: Uint8Array, ga: Uint8Array): boolean {
    const { mem, layout } = this;
    mem.set(b, layout.scalarA);
    mem.set(d, layout.scalarB);
    this.wasm.check(layout.bytesOut, table, layout.scalarA, layout.scalarB);
    return this.outputEquals(ga);
  }

  /** The same for an encoded Q without a table; false if q does not decode. */
  checkOnce(q: Uint8Array, b: Uint8Array, d: Uint8Array, ga: Uint8Array): boolean {
    const { mem, layout } = this;
    mem.set(q, layout.bytesIn);
    mem.set(b, layout.scalarA);
    mem.set(d, layout.scalarB);
    const decoded = this.wasm.check_once(layout.bytesOut, layout.bytesIn, layout.scalarA, layout.scalarB);
    return decoded === 1 && this.outputEquals(ga);
  }

  /** Comparing encodings also rejects every invalid ga: encode only ever writes canonical ones. */
  private outputEquals(ga: Uint8Array): boolean {
    const { mem, layout } = this;
    let diff = 0;
    for (let i = 0; i < 32; i++) diff |= mem[layout.bytesOut + i]! ^ ga[i]!;
    return diff === 0;
  }
}

class Verifier implements RistrettoVerifier {
  constructor(
    private readonly engine: Engine,
    private readonly id: number,
    private readonly table: Uint8Array,
    private slot: number,
    readonly q: Uint8Array,
  ) {}

  check(b: Uint8Array, d: Uint8Array, ga: Uint8Array): boolean {
    if (!is32(b) || !is32(d) || !is32(ga) || !isCanonicalScalar(b) || !isCanonicalScalar(d)) return false;
    const { at, slot } = this.engine.tableOf(this.id, this.slot, this.table);
    this.slot = slot;
    return this.engine.check(at, b, d, ga);
  }
}

function bind(engine: Engine): RistrettoWasm {
  const { mem, wasm, layout } = engine;
  return {
    baseMulEncode(scalar) {
      if (!is32(scalar)) throw invalidInput('scalar must be 32 bytes');
      if (!isCanonicalScalarCt(scalar)) throw invalidInput('scalar is not below the group order');
      mem.set(scalar, layout.scalarA);
      wasm.base_mul_encode(layout.bytesOut, layout.scalarA);
      return mem.slice(layout.bytesOut, layout.bytesOut + 32);
    },

    prepareVerifier(q) {
      if (!is32(q)) throw invalidInput('Q must be 32 bytes');
      const id = engine.newId();
      const built = engine.build(q, id);
      if (!built) throw invalidKey('Q is not a valid ristretto255 encoding');
      return new Verifier(engine, id, built.table, built.slot, q.slice());
    },

    checkOnce(q, b, d, ga) {
      if (!is32(q) || !is32(b) || !is32(d) || !is32(ga) || !isCanonicalScalar(b) || !isCanonicalScalar(d)) {
        return false;
      }
      return engine.checkOnce(q, b, d, ga);
    },
  };
}

/**
 * Compiles and initialises a fresh instance (builds the base-point table): by default of the
 * library's module; tests pass variants from ristrettoModule(options). Always asynchronous:
 * browsers refuse synchronous compilation of large modules on the main thread. Rejects where
 * WebAssembly is unavailable.
 */
export async function instantiateRistrettoWasm(module?: {
  bytes: Uint8Array;
  layout: RistrettoLayout;
}): Promise<RistrettoWasm> {
  if (typeof WebAssembly !== 'object' || typeof WebAssembly.instantiate !== 'function') {
    throw new Error('WebAssembly is not available in this environment');
  }
  const { bytes, layout } = module ?? { bytes: await ristrettoWasmBytes(), layout: ristrettoLayout().layout };
  const { instance } = await WebAssembly.instantiate(bytes as Uint8Array<ArrayBuffer>, {});
  const wasm = instance.exports as unknown as Exports;
  wasm.init();
  return bind(new Engine(wasm, layout));
}

let shared: Promise<RistrettoWasm | undefined> | undefined;

/**
 * The realm's shared instance, compiled on first use; undefined where WebAssembly is missing or
 * refuses the module (callers then use @noble/curves). Never rejects.
 */
export function loadRistrettoWasm(): Promise<RistrettoWasm | undefined> {
  shared ??= instantiateRistrettoWasm().catch(() => undefined);
  return shared;
}
