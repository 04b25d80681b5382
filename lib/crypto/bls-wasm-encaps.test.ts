import { bls12_381 } from '@noble/curves/bls12-381.js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { instantiatePairingWasm, type PairingWasm } from './bls-wasm.js';
import {
  cgwkvSetup,
  decaps,
  encaps,
  encapsDeterministic,
  extractUsk,
  g1JointTable,
  g1MulSum,
  g1SumDigits,
  parseMasterPublicKey,
  parseUserSecretKey,
  setPairingBackend,
} from './cgwkv.js';
import { GtPowBase, gtGenerator, R } from './gt.js';

/**
 * Encapsulation on the WebAssembly backend against @noble/curves: the fixed-base G1 sums, the
 * powers of KT, and whole encapsulations with the same randomness give the same bytes.
 */

const G1 = bls12_381.G1.Point;
const arbScalar = fc.bigInt({ min: 0n, max: R - 1n });
const edgeScalars = [0n, 1n, 2n, R - 1n, R - 2n, 0xd201000000010000n ** 2n, 0xd201000000010000n ** 2n - 1n];
const arbEdgeOrRandom = fc.oneof(fc.constantFrom(...edgeScalars), arbScalar);

let wasm: PairingWasm;
let previous: PairingWasm | undefined;
beforeAll(async () => {
  wasm = await instantiatePairingWasm();
  previous = setPairingBackend(undefined);
});
afterAll(() => {
  setPairingBackend(previous);
});

describe('encapsulation on WebAssembly', () => {
  it('sums of one to three fixed bases equal noble’s, for random and edge scalars', () => {
    fc.assert(
      fc.property(
        fc.array(fc.bigInt({ min: 1n, max: R - 1n }), { minLength: 3, maxLength: 3 }),
        fc.array(arbEdgeOrRandom, { minLength: 1, maxLength: 3 }),
        (bases, scalars) => {
          const points = bases.slice(0, scalars.length).map((k) => G1.BASE.multiply(k));
          const expected = g1MulSum(g1JointTable(points), scalars);
          const table = wasm.g1Table(points.map((p) => p.toAffine()));
          const got = wasm.g1MulSum(table, g1SumDigits(scalars));
          if (expected.is0()) expect(got).toBeUndefined();
          else expect(got).toEqual(expected.toAffine());
        },
      ),
      { numRuns: 30 },
    );
  });

  it('powers of a Gt element equal noble’s', () => {
    const base = new GtPowBase(gtGenerator().pow(123456789n));
    const table = wasm.gtTable(base.entries);
    fc.assert(
      fc.property(arbEdgeOrRandom, (k) => {
        expect(wasm.gtPow(table, base.digits(k))).toEqual(base.pow(k));
      }),
      { numRuns: 20 },
    );
  });

  it('a whole encapsulation gives the same ciphertext and secret on both backends, and decapsulates', () => {
    const { mpk, msk } = cgwkvSetup();
    const key = parseMasterPublicKey(mpk);
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 64, maxLength: 64 }),
        fc.bigInt({ min: 1n, max: R - 1n }),
        fc.uint8Array({ minLength: 32, maxLength: 32 }),
        (id, s, kk) => {
          const viaNoble = encapsDeterministic(key, id, s, kk, undefined);
          const viaWasm = encapsDeterministic(key, id, s, kk, wasm);
          expect(viaWasm.ct).toEqual(viaNoble.ct);
          expect(viaWasm.ss).toEqual(viaNoble.ss);
          expect(decaps(parseUserSecretKey(extractUsk(msk, id)), viaWasm.ct)).toEqual(viaWasm.ss);
        },
      ),
      { numRuns: 8 },
    );
  });

  it('encaps uses the loaded backend, and its output opens with the other', () => {
    const { mpk, msk } = cgwkvSetup();
    const key = parseMasterPublicKey(mpk);
    const id = new Uint8Array(64).fill(9);
    const usk = parseUserSecretKey(extractUsk(msk, id));
    setPairingBackend(wasm);
    try {
      const { ct, ss } = encaps(key, id);
      setPairingBackend(undefined);
      expect(decaps(usk, ct)).toEqual(ss);
    } finally {
      setPairingBackend(undefined);
    }
  });

  it('leaves no secret digits or power in the engine’s memory', () => {
    const base = new GtPowBase(gtGenerator().pow(99n));
    const table = wasm.gtTable(base.entries);
    const memory = (wasm as unknown as { mem: Uint8Array }).mem;
    const power = wasm.gtPow(table, base.digits(R - 5n));
    const layout = (wasm as unknown as { layout: { g: number; digits: number } }).layout;
    expect(memory.subarray(layout.digits, layout.digits + 128).every((b) => b === 0)).toBe(true);
    expect(memory.subarray(layout.g, layout.g + 576).every((b) => b === 0)).toBe(true);
    expect(power).toEqual(base.pow(R - 5n));
  });
});
