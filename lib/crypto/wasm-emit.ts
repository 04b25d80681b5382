/**
 * A tiny WebAssembly (1.0 binary format) writer: the sections and opcodes our generated modules
 * (Keccak, ristretto255) need. Modules are generated from TypeScript at load time, so the
 * repository carries no binary and no build step.
 */

export const I32 = 0x7f;
export const I64 = 0x7e;
export type ValType = typeof I32 | typeof I64;

/** Opcodes used by the generators (WebAssembly spec §5.4). */
export const Op = {
  unreachable: 0x00,
  block: 0x02,
  loop: 0x03,
  if: 0x04,
  else: 0x05,
  end: 0x0b,
  br: 0x0c,
  brIf: 0x0d,
  return: 0x0f,
  call: 0x10,
  drop: 0x1a,
  select: 0x1b,
  localGet: 0x20,
  localSet: 0x21,
  localTee: 0x22,
  i32Load: 0x28,
  i64Load: 0x29,
  i32Load8U: 0x2d,
  i64Load32S: 0x34,
  i32Store: 0x36,
  i64Store: 0x37,
  i32Store8: 0x3a,
  i64Store32: 0x3e,
  i32Const: 0x41,
  i64Const: 0x42,
  i32Eqz: 0x45,
  i32Eq: 0x46,
  i32Ne: 0x47,
  i32LtS: 0x48,
  i32LtU: 0x49,
  i32GtS: 0x4a,
  i32GeS: 0x4e,
  i64Eqz: 0x50,
  i32Add: 0x6a,
  i32Sub: 0x6b,
  i32Mul: 0x6c,
  i32DivU: 0x6e,
  i32And: 0x71,
  i32Or: 0x72,
  i32Xor: 0x73,
  i32Shl: 0x74,
  i32ShrS: 0x75,
  i32ShrU: 0x76,
  i64Add: 0x7c,
  i64Sub: 0x7d,
  i64Mul: 0x7e,
  i64And: 0x83,
  i64Or: 0x84,
  i64Xor: 0x85,
  i64Shl: 0x86,
  i64ShrS: 0x87,
  i64ShrU: 0x88,
  i64Rotl: 0x89,
  i32WrapI64: 0xa7,
  i64ExtendI32S: 0xac,
  i64ExtendI32U: 0xad,
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
  /** `call` sites: the callee's index is only known once the module is laid out. */
  private readonly calls: { at: number; target: FunctionBody }[] = [];

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

  /** A memory access: `align` is log2 of the alignment hint, `offset` a constant added to the address. */
  mem(opcode: number, align: number, offset: number): this {
    this.code.push(opcode, align);
    pushU32(this.code, offset);
    return this;
  }

  /** i64.load with natural alignment hint (8 bytes) and a constant offset. */
  load64(offset: number): this {
    return this.mem(Op.i64Load, 3, offset);
  }

  store64(offset: number): this {
    return this.mem(Op.i64Store, 3, offset);
  }

  block(): this {
    this.code.push(Op.block, EMPTY_BLOCK);
    return this;
  }

  loop(): this {
    this.code.push(Op.loop, EMPTY_BLOCK);
    return this;
  }

  /** `if` without a result; close it with `op(Op.end)` (optionally after `op(Op.else)`). */
  if(): this {
    this.code.push(Op.if, EMPTY_BLOCK);
    return this;
  }

  br(depth: number): this {
    this.code.push(Op.br);
    pushU32(this.code, depth);
    return this;
  }

  brIf(depth: number): this {
    this.code.push(Op.brIf);
    pushU32(this.code, depth);
    return this;
  }

  /** Calls another function of the same module (resolved to its index by `encodeModule`). */
  call(target: FunctionBody): this {
    this.code.push(Op.call);
    this.calls.push({ at: this.code.length, target });
    return this;
  }

  /** Any instruction without immediates (arithmetic, `end`). */
  op(code: number): this {
    this.code.push(code);
    return this;
  }

  /** The code-section entry: size, local declarations (run-length grouped), body, end. */
  encode(indexOf: (target: FunctionBody) => number = unresolved): number[] {
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
    let from = 0;
    for (const { at, target } of this.calls) {
      append(body, this.code, from, at);
      pushU32(body, indexOf(target));
      from = at;
    }
    append(body, this.code, from, this.code.length);
    body.push(Op.end);
    const out: number[] = [];
    pushU32(out, body.length);
    append(out, body);
    return out;
  }
}

function unresolved(): number {
  throw new Error('a function with calls can only be encoded as part of a module');
}

export interface ModuleSpec {
  /** Fixed linear memory size in 64 KiB pages (minimum = maximum: it never grows). */
  readonly pages: number;
  /** Exported under this name. */
  readonly memoryName: string;
  /** In index order. Functions without a name are internal (callable, not exported). */
  readonly functions: readonly { readonly name?: string; readonly body: FunctionBody }[];
  /** Active data segments copied into memory at instantiation. */
  readonly data: readonly { readonly offset: number; readonly bytes: Uint8Array }[];
}

/** Appends without spreading: code sections are too long for argument lists. */
function append(out: number[], items: ArrayLike<number>, from = 0, to = items.length): void {
  for (let i = from; i < to; i++) out.push(items[i]!);
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
  const index = new Map<FunctionBody, number>();
  fns.forEach(({ body }, i) => {
    if (index.has(body)) throw new Error('a function body appears twice in the module');
    index.set(body, i);
  });
  const indexOf = (target: FunctionBody) => {
    const i = index.get(target);
    if (i === undefined) throw new Error('call to a function that is not part of the module');
    return i;
  };

  // Identical signatures share one type entry.
  const typeKeys: string[] = [];
  const typeOf = fns.map(({ body }) => {
    const key = `${body.params.join(',')}:${body.results.join(',')}`;
    let t = typeKeys.indexOf(key);
    if (t < 0) t = typeKeys.push(key) - 1;
    return t;
  });
  const types: number[] = [];
  pushU32(types, typeKeys.length);
  for (const key of typeKeys) {
    const [params, results] = key.split(':').map((s) => (s === '' ? [] : s.split(',').map(Number)));
    types.push(0x60);
    pushU32(types, params!.length);
    append(types, params!);
    pushU32(types, results!.length);
    append(types, results!);
  }
  pushSection(out, 1, types);

  const funcs: number[] = [];
  pushU32(funcs, fns.length);
  typeOf.forEach((t) => pushU32(funcs, t));
  pushSection(out, 3, funcs);

  const memory: number[] = [1, 0x01];
  pushU32(memory, spec.pages);
  pushU32(memory, spec.pages);
  pushSection(out, 5, memory);

  const exported = fns.flatMap(({ name }, i) => (name === undefined ? [] : [{ name, i }]));
  const exports: number[] = [];
  pushU32(exports, exported.length + 1);
  for (const { name, i } of exported) {
    pushName(exports, name);
    exports.push(0x00);
    pushU32(exports, i);
  }
  pushName(exports, spec.memoryName);
  exports.push(0x02);
  pushU32(exports, 0);
  pushSection(out, 7, exports);

  const code: number[] = [];
  pushU32(code, fns.length);
  for (const { body } of fns) append(code, body.encode(indexOf));
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
