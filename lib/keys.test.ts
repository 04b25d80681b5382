import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadPgWasm } from '../test/pgwasm.js';
import { unhex, vectors } from '../test/vectors.js';
import { parseMkemCiphertext, multiDecaps } from './crypto/cgwkv.js';
import { ggSign, ggSigningKeyMatches, ggVerify, parseSigningKey } from './crypto/gg.js';
import { createShake128 } from './crypto/shake-node.js';
import { ErrorCode, InputError, PostGuardError } from './errors.js';
import {
  clearKeyCaches,
  extractSigningKey,
  extractUsk,
  generateKemKeys,
  generateSigningKeys,
  kemKeysMatch,
  masterPublicKeyFromBase64,
  signingKeyFromBase64,
  signingKeysMatch,
  userSecretKeyFromBase64,
  verifyingKeyFromBase64,
  verifyingKeyOf,
} from './keys.js';
import { signingIdentity } from './identity.js';
const keys = vectors.keys;
const zB64 = Buffer.from(keys.ibs_master_secret_z_le_hex, 'hex').toString('base64');
const bob = keys.usk.Bob.policy;
const alice = keys.pubSignKey.policy;

function expectCode(fn: () => unknown, code: string, message?: RegExp): void {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(InputError);
    expect((e as PostGuardError).code).toBe(code);
    if (message) expect((e as Error).message).toMatch(message);
    return;
  }
  expect.fail(`expected ${code}`);
}

describe('generation and extraction', () => {
  it('generates keys of the reference string lengths that form pairs', () => {
    const kem = generateKemKeys();
    const ibs = generateSigningKeys();
    expect([kem.mpk.length, kem.msk.length, ibs.vk.length, ibs.sk.length]).toEqual([896, 684, 44, 44]);
    expect(kemKeysMatch(kem.mpk, kem.msk)).toBe(true);
    expect(signingKeysMatch(ibs.vk, ibs.sk)).toBe(true);
    expect(kemKeysMatch(kem.mpk, keys.msk_b64)).toBe(false);
    expect(signingKeysMatch(keys.vk_b64, ibs.sk)).toBe(false);
  });

  it('the vector keys form pairs; z gives the vector VK', () => {
    expect(kemKeysMatch(keys.mpk_b64, keys.msk_b64)).toBe(true);
    expect(verifyingKeyOf(zB64)).toBe(keys.vk_b64);
    expect(signingKeysMatch(keys.vk_b64, zB64)).toBe(true);
  });

  it("a USK extracted for Bob's policy opens Bob's capsule in the pg-wasm ciphertext", async () => {
    const usk = extractUsk(keys.msk_b64, bob);
    expect(usk).toHaveLength(768);
    const entry = vectors.vectors[0].parsed.header.recipients.find((r: { id: string }) => r.id === 'Bob');
    const ss = await multiDecaps(userSecretKeyFromBase64(usk), parseMkemCiphertext(unhex(entry.ct)));
    expect(ss).toEqual(unhex(vectors.vectors[0].secrets.shared_secret_ss_hex));
    // Attribute order does not matter, the timestamp does.
    const reordered = { ts: bob.ts, con: [...bob.con].reverse() };
    await expect(
      multiDecaps(userSecretKeyFromBase64(extractUsk(keys.msk_b64, reordered)), parseMkemCiphertext(unhex(entry.ct))),
    ).resolves.toEqual(ss);
    await expect(
      multiDecaps(
        userSecretKeyFromBase64(extractUsk(keys.msk_b64, { ...bob, ts: bob.ts + 1 })),
        parseMkemCiphertext(unhex(entry.ct)),
      ),
    ).rejects.toMatchObject({ code: ErrorCode.WRONG_KEY });
  });

  it("a signing key extracted for Alice's policy carries her identity and signs", () => {
    const key = extractSigningKey(zB64, alice);
    expect(key).toHaveLength(128);
    const parsed = signingKeyFromBase64(key);
    expect(parsed.id).toEqual(signingIdentity(alice));
    const vk = verifyingKeyFromBase64(keys.vk_b64);
    expect(ggSigningKeyMatches(vk, parsed)).toBe(true);
    const t = createShake128().update(new Uint8Array([1, 2, 3]));
    expect(ggVerify(vk, parsed.id, ggSign(parsed, t), t)).toBe(true);
  });

  it('rejects invalid policies with INVALID_POLICY', () => {
    for (const policy of [
      null,
      {},
      { ts: -1, con: [] },
      { ts: 1 },
      { ts: 1, con: [{ v: 'x' }] },
      { ts: 1.5, con: [] },
    ]) {
      expectCode(() => extractUsk(keys.msk_b64, policy), ErrorCode.INVALID_POLICY);
      expectCode(() => extractSigningKey(zB64, policy), ErrorCode.INVALID_POLICY);
    }
  });

  it('rejects malformed master secrets with INVALID_KEY naming the key', () => {
    expectCode(() => extractUsk(keys.msk_b64.slice(4), bob), ErrorCode.INVALID_KEY, /master secret key/);
    expectCode(() => extractUsk(keys.mpk_b64, bob), ErrorCode.INVALID_KEY, /master secret key/);
    const highScalar = Buffer.from(new Uint8Array(512).fill(0xff)).toString('base64');
    expectCode(() => extractUsk(highScalar, bob), ErrorCode.INVALID_KEY, /master secret key.*scalar 0/);
    expectCode(
      () => extractSigningKey(keys.vk_b64.replace('t', '!'), alice),
      ErrorCode.INVALID_KEY,
      /IBS master secret/,
    );
    const highZ = Buffer.from(new Uint8Array(32).fill(0xff)).toString('base64');
    expectCode(() => extractSigningKey(highZ, alice), ErrorCode.INVALID_KEY, /not canonical/);
  });
});

describe('parse caches', () => {
  it('parse each public key string once and return the same object', () => {
    clearKeyCaches();
    expect(masterPublicKeyFromBase64(keys.mpk_b64)).toBe(masterPublicKeyFromBase64(keys.mpk_b64));
    expect(verifyingKeyFromBase64(keys.vk_b64)).toBe(verifyingKeyFromBase64(keys.vk_b64));
  });

  it('never keep a secret: user secret keys and signing keys are parsed afresh every time', () => {
    const usk = userSecretKeyFromBase64(keys.usk.Bob.usk_b64);
    expect(userSecretKeyFromBase64(keys.usk.Bob.usk_b64)).not.toBe(usk);
    expect(userSecretKeyFromBase64(keys.usk.Bob.usk_b64)).toEqual(usk);
    const signing = signingKeyFromBase64(keys.pubSignKey.key);
    expect(signingKeyFromBase64(keys.pubSignKey.key)).not.toBe(signing);
    expect(signingKeyFromBase64(keys.pubSignKey.key)).toEqual(signing);
  });

  it('keep a bounded number of entries, evicting the least recently used', () => {
    clearKeyCaches();
    const others = Array.from({ length: 16 }, () => generateSigningKeys().vk);
    const first = verifyingKeyFromBase64(keys.vk_b64);
    for (const vk of others.slice(0, 7)) verifyingKeyFromBase64(vk); // cache full, first is oldest
    expect(verifyingKeyFromBase64(keys.vk_b64)).toBe(first); // a hit refreshes it
    verifyingKeyFromBase64(others[7]!); // evicts others[0], not first
    expect(verifyingKeyFromBase64(keys.vk_b64)).toBe(first);
    for (const vk of others.slice(8)) verifyingKeyFromBase64(vk);
    expect(verifyingKeyFromBase64(keys.vk_b64)).not.toBe(first);
  });

  const parsers = {
    mpk: [masterPublicKeyFromBase64, 896, /master public key/],
    usk: [userSecretKeyFromBase64, 768, /user secret key/],
    vk: [verifyingKeyFromBase64, 44, /verifying key/],
    signingKey: [signingKeyFromBase64, 128, /signing key/],
  } as const;

  for (const [name, [parse, length, label]] of Object.entries(parsers)) {
    it(`${name}: malformed base64 and wrong lengths → INVALID_KEY naming the key`, () => {
      const valid = 'A'.repeat(length);
      expectCode(() => parse(valid.slice(4)), ErrorCode.INVALID_KEY, new RegExp(`length ${length}`));
      expectCode(() => parse(valid + 'AAAA'), ErrorCode.INVALID_KEY, label);
      expectCode(() => parse(valid.slice(0, -1) + '*'), ErrorCode.INVALID_KEY, /invalid base64 character/);
      expectCode(() => parse(valid.slice(0, -2) + '=='), ErrorCode.INVALID_KEY, label);
      expectCode(() => parse(42), ErrorCode.INVALID_KEY, /base64 string/);
      expectCode(() => parse(undefined), ErrorCode.INVALID_KEY, /base64 string/);
      expectCode(() => parse(valid.slice(4), 'pubSignKey'), ErrorCode.INVALID_KEY, /^pubSignKey: /);
    });

    it(`${name}: arbitrary strings never throw anything but INVALID_KEY`, () => {
      fc.assert(
        fc.property(fc.string({ maxLength: length + 8 }), (s) => {
          try {
            parse(s);
          } catch (e) {
            expect((e as PostGuardError).code).toBe(ErrorCode.INVALID_KEY);
          }
        }),
        { numRuns: 30 },
      );
    });
  }

  it('decoded but invalid keys → INVALID_KEY (all-zero bytes are no valid point encoding)', () => {
    expectCode(() => masterPublicKeyFromBase64('A'.repeat(896)), ErrorCode.INVALID_KEY, /master public key: G1 point/);
    expectCode(() => userSecretKeyFromBase64('A'.repeat(768)), ErrorCode.INVALID_KEY, /user secret key: G2 point/);
    expectCode(() => signingKeyFromBase64('/'.repeat(128)), ErrorCode.INVALID_KEY, /signing key: scalar/);
    // All-zero is y = 0 with gr the identity: a valid encoding, as for dalek.
    expect(signingKeyFromBase64('A'.repeat(128)).id).toEqual(new Uint8Array(32));
    const ff = (n: number) => Buffer.from(new Uint8Array(n).fill(0xff)).toString('base64');
    expectCode(() => verifyingKeyFromBase64(ff(32)), ErrorCode.INVALID_KEY, /verifying key: .*ristretto255/);
    expectCode(() => userSecretKeyFromBase64(ff(576), 'usk'), ErrorCode.INVALID_KEY, /^usk: user secret key: G2 point/);
  });

  it('failures are not cached', () => {
    expect(() => masterPublicKeyFromBase64('A'.repeat(896))).toThrow(InputError);
    expect(() => masterPublicKeyFromBase64('A'.repeat(896))).toThrow(InputError);
  });
});

describe('pg-wasm 0.5.10 accepts keys made here', () => {
  it('seals with our signing key and unseals with our USK', async () => {
    const pg = await loadPgWasm();
    const kem = generateKemKeys();
    const ibs = generateSigningKeys();
    const pubSignKey = { key: extractSigningKey(ibs.sk, alice), policy: alice };
    const plain = new TextEncoder().encode('hello from postguard-ts keys');
    const sealed = await pg.seal(kem.mpk, { policy: { Bob: bob }, pubSignKey }, plain);
    const unsealer = await pg.Unsealer.new(sealed, ibs.vk);
    const [opened, signer] = await unsealer.unseal('Bob', extractUsk(kem.msk, bob));
    expect(opened).toEqual(plain);
    expect(signer).toEqual({ public: alice });
  });
});
