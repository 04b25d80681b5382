import { ErrorCode, PostGuardError } from '../errors.js';
import {
  absorbExport,
  MEMORY_EXPORT,
  PERMUTE_EXPORT,
  RATE_LANES,
  STATE_BYTES,
  STATE_OFFSET,
  WINDOW_BYTES,
  WINDOW_OFFSET,
  type RateLanes,
} from './keccak-wasm-layout.js';
import { keccakWasmBytes } from './wasm-bytes.js';
import type { Xof, XofFactory } from './xof.js';

/**
 * Keccak sponges (SHAKE128, SHAKE256, SHA3-256, SHA3-512) on a WebAssembly Keccak-f[1600].
 *
 * Where the state lives: each sponge object keeps its own 200-byte state and partial block in
 * ordinary JavaScript memory. The single wasm instance has one working state slot and an input
 * window; an update that completes at least one block copies the object's state into the slot,
 * absorbs every whole block inside wasm (one call per window, ~256 KiB), and copies the state
 * back. So any number of sponges can be alive at once, `clone()` is two small array copies,
 * and an abandoned sponge is reclaimed by the garbage collector like any object: nothing in
 * wasm memory belongs to it between calls. The price is 2 × 200 bytes copied per such update,
 * which is noise next to absorbing even one block. Updates smaller than the remaining block
 * room never enter wasm at all.
 *
 * JavaScript is single-threaded and wasm calls are synchronous, so no two sponges can ever use
 * the slot at once. Each worker (realm) compiles its own instance.
 */

interface Exports {
  readonly memory: WebAssembly.Memory;
  readonly absorb: Readonly<Record<RateLanes, (input: number, blocks: number) => void>>;
  readonly permute: (input: number, blocks: number) => void;
}

class Engine {
  /** Fixed-size memory: the view stays valid because the module cannot grow it. */
  readonly mem: Uint8Array;

  constructor(readonly wasm: Exports) {
    this.mem = new Uint8Array(wasm.memory.buffer);
  }
}

const SHAKE_SUFFIX = 0x1f;
const SHA3_SUFFIX = 0x06;

class KeccakSponge implements Xof {
  private finished = false;

  constructor(
    private readonly engine: Engine,
    private readonly lanes: RateLanes,
    private readonly suffix: number,
    private readonly state = new Uint8Array(STATE_BYTES),
    private readonly pending = new Uint8Array(lanes * 8),
    private pendingLength = 0,
  ) {}

  update(data: Uint8Array): Xof {
    this.assertLive();
    const rate = this.pending.length;
    const have = this.pendingLength;
    const n = data.length;
    if (have + n < rate) {
      this.pending.set(data, have);
      this.pendingLength = have + n;
      return this;
    }

    const { mem, wasm } = this.engine;
    const absorb = wasm.absorb[this.lanes];
    const windowBlocks = Math.floor(WINDOW_BYTES / rate);
    mem.set(this.state, STATE_OFFSET);
    // The first window starts with the buffered bytes, so they and the data form whole blocks.
    if (have > 0) mem.set(this.pending.subarray(0, have), WINDOW_OFFSET);
    let head = have;
    let pos = 0;
    for (;;) {
      const blocks = Math.min(Math.floor((head + n - pos) / rate), windowBlocks);
      if (blocks === 0) break;
      const take = blocks * rate - head;
      mem.set(data.subarray(pos, pos + take), WINDOW_OFFSET + head);
      absorb(WINDOW_OFFSET, blocks);
      pos += take;
      head = 0;
    }
    this.state.set(mem.subarray(STATE_OFFSET, STATE_OFFSET + STATE_BYTES));
    this.pending.set(data.subarray(pos), 0);
    this.pendingLength = n - pos;
    return this;
  }

  clone(): Xof {
    this.assertLive();
    return new KeccakSponge(
      this.engine,
      this.lanes,
      this.suffix,
      this.state.slice(),
      this.pending.slice(),
      this.pendingLength,
    );
  }

  digest(length: number): Uint8Array {
    this.assertLive();
    if (!Number.isSafeInteger(length) || length < 0) {
      throw new RangeError(`output length must be a non-negative integer, got ${length}`);
    }
    this.finished = true;
    const out = new Uint8Array(length);
    if (length === 0) return out;

    const { mem, wasm } = this.engine;
    const rate = this.pending.length;
    const have = this.pendingLength;
    mem.set(this.state, STATE_OFFSET);
    // pad10*1 after the domain bits; when they share the last byte the two ORs combine.
    mem.set(this.pending.subarray(0, have), WINDOW_OFFSET);
    mem.fill(0, WINDOW_OFFSET + have, WINDOW_OFFSET + rate);
    mem[WINDOW_OFFSET + have] = this.suffix;
    mem[WINDOW_OFFSET + rate - 1]! |= 0x80;
    wasm.absorb[this.lanes](WINDOW_OFFSET, 1);
    for (let off = 0; ;) {
      const take = Math.min(rate, length - off);
      out.set(mem.subarray(STATE_OFFSET, STATE_OFFSET + take), off);
      off += take;
      if (off === length) break;
      wasm.permute(0, 1);
    }
    // The state is a function of the (possibly secret) input; a finished sponge keeps none of it.
    this.state.fill(0);
    this.pending.fill(0);
    mem.fill(0, STATE_OFFSET, STATE_OFFSET + STATE_BYTES);
    return out;
  }

  private assertLive(): void {
    if (this.finished) {
      throw new PostGuardError(ErrorCode.INVALID_STATE, 'hash used after digest()');
    }
  }
}

export interface KeccakWasm {
  readonly createShake128: XofFactory;
  readonly createShake256: XofFactory;
  sha3_256(data: Uint8Array): Uint8Array;
  sha3_512(data: Uint8Array): Uint8Array;
}

function bind(engine: Engine): KeccakWasm {
  return {
    createShake128: () => new KeccakSponge(engine, 21, SHAKE_SUFFIX),
    createShake256: () => new KeccakSponge(engine, 17, SHAKE_SUFFIX),
    sha3_256: (data) => new KeccakSponge(engine, 17, SHA3_SUFFIX).update(data).digest(32),
    sha3_512: (data) => new KeccakSponge(engine, 9, SHA3_SUFFIX).update(data).digest(64),
  };
}

/**
 * Compiles a fresh instance of `bytes` (by default the library's module; tests pass variants from
 * keccakModuleBytes). Always asynchronous: browsers refuse synchronous compilation of large
 * modules on the main thread. Rejects where WebAssembly is unavailable.
 */
export async function instantiateKeccakWasm(bytes?: Uint8Array): Promise<KeccakWasm> {
  if (typeof WebAssembly !== 'object' || typeof WebAssembly.instantiate !== 'function') {
    throw new Error('WebAssembly is not available in this environment');
  }
  const { instance } = await WebAssembly.instantiate(
    (bytes ?? (await keccakWasmBytes())) as Uint8Array<ArrayBuffer>,
    {},
  );
  const e = instance.exports;
  const fn = (name: string) => e[name] as (input: number, blocks: number) => void;
  const absorb = Object.fromEntries(RATE_LANES.map((l) => [l, fn(absorbExport(l))])) as Exports['absorb'];
  return bind(new Engine({ memory: e[MEMORY_EXPORT] as WebAssembly.Memory, absorb, permute: fn(PERMUTE_EXPORT) }));
}

let shared: Promise<KeccakWasm> | undefined;

/** The realm's shared instance, compiled on first use. A failed compile stays failed. */
export function loadKeccakWasm(): Promise<KeccakWasm> {
  shared ??= instantiateKeccakWasm();
  return shared;
}
