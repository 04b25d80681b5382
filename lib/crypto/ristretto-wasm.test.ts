import { ristretto255 } from '@noble/curves/ed25519.js';
import { bytesToNumberLE, numberToBytesLE } from '@noble/curves/utils.js';
import fc from 'fast-check';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { PostGuardError } from '../errors.js';
import { ristrettoLayout } from './ristretto-wasm-layout.js';
import { ristrettoModule } from './ristretto-wasm-module.js';
import { instantiateRistrettoWasm, loadRistrettoWasm, type RistrettoWasm } from './ristretto-wasm.js';

const Point = ristretto255.Point;
type Point = InstanceType<typeof Point>;
const L = Point.Fn.ORDER;
const P = 2n ** 255n - 19n;
const scalar = (k: bigint) => numberToBytesLE(k, 32);
const unhex = (s: string) => Uint8Array.from(Buffer.from(s, 'hex'));
const mulBase = (k: bigint) => Point.BASE.multiplyUnsafe(k);

/** RFC 9496 appendix A.1: enc(k·B) for k = 0..15. */
const GENERATOR_MULTIPLES = [
  '0000000000000000000000000000000000000000000000000000000000000000',
  'e2f2ae0a6abc4e71a884a961c500515f58e30b6aa582dd8db6a65945e08d2d76',
  '6a493210f7499cd17fecb510ae0cea23a110e8d5b901f8acadd3095c73a3b919',
  '94741f5d5d52755ece4f23f044ee27d5d1ea1e2bd196b462166b16152a9d0259',
  'da80862773358b466ffadfe0b3293ab3d9fd53c5ea6c955358f568322daf6a57',
  'e882b131016b52c1d3337080187cf768423efccbb517bb495ab812c4160ff44e',
  'f64746d3c92b13050ed8d80236a7f0007c3b3f962f5ba793d19a601ebb1df403',
  '44f53520926ec81fbd5a387845beb7df85a96a24ece18738bdcfa6a7822a176d',
  '903293d8f2287ebe10e2374dc1a53e0bc887e592699f02d077d5263cdd55601c',
  '02622ace8f7303a31cafc63f8fc48fdc16e1c8c8d234b2f0d6685282a9076031',
  '20706fd788b2720a1ed2a5dad4952b01f413bcf0e7564de8cdc816689e2db95f',
  'bce83f8ba5dd2fa572864c24ba1810f9522bc6004afe95877ac73241cafdab42',
  'e4549ee16b9aa03099ca208c67adafcafa4c3f3e4e5303de6026e3ca8ff84460',
  'aa52e000df2e16f55fb1032fc33bc42742dad6bd5a8fc0be0167436c5948501f',
  '46376b80f409b29dc2b5f6f0c52591990896e5716f41477cd30085ab7f10301e',
  'e0c418f7c8d9c4cdd7395b93ea124f3ad99021bb681dfc3302a9d99a2e53e64e',
];

/** RFC 9496 appendix A.2: non-canonical, negative, non-square x², negative xy, s = −1 (y = 0). */
const INVALID_ENCODINGS = [
  '00ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff',
  'ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
  'f3ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
  'edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
  '0100000000000000000000000000000000000000000000000000000000000000',
  '01ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
  'ed57ffd8c914fb201471d1c3d245ce3c746fcbe63a3679d51b6a516ebebe0e20',
  'c34c4e1826e5d403b78e246e88aa051c36ccf0aafebffe137d148a2bf9104562',
  'c940e5a4404157cfb1628b108db051a8d439e1a421394ec4ebccb9ec92a8ac78',
  '47cfc5497c53dc8e61c91d17fd626ffb1c49e2bca94eed052281b510b1117a24',
  'f1c6165d33367351b0da8f6e4511010c68174a03b6581212c71c0e1d026c3c72',
  '87260f7a2f12495118360f02c26a470f450dadf34a413d21042b43b9d93e1309',
  '26948d35ca62e643e26a83177332e6b6afeb9d08e4268b650f1f5bbd8d81d371',
  '4eac077a713c57b4f4397629a4145982c661f48044dd3f96427d40b147d9742f',
  'de6a7b00deadc788eb6b6c8d20c0ae96c2f2019078fa604fee5b87d6e989ad7b',
  'bcab477be20861e01e4a0e295284146a510150d9817763caf1a6f4b422d67042',
  '2a292df7e32cababbd9de088d1d1abec9fc0440f637ed2fba145094dc14bea08',
  'f4a9e534fc0d216c44b218fa0c42d99635a0127ee2e53c712f70609649fdff22',
  '8268436f8c4126196cf64b3c7ddbda90746a378625f9813dd9b8457077256731',
  '2810e5cbc2cc4d4eece54f61c6f69758e289aa7ab440b3cbeaa21995c2f4232b',
  '3eb858e78f5a7254d8c9731174a94f76755fd3941c0ac93735c07ba14579630e',
  'a45fdc55c76448c049a1ab33f17023edfb2be3581e9c7aade8a6125215e04220',
  'd483fe813c6ba647ebbfd3ec41adca1c6130c2beeee9d9bf065c8d151c5f396e',
  '8a2e1d30050198c65a54483123960ccc38aef6848e1ec8f5f780e8523769ba32',
  '32888462f8b486c68ad7dd9610be5192bbeaf3b443951ac1a8118419d9fa097b',
  '227142501b9d4355ccba290404bde41575b037693cef1f438c47f8fbf35d1165',
  '5c37cc491da847cfeb9281d407efc41e15144c876e0170b499a96a22ed31e01e',
  '445425117cb8c90edcbc7c1cc0e74f747f2c1efa5630a967c64f287792a48a4b',
  'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
].map(unhex);

const scalarArb = fc.bigInt({ min: 0n, max: L - 1n });
const nonZeroArb = fc.bigInt({ min: 1n, max: L - 1n });
/** Scalars whose radix-16 / radix-256 digits sit at the recoding edges (±8, ±128, carries). */
const EDGE_SCALARS = [
  0n,
  1n,
  2n,
  7n,
  8n,
  9n,
  15n,
  16n,
  127n,
  128n,
  129n,
  255n,
  L - 1n,
  L - 2n,
  2n ** 252n,
  2n ** 252n - 1n,
  2n ** 252n + 1n,
  0x0888888888888888888888888888888888888888888888888888888888888888n,
  0x0777777777777777777777777777777777777777777777777777777777777777n,
  0x0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0fn,
  0x0080808080808080808080808080808080808080808080808080808080808080n,
  0x007f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7fn,
  2n ** 200n - 1n,
  (L - 1n) / 2n,
];

const expectCode = (fn: () => unknown, code: string) => {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(PostGuardError);
    expect((e as PostGuardError).code).toBe(code);
    return;
  }
  throw new Error(`expected a PostGuardError ${code}`);
};

/** What noble says b·B − d·Q = ga is (false for an invalid ga). */
function nobleCheck(b: bigint, d: bigint, q: Point, ga: Uint8Array): boolean {
  let gaPoint: Point;
  try {
    gaPoint = Point.fromBytes(ga);
  } catch {
    return false;
  }
  return mulBase(b).subtract(q.multiplyUnsafe(d)).equals(gaPoint);
}

/**
 * A true GG-shaped equation: Q = y·B, b = a + y·d, so b·B − d·Q = a·B = ga. y ≠ 0: with
 * Q = identity every d satisfies it (that case has its own test).
 */
const equationArb = fc.tuple(nonZeroArb, nonZeroArb, scalarArb).map(([y, a, d]) => {
  const q = mulBase(y);
  return { y, a, d, q, b: (a + y * d) % L, ga: Point.BASE.multiply(a).toBytes() };
});

function suite(name: string, load: () => Promise<RistrettoWasm>) {
  describe(name, () => {
    let rw: RistrettoWasm;
    beforeAll(async () => {
      rw = await load();
    });

    describe('baseMulEncode', () => {
      it('gives the RFC 9496 encodings of 0..15 times the generator', () => {
        GENERATOR_MULTIPLES.forEach((hex, k) => {
          expect(Buffer.from(rw.baseMulEncode(scalar(BigInt(k)))).toString('hex')).toBe(hex);
        });
      });

      it('equals noble BASE.multiply(s).toBytes() for random and edge scalars', () => {
        for (const s of EDGE_SCALARS) expect(rw.baseMulEncode(scalar(s))).toEqual(mulBase(s).toBytes());
        fc.assert(
          fc.property(scalarArb, (s) => {
            expect(rw.baseMulEncode(scalar(s))).toEqual(mulBase(s).toBytes());
          }),
          { numRuns: 150 },
        );
      });

      it('leaves its input alone', () => {
        const s = scalar(L - 5n);
        rw.baseMulEncode(s);
        expect(s).toEqual(scalar(L - 5n));
      });

      it('refuses anything but 32 bytes below ℓ', () => {
        for (const bad of [L, L + 1n, 2n ** 253n, 2n ** 256n - 1n]) {
          expectCode(() => rw.baseMulEncode(scalar(bad)), 'INVALID_INPUT');
        }
        for (const len of [0, 31, 33, 64]) expectCode(() => rw.baseMulEncode(new Uint8Array(len)), 'INVALID_INPUT');
        expectCode(() => rw.baseMulEncode([1, 2, 3] as unknown as Uint8Array), 'INVALID_INPUT');
      });
    });

    describe('verifier', () => {
      it('accepts b·B − d·Q = ga built from the equation, and rejects each one-bit change', () => {
        fc.assert(
          fc.property(equationArb, fc.integer({ min: 0, max: 255 }), ({ q, b, d, ga }, bit) => {
            const v = rw.prepareVerifier(q.toBytes());
            expect(v.check(scalar(b), scalar(d), ga)).toBe(true);
            expect(rw.checkOnce(q.toBytes(), scalar(b), scalar(d), ga)).toBe(true);
            const flip = (bytes: Uint8Array) => {
              const out = bytes.slice();
              out[bit >> 3]! ^= 1 << (bit & 7);
              return out;
            };
            expect(v.check(flip(scalar(b)), scalar(d), ga)).toBe(false);
            expect(v.check(scalar(b), flip(scalar(d)), ga)).toBe(false);
            expect(v.check(scalar(b), scalar(d), flip(ga))).toBe(false);
            expect(rw.checkOnce(q.toBytes(), flip(scalar(b)), scalar(d), ga)).toBe(false);
            expect(rw.checkOnce(q.toBytes(), scalar(b), scalar(d), flip(ga))).toBe(false);
          }),
          { numRuns: 40 },
        );
      });

      it('composes with signing: Q and ga from baseMulEncode, b = a + y·d, verify true', () => {
        fc.assert(
          fc.property(nonZeroArb, nonZeroArb, scalarArb, (y, a, d) => {
            const q = rw.baseMulEncode(scalar(y));
            const ga = rw.baseMulEncode(scalar(a));
            const b = scalar((a + y * d) % L);
            expect(rw.prepareVerifier(q).check(b, scalar(d), ga)).toBe(true);
            expect(rw.checkOnce(q, b, scalar(d), ga)).toBe(true);
            expect(rw.checkOnce(q, b, scalar((d + 1n) % L), ga)).toBe(false);
          }),
          { numRuns: 40 },
        );
      });

      it('agrees with noble on random (b, d, Q, ga), true and false', () => {
        const gaArb = fc.oneof(
          scalarArb.map((g) => mulBase(g).toBytes()),
          fc.constant(null),
        );
        const caseArb = fc.tuple(scalarArb, scalarArb, scalarArb, gaArb);
        fc.assert(
          fc.property(caseArb, ([b, d, y, maybeGa]) => {
            const q = mulBase(y);
            // Half the cases are made true by taking ga from noble's own b·B − d·Q.
            const ga = maybeGa ?? mulBase(b).subtract(q.multiplyUnsafe(d)).toBytes();
            const expected = nobleCheck(b, d, q, ga);
            expect(rw.prepareVerifier(q.toBytes()).check(scalar(b), scalar(d), ga)).toBe(expected);
            expect(rw.checkOnce(q.toBytes(), scalar(b), scalar(d), ga)).toBe(expected);
          }),
          { numRuns: 60 },
        );
      });

      it('handles edge scalars on both sides', () => {
        const q = mulBase(0x1234567890abcdefn);
        const v = rw.prepareVerifier(q.toBytes());
        for (const b of EDGE_SCALARS) {
          for (const d of [0n, 1n, 8n, 128n, L - 1n, 2n ** 252n]) {
            const ga = mulBase(b).subtract(q.multiplyUnsafe(d)).toBytes();
            expect(v.check(scalar(b), scalar(d), ga)).toBe(true);
          }
        }
        const top = mulBase(L - 1n)
          .subtract(q.multiplyUnsafe(L - 1n))
          .toBytes();
        expect(rw.checkOnce(q.toBytes(), scalar(L - 1n), scalar(L - 1n), top)).toBe(true);
      });

      it('handles the identity as Q, as ga and as the result', () => {
        const zero = new Uint8Array(32);
        const id = rw.prepareVerifier(zero);
        // Q = identity: b·B − d·identity = b·B for any d
        expect(id.check(scalar(5n), scalar(77n), mulBase(5n).toBytes())).toBe(true);
        expect(id.check(scalar(0n), scalar(77n), zero)).toBe(true);
        expect(id.check(scalar(5n), scalar(77n), zero)).toBe(false);
        expect(rw.checkOnce(zero, scalar(5n), scalar(L - 1n), mulBase(5n).toBytes())).toBe(true);
        // result = identity: b·B = d·Q
        const q = mulBase(3n);
        const v = rw.prepareVerifier(q.toBytes());
        expect(v.check(scalar(21n), scalar(7n), zero)).toBe(true);
        expect(v.check(scalar(0n), scalar(0n), zero)).toBe(true);
        expect(v.check(scalar(22n), scalar(7n), zero)).toBe(false);
        expect(rw.checkOnce(q.toBytes(), scalar(21n), scalar(7n), zero)).toBe(true);
      });

      it('returns false for non-canonical scalars, bad lengths and invalid ga encodings', () => {
        const [y, a, d] = [0xabcdef0123456789n, 0x1111n, L - 3n];
        const q = mulBase(y);
        const b = (a + y * d) % L;
        const ga = mulBase(a).toBytes();
        const v = rw.prepareVerifier(q.toBytes());
        const once = (bb: Uint8Array, dd: Uint8Array, g: Uint8Array) => rw.checkOnce(q.toBytes(), bb, dd, g);
        expect(v.check(scalar(b), scalar(d), ga)).toBe(true);
        expect(once(scalar(b), scalar(d), ga)).toBe(true);
        // b + ℓ and d + ℓ name the same scalars but are not canonical
        for (const [bb, dd] of [
          [b + L, d],
          [b, d + L],
          [L, d],
          [b, 2n ** 256n - 1n],
        ] as const) {
          expect(v.check(scalar(bb), scalar(dd), ga)).toBe(false);
          expect(once(scalar(bb), scalar(dd), ga)).toBe(false);
        }
        for (const bad of [new Uint8Array(0), new Uint8Array(31), new Uint8Array(33)]) {
          expect(v.check(bad, scalar(d), ga)).toBe(false);
          expect(v.check(scalar(b), bad, ga)).toBe(false);
          expect(v.check(scalar(b), scalar(d), bad)).toBe(false);
          expect(once(scalar(b), scalar(d), bad)).toBe(false);
          expect(rw.checkOnce(bad, scalar(b), scalar(d), ga)).toBe(false);
        }
        // the right point, encoded non-canonically as s + p
        expect(v.check(scalar(b), scalar(d), numberToBytesLE(bytesToNumberLE(ga) + P, 32))).toBe(false);
        for (const enc of INVALID_ENCODINGS) {
          expect(v.check(scalar(b), scalar(d), enc)).toBe(false);
          expect(once(scalar(b), scalar(d), enc)).toBe(false);
        }
      });

      it('refuses to prepare for an invalid Q, and checkOnce returns false for one', () => {
        const [b, d] = [scalar(3n), scalar(4n)];
        for (const enc of INVALID_ENCODINGS) {
          expectCode(() => rw.prepareVerifier(enc), 'INVALID_KEY');
          expect(rw.checkOnce(enc, b, d, mulBase(3n).toBytes())).toBe(false);
        }
        for (const len of [0, 31, 33]) expectCode(() => rw.prepareVerifier(new Uint8Array(len)), 'INVALID_INPUT');
      });

      it('keeps many verifiers correct while they share the wasm slots', () => {
        const cases = Array.from({ length: 7 }, (_, i) => {
          const y = 0x9e3779b97f4a7c15n * BigInt(i + 1);
          const [a, d] = [0x5555n + BigInt(i), L - 1n - BigInt(i)];
          const v = rw.prepareVerifier(mulBase(y).toBytes());
          return { b: scalar((a + y * d) % L), d: scalar(d), ga: mulBase(a).toBytes(), v };
        });
        const order = [3, 0, 6, 1, 1, 5, 2, 4, 0, 6, 3, 2, 5, 4, 0];
        for (const [n, i] of order.entries()) {
          const c = cases[i]!;
          const other = cases[(i + 1) % cases.length]!;
          expect(c.v.check(c.b, c.d, c.ga)).toBe(true);
          expect(c.v.check(other.b, other.d, other.ga)).toBe(false);
          // failed preparations in between must not disturb anyone's table
          if (n % 4 === 0) expectCode(() => rw.prepareVerifier(INVALID_ENCODINGS[n]!), 'INVALID_KEY');
        }
        expect(cases.map((c) => c.v.q)).toEqual(cases.map((c) => c.v.q.slice()));
      });
    });
  });
}

describe('loadRistrettoWasm', () => {
  const RealCompileError = WebAssembly.CompileError;
  afterEach(() => {
    vi.unstubAllGlobals();
    vi.resetModules();
  });

  it('compiles once per realm and hands out the same instance', async () => {
    const first = loadRistrettoWasm();
    expect(loadRistrettoWasm()).toBe(first);
    expect(await first).toBeDefined();
  });

  it('resolves to undefined (never rejects) where WebAssembly is missing or refuses the module', async () => {
    vi.resetModules();
    vi.stubGlobal('WebAssembly', undefined);
    const missing = await import('./ristretto-wasm.js');
    await expect(missing.loadRistrettoWasm()).resolves.toBeUndefined();
    await expect(missing.instantiateRistrettoWasm()).rejects.toThrow(/not available/);

    vi.resetModules();
    // A content security policy without 'wasm-unsafe-eval' makes compilation throw.
    vi.stubGlobal('WebAssembly', { instantiate: () => Promise.reject(new RealCompileError('blocked by CSP')) });
    const refused = await import('./ristretto-wasm.js');
    await expect(refused.loadRistrettoWasm()).resolves.toBeUndefined();
  });
});

describe('generator options', () => {
  it('refuses window and slot settings the combs cannot use', () => {
    const base = { baseWindow: 8, verifierWindow: 5, verifierTeeth: 1, onceWindow: 5, verifierSlots: 4 } as const;
    expect(() => ristrettoLayout(base)).not.toThrow();
    for (const bad of [
      { verifierWindow: 1 },
      { verifierWindow: 9 },
      { verifierWindow: 11 },
      { verifierWindow: 4.5 },
      { verifierTeeth: 0 },
      { onceWindow: 23 },
      { verifierSlots: 0 },
      { baseWindow: 5 },
    ]) {
      expect(() => ristrettoLayout({ ...base, ...bad } as never)).toThrow(RangeError);
    }
  });
});

suite('default options', async () => (await loadRistrettoWasm())!);
suite('base table of radix 16, verifier w = 6 in two teeth, one slot', () =>
  instantiateRistrettoWasm(
    ristrettoModule({ baseWindow: 4, verifierWindow: 6, verifierTeeth: 2, onceWindow: 4, verifierSlots: 1 }),
  ),
);
