import { bls12_381 } from '@noble/curves/bls12-381.js';
import { randomBytes } from '@noble/hashes/utils.js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { instantiatePairingWasm, type PairingWasm } from './bls-wasm.js';
import {
  cgwkvSetup,
  decaps,
  encaps,
  encodeG2,
  extractUsk,
  loadPairingAcceleration,
  multiDecaps,
  multiEncaps,
  pairingBackend,
  parseCgwkvCiphertext,
  parseMasterPublicKey,
  parseMkemCiphertext,
  parseUserSecretKey,
  setPairingBackend,
} from './cgwkv.js';
import { compressGt, R } from './gt.js';

/**
 * The WebAssembly pairing backend against @noble/curves: G2 decoding (what it accepts, what it
 * refuses), the multi-pairing, and decapsulation through either backend.
 */

const { Fp, Fp2, Fp12 } = bls12_381.fields;
const G1 = bls12_381.G1.Point;
const G2 = bls12_381.G2.Point;
const arbScalar = fc.bigInt({ min: 1n, max: R - 1n });

let wasm: PairingWasm;
let previous: PairingWasm | undefined;
beforeAll(async () => {
  wasm = await instantiatePairingWasm();
  previous = setPairingBackend(undefined);
});
afterAll(() => {
  setPairingBackend(previous);
});

const g2Bytes = (q: InstanceType<typeof G2>) => encodeG2(q);

/** An error message without its parenthesised detail (from the first `(` to the last `)`), which may name the backend. */
function withoutDetail(message: string): string {
  const open = message.indexOf('(');
  const close = message.lastIndexOf(')');
  return open >= 0 && close > open ? message.slice(0, open) + message.slice(close + 1) : message;
}

/** A compressed G2 encoding of a point on the twist outside G2 (noble will not encode it). */
function g2OutsideSubgroup(): Uint8Array {
  for (let c = 1n; ; c++) {
    const x = Fp2.create({ c0: c, c1: 0n });
    let y;
    try {
      y = Fp2.sqrt(Fp2.add(Fp2.mul(Fp2.sqr(x), x), Fp2.create({ c0: 4n, c1: 4n })));
    } catch {
      continue;
    }
    const q = G2.fromAffine({ x, y });
    if (q.isTorsionFree()) continue;
    return encodeG2(q);
  }
}

/** A compressed G2 x with no point on the twist. */
function g2OffCurve(): Uint8Array {
  for (let c = 1n; ; c++) {
    const x = Fp2.create({ c0: c, c1: 1n });
    try {
      Fp2.sqrt(Fp2.add(Fp2.mul(Fp2.sqr(x), x), Fp2.create({ c0: 4n, c1: 4n })));
    } catch {
      const out = new Uint8Array(96);
      out.set(Fp.toBytes(x.c1), 0);
      out.set(Fp.toBytes(x.c0), 48);
      out[0]! |= 0x80;
      return out;
    }
  }
}

/** Points of small order on the twist (13 and 23 divide its cofactor): the subgroup check's exceptional cases. */
function g2SmallOrder(order: bigint): InstanceType<typeof G2>[] {
  const h = (G2 as unknown as { CURVE(): { h: bigint } }).CURVE().h;
  const mul = (p: InstanceType<typeof G2>, k: bigint) => {
    let acc = G2.ZERO;
    for (const bit of k.toString(2)) {
      acc = acc.double();
      if (bit === '1') acc = acc.add(p);
    }
    return acc;
  };
  // The order-part of the twist's group may not be cyclic: clear every other prime's part.
  let k = h * R;
  while (k % order === 0n) k /= order;
  const out: InstanceType<typeof G2>[] = [];
  for (let c = 1n; out.length < 2 && c < 200n; c++) {
    const x = Fp2.create({ c0: c, c1: 1n });
    let y;
    try {
      y = Fp2.sqrt(Fp2.add(Fp2.mul(Fp2.sqr(x), x), Fp2.create({ c0: 4n, c1: 4n })));
    } catch {
      continue;
    }
    const t = mul(G2.fromAffine({ x, y }), k);
    if (!t.is0()) out.push(t);
  }
  expect(out.length).toBe(2);
  return out;
}

describe('G2 decoding', () => {
  it('refuses points of small order and G2 points plus a small-order part', () => {
    for (const order of [13n, 23n]) {
      for (const t of g2SmallOrder(order)) {
        for (const p of [t, t.add(G2.BASE.multiply(order * 1000003n)), t.negate()]) {
          const ours = wasm.prepareG2(encodeG2(p), 1);
          expect(ours).toEqual({ index: 0, why: 'not in the prime-order subgroup', identity: false });
          expect(p.isTorsionFree()).toBe(false);
        }
      }
    }
  });

  it("accepts noble's encodings of random points, with noble's lines' pairing", () => {
    fc.assert(
      fc.property(arbScalar, arbScalar, (k, a) => {
        const q = G2.BASE.multiply(k);
        for (const point of [q, q.negate()]) {
          const lines = wasm.prepareG2(g2Bytes(point), 1);
          expect(lines).toBeInstanceOf(Uint8Array);
          const p = G1.BASE.multiply(a);
          const ours = wasm.pairing(lines as Uint8Array, [p.toAffine()]);
          expect(Fp12.eql(ours, bls12_381.pairing(p, point))).toBe(true);
        }
      }),
      { numRuns: 6 },
    );
  });

  it('refuses what noble refuses: flags, x ≥ p, off the twist, outside G2, the identity', () => {
    const valid = g2Bytes(G2.BASE.multiply(12345n));
    const refused = (bytes: Uint8Array, why: RegExp, identity = false) => {
      let noble = true;
      try {
        G2.fromBytes(bytes).assertValidity();
      } catch {
        noble = false;
      }
      const ours = wasm.prepareG2(bytes, 1);
      expect(ours).not.toBeInstanceOf(Uint8Array);
      const r = ours as { why: string; identity: boolean };
      expect(r.why).toMatch(why);
      expect(r.identity).toBe(identity);
      if (!identity) expect(noble).toBe(false);
    };
    const patched = (f: (b: Uint8Array) => void) => {
      const b = valid.slice();
      f(b);
      return b;
    };
    refused(
      patched((b) => (b[0]! &= 0x7f)),
      /compressed/,
    );
    refused(
      patched((b) => (b[0]! |= 0x40)),
      /identity/,
    );
    const identity = new Uint8Array(96);
    identity[0] = 0xc0;
    refused(identity, /identity/, true);
    refused(
      patched((b) => b.set([0xe0], 0)),
      /identity/,
    );
    // x.c1 = p (flags kept) and x.c0 = p: not canonical.
    const P_BE = new Uint8Array(48);
    let v = Fp.ORDER;
    for (let i = 47; i >= 0; i--, v >>= 8n) P_BE[i] = Number(v & 0xffn);
    refused(
      patched((b) => (b.set(P_BE, 0), (b[0]! |= 0x80))),
      /field modulus/,
    );
    refused(
      patched((b) => b.set(P_BE, 48)),
      /field modulus/,
    );
    refused(g2OffCurve(), /not on the curve/);
    refused(g2OutsideSubgroup(), /subgroup/);
  });

  it('refuses random bit flips whenever noble does, and otherwise decodes the same point', () => {
    const valid = g2Bytes(G2.BASE.multiply(987654321n));
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 96 * 8 - 1 }), (bit) => {
        const b = valid.slice();
        b[bit >> 3]! ^= 1 << (bit & 7);
        let noble: InstanceType<typeof G2> | undefined;
        try {
          noble = G2.fromBytes(b);
          noble.assertValidity();
          if (noble.is0()) noble = undefined;
        } catch {
          noble = undefined;
        }
        const ours = wasm.prepareG2(b, 1);
        expect(ours instanceof Uint8Array).toBe(noble !== undefined);
        if (noble) {
          const p = G1.BASE.multiply(5n);
          expect(Fp12.eql(wasm.pairing(ours as Uint8Array, [p.toAffine()]), bls12_381.pairing(p, noble))).toBe(true);
        }
      }),
      { numRuns: 60 },
    );
  });
});

/** A compressed G1 encoding of a curve point outside G1 (no cofactor clearing). */
function g1OutsideSubgroup(): Uint8Array {
  for (let x = 1n; ; x++) {
    let y: bigint;
    try {
      y = Fp.sqrt(Fp.add(Fp.pow(x, 3n), 4n));
    } catch {
      continue;
    }
    if (G1.fromAffine({ x, y }).isTorsionFree()) continue;
    const bytes = Fp.toBytes(x);
    bytes[0]! |= 0x80 | (y > (Fp.ORDER - 1n) / 2n ? 0x20 : 0);
    return bytes;
  }
}

describe('G1 decoding and multiplication', () => {
  it("decodes noble's encodings of random points to the same point", () => {
    fc.assert(
      fc.property(arbScalar, (k) => {
        const p = G1.BASE.multiply(k);
        for (const point of [p, p.negate()]) {
          const bytes = new Uint8Array(60);
          bytes.set(point.toBytes(true), 5);
          expect(wasm.decodeG1(bytes, 5)).toEqual(point.toAffine());
        }
      }),
      { numRuns: 20 },
    );
  });

  it('refuses what noble refuses, and bit flips whenever noble does', () => {
    const valid = G1.BASE.multiply(4242n).toBytes(true);
    const refusedBoth = (b: Uint8Array, why: RegExp) => {
      expect(() => G1.fromBytes(b).assertValidity()).toThrow();
      expect((wasm.decodeG1(b, 0) as { why: string }).why).toMatch(why);
    };
    refusedBoth(g1OutsideSubgroup(), /subgroup/);
    const pBytes = Fp.toBytes(0n);
    let v = Fp.ORDER;
    for (let i = 47; i >= 0; i--, v >>= 8n) pBytes[i] = Number(v & 0xffn);
    pBytes[0]! |= 0x80;
    refusedBoth(pBytes, /modulus/);
    const uncompressed = valid.slice();
    uncompressed[0]! &= 0x7f;
    refusedBoth(uncompressed, /compressed/);
    const identity = new Uint8Array(48);
    identity[0] = 0xc0;
    expect(wasm.decodeG1(identity, 0)).toEqual({ why: 'the identity', identity: true });
    let offCurve = 0;
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 48 * 8 - 1 }), (bit) => {
        const b = valid.slice();
        b[bit >> 3]! ^= 1 << (bit & 7);
        let noble;
        try {
          noble = G1.fromBytes(b);
          noble.assertValidity();
          if (noble.is0()) noble = undefined;
        } catch {
          noble = undefined;
        }
        const ours = wasm.decodeG1(b, 0);
        if ('why' in ours && /not on the curve/.test(ours.why)) offCurve++;
        expect(ours).toEqual(noble ? noble.toAffine() : expect.objectContaining({ why: expect.any(String) }));
      }),
      { numRuns: 100 },
    );
    expect(offCurve).toBeGreaterThan(0);
  });

  it('multiplies by public scalars like noble', () => {
    fc.assert(
      fc.property(arbScalar, arbScalar, (a, k) => {
        const p = G1.BASE.multiply(a);
        expect(wasm.g1MulPublic(p.toAffine(), k)).toEqual(p.multiply(k).toAffine());
      }),
      { numRuns: 20 },
    );
    const p = G1.BASE.multiply(3n);
    expect(wasm.g1MulPublic(p.toAffine(), 1n)).toEqual(p.toAffine());
    expect(wasm.g1MulPublic(p.toAffine(), R - 1n)).toEqual(p.negate().toAffine());
  });
});

describe('multi-pairing', () => {
  it('equals noble for up to six pairs, and compresses the same', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(arbScalar, arbScalar), { minLength: 1, maxLength: 6 }), (ks) => {
        const qs = ks.map(([, b]) => G2.BASE.multiply(b));
        const ps = ks.map(([a]) => G1.BASE.multiply(a));
        const bytes = new Uint8Array(96 * qs.length);
        qs.forEach((q, i) => bytes.set(g2Bytes(q), 96 * i));
        const lines = wasm.prepareG2(bytes, qs.length) as Uint8Array;
        const ours = wasm.pairing(
          lines,
          ps.map((p) => p.toAffine()),
        );
        const theirs = bls12_381.pairingBatch(ps.map((g1, i) => ({ g1, g2: qs[i]! })));
        expect(Fp12.eql(ours, theirs)).toBe(true);
        expect(compressGt(ours)).toEqual(compressGt(theirs));
      }),
      { numRuns: 4 },
    );
  });

  it('is bilinear: e(aP, bQ) = e(abP, Q) and e(P, Q)·e(−P, Q) = 1', () => {
    const [a, b] = [0x1234567n, 0x89abcdef0123n];
    const q = G2.BASE.multiply(7n);
    const p = G1.BASE.multiply(11n);
    const bq = wasm.prepareG2(g2Bytes(q.multiply(b)), 1) as Uint8Array;
    const qLines = wasm.prepareG2(g2Bytes(q), 1) as Uint8Array;
    const lhs = wasm.pairing(bq, [p.multiply(a).toAffine()]);
    const rhs = wasm.pairing(qLines, [p.multiply((a * b) % R).toAffine()]);
    expect(Fp12.eql(lhs, rhs)).toBe(true);
    const both = new Uint8Array(2 * qLines.length);
    both.set(qLines, 0);
    both.set(qLines, qLines.length);
    const one = wasm.pairing(both, [p.toAffine(), p.negate().toAffine()]);
    expect(Fp12.eql(one, Fp12.ONE)).toBe(true);
  });
});

describe('decapsulation through either backend', () => {
  it('parses keys and derives the same secrets with and without WebAssembly', async () => {
    const { mpk, msk } = cgwkvSetup();
    const key = parseMasterPublicKey(mpk);
    for (let i = 0; i < 3; i++) {
      const id = randomBytes(64);
      const uskBytes = extractUsk(msk, id);
      const { ct, ss } = encaps(key, id);
      setPairingBackend(undefined);
      expect(pairingBackend()).toBe('@noble/curves');
      const nobleKey = parseUserSecretKey(uskBytes);
      const viaNoble = decaps(nobleKey, parseCgwkvCiphertext(ct));
      setPairingBackend(wasm);
      expect(pairingBackend()).toBe('wasm');
      const wasmKey = parseUserSecretKey(uskBytes);
      expect(decaps(wasmKey, parseCgwkvCiphertext(ct))).toEqual(viaNoble);
      // A key parsed by noble switches to the loaded backend on its next use.
      expect(decaps(nobleKey, ct)).toEqual(viaNoble);
      expect(viaNoble).toEqual(ss);
      // A wrong key gives the same wrong secret both ways.
      const other = parseUserSecretKey(extractUsk(msk, randomBytes(64)));
      const wrong = decaps(other, ct);
      setPairingBackend(undefined);
      expect(decaps(parseUserSecretKey(extractUsk(msk, id)), ct)).toEqual(ss);
      expect(wrong).not.toEqual(ss);
    }
    setPairingBackend(wasm);
    const ids = [randomBytes(64), randomBytes(64)];
    const { ss, cts } = await multiEncaps(key, ids);
    expect(await multiDecaps(parseUserSecretKey(extractUsk(msk, ids[1]!)), parseMkemCiphertext(cts[1]!))).toEqual(ss);
  });

  it('refuses the same ciphertexts with the same messages', () => {
    const { mpk } = cgwkvSetup();
    const { ct } = encaps(parseMasterPublicKey(mpk), randomBytes(64));
    const outside = ct.slice();
    outside.set(g1OutsideSubgroup(), 48);
    const identity = ct.slice();
    identity.fill(0, 96, 144);
    identity[96] = 0xc0;
    const flipped = ct.slice();
    flipped[150]! ^= 4;
    for (const bad of [outside, identity, flipped]) {
      const message = (backend: PairingWasm | undefined) => {
        setPairingBackend(backend);
        try {
          parseCgwkvCiphertext(bad);
        } catch (e) {
          return withoutDetail((e as Error).message);
        }
        return 'accepted';
      };
      expect(message(wasm)).toBe(message(undefined));
    }
    setPairingBackend(undefined);
  });

  it('refuses the same user secret keys with the same messages', () => {
    const { msk } = cgwkvSetup();
    const usk = extractUsk(msk, randomBytes(64));
    const identity = usk.slice();
    identity.fill(0, 480, 576);
    identity[480] = 0xc0;
    const outside = usk.slice();
    outside.set(g2OutsideSubgroup(), 96);
    const flipped = usk.slice();
    flipped[200]! ^= 1;
    for (const bad of [identity, outside, flipped]) {
      const message = (backend: PairingWasm | undefined) => {
        setPairingBackend(backend);
        try {
          parseUserSecretKey(bad);
        } catch (e) {
          return withoutDetail((e as Error).message);
        }
        return 'accepted';
      };
      expect(message(wasm)).toBe(message(undefined));
    }
    setPairingBackend(undefined);
  });

  it('loadPairingAcceleration loads the backend', async () => {
    setPairingBackend(previous);
    await loadPairingAcceleration();
    expect(pairingBackend()).toBe('wasm');
    previous = setPairingBackend(undefined);
  });
});
