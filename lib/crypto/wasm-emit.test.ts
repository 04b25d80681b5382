import { describe, expect, it } from 'vitest';
import { encodeModule, FunctionBody, I32, I64, Op, pushS64, pushU32 } from './wasm-emit.js';

const u32 = (n: number) => {
  const out: number[] = [];
  pushU32(out, n);
  return out;
};
const s64 = (n: bigint) => {
  const out: number[] = [];
  pushS64(out, n);
  return out;
};

describe('LEB128', () => {
  it('encodes unsigned values', () => {
    expect(u32(0)).toEqual([0]);
    expect(u32(127)).toEqual([0x7f]);
    expect(u32(128)).toEqual([0x80, 0x01]);
    expect(u32(624485)).toEqual([0xe5, 0x8e, 0x26]);
    expect(u32(0xffff_ffff)).toEqual([0xff, 0xff, 0xff, 0xff, 0x0f]);
    for (const bad of [-1, 2 ** 32, 0.5]) expect(() => u32(bad)).toThrow(RangeError);
  });

  it('encodes signed 64-bit values', () => {
    expect(s64(0n)).toEqual([0]);
    expect(s64(-1n)).toEqual([0x7f]);
    expect(s64(63n)).toEqual([0x3f]);
    expect(s64(64n)).toEqual([0xc0, 0x00]);
    expect(s64(-64n)).toEqual([0x40]);
    expect(s64(-65n)).toEqual([0xbf, 0x7f]);
    expect(s64(-123456n)).toEqual([0xc0, 0xbb, 0x78]);
    // Unsigned constants wrap to two's complement, as i64.const expects.
    expect(s64(0x8000000000000000n)).toEqual([0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f]);
  });
});

describe('encodeModule', () => {
  it('produces a module that runs: memory, data, loops, i64 arithmetic', async () => {
    // sum(n): xor-rotates the i64 at address 8 into an accumulator n times.
    const f = new FunctionBody([I32], [I64]);
    const acc = f.local(I64);
    f.loop();
    f.get(acc).i32Const(0).load64(8).op(Op.i64Xor).i64Const(7n).op(Op.i64Rotl).set(acc);
    f.get(0).i32Const(1).op(Op.i32Sub).tee(0).brIf(0);
    f.op(Op.end);
    f.i32Const(0).get(acc).store64(16);
    f.get(acc);
    const bytes = encodeModule({
      pages: 1,
      memoryName: 'mem',
      functions: [{ name: 'run', body: f }],
      data: [{ offset: 8, bytes: new Uint8Array([1, 0, 0, 0, 0, 0, 0, 0x80]) }],
    });
    const { instance } = await WebAssembly.instantiate(bytes as Uint8Array<ArrayBuffer>);
    const run = instance.exports.run as (n: number) => bigint;
    const mem = instance.exports.mem as WebAssembly.Memory;
    const x = 0x8000000000000001n;
    const rotl7 = (v: bigint) => ((v << 7n) | (v >> 57n)) & 0xffffffffffffffffn;
    let expected = 0n;
    for (let i = 0; i < 3; i++) expected = rotl7(expected ^ x);
    expect(BigInt.asUintN(64, run(3))).toBe(expected);
    expect(new DataView(mem.buffer).getBigUint64(16, true)).toBe(expected);
    expect(mem.buffer.byteLength).toBe(65536);
    expect(() => mem.grow(1)).toThrow(RangeError);
  });
});

describe('calls between functions', () => {
  it('resolves call targets by body, keeps unnamed functions internal, shares identical types', async () => {
    // square(x) is internal; sumOfSquares(a, b) = square(a) + square(b) calls it before it is listed.
    const square = new FunctionBody([I64], [I64]);
    const sumOfSquares = new FunctionBody([I64, I64], [I64]);
    sumOfSquares.get(0).call(square).get(1).call(square).op(Op.i64Add);
    square.get(0).get(0).op(Op.i64Mul);
    const twice = new FunctionBody([I64], [I64]);
    twice.get(0).call(square).call(square);
    const bytes = encodeModule({
      pages: 1,
      memoryName: 'memory',
      functions: [{ name: 'sumOfSquares', body: sumOfSquares }, { body: square }, { name: 'fourth', body: twice }],
      data: [],
    });
    const mod = await WebAssembly.compile(bytes as Uint8Array<ArrayBuffer>);
    expect(
      WebAssembly.Module.exports(mod)
        .map((e) => e.name)
        .sort(),
    ).toEqual(['fourth', 'memory', 'sumOfSquares']);
    const { exports } = await WebAssembly.instantiate(mod);
    expect((exports.sumOfSquares as (a: bigint, b: bigint) => bigint)(3n, 4n)).toBe(25n);
    expect((exports.fourth as (a: bigint) => bigint)(3n)).toBe(81n);
    // two signatures, (i64) -> i64 and (i64, i64) -> i64: the type section has 2 entries
    const typeSection = bytes.indexOf(0x01, 8);
    expect(bytes[typeSection + 2]).toBe(2);
  });

  it('refuses a call to a function that is not in the module', () => {
    const orphan = new FunctionBody([]);
    const caller = new FunctionBody([]);
    caller.call(orphan);
    const spec = { pages: 1, memoryName: 'm', functions: [{ name: 'f', body: caller }], data: [] };
    expect(() => encodeModule(spec)).toThrow(/not part of the module/);
    expect(() => caller.encode()).toThrow(/part of a module/);
  });
});
