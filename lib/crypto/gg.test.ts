import { ristretto255 } from '@noble/curves/ed25519.js';
import { numberToBytesLE } from '@noble/curves/utils.js';
import { sha3_256 } from '@noble/hashes/sha3.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { hex, rustVectors, stream2seg, unb64, unhex, vectors } from '../../test/vectors.js';
import { ErrorCode, InputError, PostGuardError } from '../errors.js';
import { signingIdentity } from '../identity.js';
import { normalizePolicy } from '../policy.js';
import {
  GgBoundVerifier,
  GG_SIGNATURE_BYTES,
  ggIdentity,
  ggKeygen,
  ggPublicKeyOf,
  ggSetup,
  ggSign,
  ggSigningKeyMatches,
  ggVerify,
  parseSigningKey,
  parseVerifyingKey,
} from './gg.js';
import { createShake128 as nodeShake } from './shake-node.js';
import { createShake128 as nobleShake } from './shake-portable.js';
import type { XofFactory } from './xof.js';

const L = ristretto255.Point.Fn.ORDER;
const vk = parseVerifyingKey(unb64(vectors.keys.vk_b64));
const z = unhex(vectors.keys.ibs_master_secret_z_le_hex);
const allVectors = [...vectors.vectors, stream2seg.vector];
const transcriptOf = (bytes: Uint8Array, shake: XofFactory = nodeShake) => shake().update(bytes);

function expectInvalidKey(fn: () => unknown, message?: RegExp): void {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(InputError);
    expect((e as PostGuardError).code).toBe(ErrorCode.INVALID_KEY);
    if (message) expect((e as Error).message).toMatch(message);
    return;
  }
  expect.fail('expected INVALID_KEY');
}

describe('known answers: pg-wasm 0.5.10 header signatures', () => {
  for (const vec of allVectors) {
    const header = unhex(vec.parsed.header_hex);
    const sig = unhex(vec.parsed.header_sig_ext.sig);
    const id = signingIdentity(normalizePolicy(vec.parsed.header_sig_ext.pol));

    it(`${vec.name}: verifies under the VK with the signer's identity, on both SHAKE backends`, () => {
      expect(ggVerify(vk, id, sig, transcriptOf(header))).toBe(true);
      expect(ggVerify(vk, id, sig, transcriptOf(header, nobleShake))).toBe(true);
    });

    it(`${vec.name}: fails when any one header byte changes`, () => {
      fc.assert(
        fc.property(fc.nat({ max: header.length - 1 }), fc.integer({ min: 1, max: 255 }), (i, delta) => {
          const bad = header.slice();
          bad[i] = (bad[i]! + delta) & 255;
          expect(ggVerify(vk, id, sig, transcriptOf(bad))).toBe(false);
        }),
        {
          numRuns: 10,
          examples: [
            [0, 1],
            [header.length - 1, 1],
          ],
        },
      );
    });

    it(`${vec.name}: fails for a changed signature, another identity, a longer transcript or another VK`, () => {
      for (const i of [0, 40, 95]) {
        const bad = sig.slice();
        bad[i]! ^= 0x04;
        expect(ggVerify(vk, id, bad, transcriptOf(header))).toBe(false);
      }
      const other = signingIdentity({
        ts: 1700000000,
        con: [{ t: 'pbdf.sidn-pbdf.email.email', v: 'mallory@example.com' }],
      });
      expect(ggVerify(vk, other, sig, transcriptOf(header))).toBe(false);
      expect(ggVerify(vk, id, sig, transcriptOf(header).update(new Uint8Array([0])))).toBe(false);
      expect(ggVerify(parseVerifyingKey(ggSetup().pk), id, sig, transcriptOf(header))).toBe(false);
    });
  }
});

describe('known answers: keys', () => {
  it('the IBS master secret z gives the VK (vk = z·B)', () => {
    expect(hex(ggPublicKeyOf(z))).toBe(hex(unb64(vectors.keys.vk_b64)));
  });

  for (const name of ['pubSignKey', 'privSignKey'] as const) {
    it(`${name} parses, carries its policy's identity and satisfies the key equation`, () => {
      const key = parseSigningKey(unb64(vectors.keys[name].key));
      expect(hex(key.id)).toBe(hex(signingIdentity(normalizePolicy(vectors.keys[name].policy))));
      expect(ggSigningKeyMatches(vk, key)).toBe(true);
      expect(ggSigningKeyMatches(parseVerifyingKey(ggSetup().pk), key)).toBe(false);
    });
  }

  it("pg-core's regression keys parse (their USK predates ibs 0.4.0's hash order, so only parsing)", () => {
    const rust = rustVectors('pg-core-signing-regression.txt');
    const pk = parseVerifyingKey(unb64(rust.pk!));
    const usk = parseSigningKey(unb64(rust.usk!));
    expect(ggSigningKeyMatches(pk, usk)).toBe(false);
  });
});

describe('keygen, sign, verify', () => {
  const master = ggSetup();
  const masterVk = parseVerifyingKey(master.pk);

  it('setup gives a 32-byte pair with pk = z·B', () => {
    expect(master.pk).toHaveLength(32);
    expect(master.sk).toHaveLength(32);
    expect(hex(ggPublicKeyOf(master.sk))).toBe(hex(master.pk));
  });

  it('round-trips for random identities and messages; a wrong id or message fails', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 32, maxLength: 32 }),
        fc.uint8Array({ minLength: 32, maxLength: 32 }),
        fc.uint8Array({ maxLength: 300 }),
        fc.uint8Array({ minLength: 1, maxLength: 20 }),
        (id, otherId, message, extra) => {
          fc.pre(hex(id) !== hex(otherId));
          const key = parseSigningKey(ggKeygen(master.sk, id));
          expect(hex(key.id)).toBe(hex(id));
          expect(ggSigningKeyMatches(masterVk, key)).toBe(true);
          const t = transcriptOf(message);
          const sig = ggSign(key, t);
          expect(sig).toHaveLength(GG_SIGNATURE_BYTES);
          expect(ggVerify(masterVk, id, sig, t)).toBe(true);
          expect(ggVerify(masterVk, otherId, sig, t)).toBe(false);
          expect(ggVerify(masterVk, id, sig, t.clone().update(extra))).toBe(false);
          expect(ggVerify(vk, id, sig, t)).toBe(false);
        },
      ),
      { numRuns: 25 },
    );
  });

  it('neither signing nor verifying consumes the transcript (fork per segment)', () => {
    const key = parseSigningKey(ggKeygen(master.sk, new Uint8Array(32).fill(7)));
    const running = nodeShake().update(new Uint8Array([1, 2, 3]));
    const first = ggSign(key, running);
    const firstAgain = ggSign(key, running);
    running.update(new Uint8Array([4, 5]));
    const second = ggSign(key, running.clone().update(new Uint8Array([0, 0, 0, 1, 1])));
    expect(ggVerify(masterVk, key.id, first, nodeShake().update(new Uint8Array([1, 2, 3])))).toBe(true);
    expect(ggVerify(masterVk, key.id, firstAgain, nodeShake().update(new Uint8Array([1, 2, 3])))).toBe(true);
    const expected = nodeShake().update(new Uint8Array([1, 2, 3, 4, 5, 0, 0, 0, 1, 1]));
    expect(ggVerify(masterVk, key.id, second, expected)).toBe(true);
    expect(ggVerify(masterVk, key.id, second, expected)).toBe(true);
    // Signatures are randomised.
    expect(hex(first)).not.toBe(hex(firstAgain));
  });

  it('signatures made with the portable SHAKE verify with node:crypto and back', () => {
    const key = parseSigningKey(ggKeygen(master.sk, new Uint8Array(32).fill(9)));
    const msg = new Uint8Array(1000).map((_, i) => i);
    expect(ggVerify(masterVk, key.id, ggSign(key, transcriptOf(msg, nobleShake)), transcriptOf(msg))).toBe(true);
    expect(ggVerify(masterVk, key.id, ggSign(key, transcriptOf(msg)), transcriptOf(msg, nobleShake))).toBe(true);
  });
});

describe('rejecting bad input', () => {
  const header = unhex(vectors.vectors[0].parsed.header_hex);
  const sig = unhex(vectors.vectors[0].parsed.header_sig_ext.sig);
  const id = signingIdentity(normalizePolicy(vectors.vectors[0].parsed.header_sig_ext.pol));

  it('verify returns false for a malformed signature: length, non-canonical b, invalid points', () => {
    const t = transcriptOf(header);
    expect(ggVerify(vk, id, sig.subarray(0, 95), t)).toBe(false);
    expect(ggVerify(vk, id, new Uint8Array([...sig, 0]), t)).toBe(false);
    expect(ggVerify(vk, id, 'x' as never, t)).toBe(false);
    // b + ℓ still fits 32 bytes when b < 2^256 - ℓ; it is the same scalar mod ℓ but not canonical.
    const b = BigInt('0x' + hex(sig.subarray(32, 64).slice().reverse()));
    if (b + L < 2n ** 256n) {
      const nonCanonical = sig.slice();
      nonCanonical.set(numberToBytesLE(b + L, 32), 32);
      expect(ggVerify(vk, id, nonCanonical, t)).toBe(false);
    }
    const high = sig.slice();
    high.set(new Uint8Array(32).fill(0xff), 32);
    expect(ggVerify(vk, id, high, t)).toBe(false);
    const badGa = sig.slice();
    badGa.set(new Uint8Array(32).fill(0xff), 0);
    expect(ggVerify(vk, id, badGa, t)).toBe(false);
    const badGr = sig.slice();
    badGr[64]! |= 1; // odd encodings are never canonical ristretto255
    expect(ggVerify(vk, id, badGr, t)).toBe(false);
    // Still the good signature afterwards: the transcript was not consumed by the failures.
    expect(ggVerify(vk, id, sig, t)).toBe(true);
  });

  it('signing keys: wrong length, non-canonical y, invalid gr → INVALID_KEY', () => {
    const key = unb64(vectors.keys.pubSignKey.key);
    expectInvalidKey(() => parseSigningKey(key.subarray(1)), /96 bytes/);
    const y = key.slice();
    y.set(numberToBytesLE(L, 32), 0);
    expectInvalidKey(() => parseSigningKey(y), /not canonical/);
    const gr = key.slice();
    gr[32]! |= 1;
    expectInvalidKey(() => parseSigningKey(gr), /gr/);
  });

  it('verifying keys and master secrets: wrong length or invalid → INVALID_KEY', () => {
    expectInvalidKey(() => parseVerifyingKey(new Uint8Array(31)), /32 bytes/);
    expectInvalidKey(() => parseVerifyingKey(new Uint8Array(32).fill(0xff)), /ristretto255/);
    expectInvalidKey(() => ggKeygen(new Uint8Array(33), new Uint8Array(32)), /32 bytes/);
    expectInvalidKey(() => ggKeygen(numberToBytesLE(L, 32), new Uint8Array(32)), /not canonical/);
    expectInvalidKey(() => ggPublicKeyOf(new Uint8Array(32).fill(0xff)), /not canonical/);
  });

  it('identities must be 32 bytes (ggIdentity hashes other inputs, as ibs does)', () => {
    expect(() => ggKeygen(z, new Uint8Array(64))).toThrow(InputError);
    expect(() => ggVerify(vk, new Uint8Array(31), sig, transcriptOf(header))).toThrow(InputError);
    const exact = new Uint8Array(32).fill(3);
    expect(hex(ggIdentity(exact))).toBe(hex(exact));
    expect(hex(ggIdentity(new Uint8Array(64)))).toBe(hex(sha3_256(new Uint8Array(64))));
  });

  it('keys must come from the parsers', () => {
    expect(() => ggSign({ bytes: new Uint8Array(96) } as never, nodeShake())).toThrow(TypeError);
    expect(() => ggVerify({ bytes: new Uint8Array(32) } as never, id, sig, nodeShake())).toThrow(TypeError);
  });
});

describe('GgBoundVerifier', () => {
  it('agrees with ggVerify across many signatures, keys and tampering', async () => {
    const { createShake128 } = await import('./shake-node.js');
    const { pk, sk } = ggSetup();
    const vk = parseVerifyingKey(pk);
    const id = new Uint8Array(32).fill(3);
    const other = new Uint8Array(32).fill(4);
    const bound = new GgBoundVerifier(vk, id);
    const keys = [parseSigningKey(ggKeygen(sk, id)), parseSigningKey(ggKeygen(sk, id))];
    const transcript = createShake128().update(new Uint8Array([1, 2, 3]));
    // More than the table threshold, switching signing keys (gr) midway and back.
    for (let i = 0; i < 20; i++) {
      transcript.update(new Uint8Array([i]));
      const key = keys[i < 10 || i > 15 ? 0 : 1]!;
      const sig = ggSign(key, transcript);
      expect(bound.verify(sig, transcript)).toBe(true);
      expect(ggVerify(vk, id, sig, transcript)).toBe(true);
      const bad = sig.slice();
      bad[i % 96]! ^= 1;
      expect(bound.verify(bad, transcript)).toBe(ggVerify(vk, id, bad, transcript));
      expect(bound.verify(bad, transcript)).toBe(false);
      expect(new GgBoundVerifier(vk, other).verify(sig, transcript)).toBe(false);
      expect(bound.verify(sig, transcript.clone().update(new Uint8Array([9])))).toBe(false);
    }
    expect(bound.verify(new Uint8Array(95), transcript)).toBe(false);
  });
});
