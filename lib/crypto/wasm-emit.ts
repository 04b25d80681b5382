/**
 * A tiny WebAssembly (1.0 binary format) writer: the handful of sections and opcodes the
 * Keccak module needs. The module is generated from TypeScript at load time, so the repository
 * carries no binary and no build step.
 */

export const I32 = 0x7f;
export const I64 = 0x7e;
export type ValType = typeof I32 | typeof I64;

/** Opcodes used by the generator (WebAssembly spec §5.4). */
export const Op = {
  block: 0x02,
  loop: 0x03,
  end: 0x0b,
  br: 0x0c,
  brIf: 0x0d,
  localGet: 0x20,
  localSet: 0x21,
  localTee: 0x22,
  i64Load: 0x29,
  i64Store: 0x37,
  i32Const: 0x41,
  i64Const: 0x42,
  i32Eqz: 0x45,
  i32Ne: 0x47,
  i32Add: 0x6a,
  i32Sub: 0x6b,
  i64And: 0x83,
  i64Or: 0x84,
  i64Xor: 0x85,
  i64Rotl: 0x89,
} as const;

const EMPTY_BLOCK = 0x40;

export function pushU32(out: number[], value: number): void {
  if (!Number.isInteger(value) || value < 0 || value > 0xffff_ffff) throw new RangeError(`not a u32: ${value}`);
  let n = value;
  do {
    const b = n & 0x7f;
    n = Math.floor(n / 128);
    out.push(n === 0 ? b : b | 0x80);
  } while (n !== 0);
}

/** Signed LEB128 of a 64-bit two's-complement value (also used for i32 immediates). */
export function pushS64(out: number[], value: bigint): void {
  let n = BigInt.asIntN(64, value);
  for (;;) {
    const b = Number(n & 0x7fn);
    n >>= 7n;
    const signBitClear = (b & 0x40) === 0;
    if ((n === 0n && signBitClear) || (n === -1n && !signBitClear)) {
      out.push(b);
      return;
    }
    out.push(b | 0x80);
  }
}

/** One function: its signature, its locals and its instruction bytes. */
export class FunctionBody {
  private readonly code: number[] = [];
  private readonly locals: ValType[] = [];

  constructor(
    readonly params: readonly ValType[],
    readonly results: readonly ValType[] = [],
  ) {}

  /** Declares a local and returns its index (parameters come first). */
  local(type: ValType): number {
    this.locals.push(type);
    return this.params.length + this.locals.length - 1;
  }

  get(index: number): this {
    this.code.push(Op.localGet);
    pushU32(this.code, index);
    return this;
  }

  set(index: number): this {
    this.code.push(Op.localSet);
    pushU32(this.code, index);
    return this;
  }

  tee(index: number): this {
    this.code.push(Op.localTee);
    pushU32(this.code, index);
    return this;
  }

  i32Const(value: number): this {
    this.code.push(Op.i32Const);
    pushS64(this.code, BigInt(value | 0));
    return this;
  }

  i64Const(value: bigint): this {
    this.code.push(Op.i64Const);
    pushS64(this.code, value);
    return this;
  }

  /** i64.load with natural alignment hint (8 bytes) and a constant offset. */
  load64(offset: number): this {
    this.code.push(Op.i64Load, 3);
    pushU32(this.code, offset);
    return this;
  }

  store64(offset: number): this {
    this.code.push(Op.i64Store, 3);
    pushU32(this.code, offset);
    return this;
  }

  block(): this {
    this.code.push(Op.block, EMPTY_BLOCK);
    return this;
  }

  loop(): this {
    this.code.push(Op.loop, EMPTY_BLOCK);
    return this;
  }

  brIf(depth: number): this {
    this.code.push(Op.brIf);
    pushU32(this.code, depth);
    return this;
  }

  /** Any instruction without immediates (arithmetic, `end`). */
  op(code: number): this {
    this.code.push(code);
    return this;
  }

  /** The code-section entry: size, local declarations (run-length grouped), body, end. */
  encode(): number[] {
    const groups: [number, ValType][] = [];
    for (const t of this.locals) {
      const last = groups[groups.length - 1];
      if (last && last[1] === t) last[0]++;
      else groups.push([1, t]);
    }
    const body: number[] = [];
    pushU32(body, groups.length);
    for (const [count, type] of groups) {
      pushU32(body, count);
      body.push(type);
    }
    append(body, this.code);
    body.push(Op.end);
    const out: number[] = [];
    pushU32(out, body.length);
    append(out, body);
    return out;
  }
}

export interface ModuleSpec {
  /** Fixed linear memory size in 64 KiB pages (minimum = maximum: it never grows). */
  readonly pages: number;
  /** Exported under this name. */
  readonly memoryName: string;
  readonly functions: readonly { readonly name: string; readonly body: FunctionBody }[];
  /** Active data segments copied into memory at instantiation. */
  readonly data: readonly { readonly offset: number; readonly bytes: Uint8Array }[];
}

/** Appends without spreading: code sections are too long for argument lists. */
function append(out: number[], items: ArrayLike<number>): void {
  for (let i = 0; i < items.length; i++) out.push(items[i]!);
}

function pushName(out: number[], name: string): void {
  const bytes = new TextEncoder().encode(name);
  pushU32(out, bytes.length);
  append(out, bytes);
}

function pushSection(out: number[], id: number, content: number[]): void {
  out.push(id);
  pushU32(out, content.length);
  append(out, content);
}

export function encodeModule(spec: ModuleSpec): Uint8Array {
  const out = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
  const fns = spec.functions;

  // One type per function keeps indices trivial; the module has only a few functions.
  const types: number[] = [];
  pushU32(types, fns.length);
  for (const { body } of fns) {
    types.push(0x60);
    pushU32(types, body.params.length);
    append(types, body.params);
    pushU32(types, body.results.length);
    append(types, body.results);
  }
  pushSection(out, 1, types);

  const funcs: number[] = [];
  pushU32(funcs, fns.length);
  fns.forEach((_, i) => pushU32(funcs, i));
  pushSection(out, 3, funcs);

  const memory: number[] = [1, 0x01];
  pushU32(memory, spec.pages);
  pushU32(memory, spec.pages);
  pushSection(out, 5, memory);

  const exports: number[] = [];
  pushU32(exports, fns.length + 1);
  fns.forEach(({ name }, i) => {
    pushName(exports, name);
    exports.push(0x00);
    pushU32(exports, i);
  });
  pushName(exports, spec.memoryName);
  exports.push(0x02);
  pushU32(exports, 0);
  pushSection(out, 7, exports);

  const code: number[] = [];
  pushU32(code, fns.length);
  for (const { body } of fns) append(code, body.encode());
  pushSection(out, 10, code);

  if (spec.data.length > 0) {
    const data: number[] = [];
    pushU32(data, spec.data.length);
    for (const seg of spec.data) {
      data.push(0x00, Op.i32Const);
      pushS64(data, BigInt(seg.offset));
      data.push(Op.end);
      pushU32(data, seg.bytes.length);
      append(data, seg.bytes);
    }
    pushSection(out, 11, data);
  }

  return Uint8Array.from(out);
}
