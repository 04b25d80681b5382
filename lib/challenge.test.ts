import { createShake128 } from '#shake';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ggSign } from './crypto/gg.js';
import { signChallenge, verifyChallenge } from './index.js';
import { extractSigningKey, generateSigningKeys, signingKeyFromBase64 } from './keys.js';
import type { Policy } from './policy.js';

const EMAIL = 'pbdf.sidn-pbdf.email.email';
const ibs = generateSigningKeys();
const alice: Policy = { ts: 1_700_000_000, con: [{ t: EMAIL, v: 'alice@example.com' }] };
const bob: Policy = { ts: 1_700_000_000, con: [{ t: EMAIL, v: 'bob@example.com' }] };
const key = extractSigningKey(ibs.sk, alice);
const challenge = crypto.getRandomValues(new Uint8Array(32));

describe('proof of possession (signChallenge / verifyChallenge)', () => {
  it('round trip: a 96-byte signature that verifies for the signer, the context and the challenge', () => {
    const proof = signChallenge(key, 'upload-1', challenge);
    expect(proof).toHaveLength(96);
    expect(verifyChallenge(ibs.vk, alice, 'upload-1', challenge, proof)).toBe(true);
    expect(
      verifyChallenge(
        ibs.vk,
        alice,
        'upload-1',
        challenge,
        signChallenge({ key, policy: alice }, 'upload-1', challenge),
      ),
    ).toBe(true);
  });

  it('a wrong identity, context, challenge, verifying key or signature is false', () => {
    const proof = signChallenge(key, 'upload-1', challenge);
    const other = challenge.slice();
    other[0]! ^= 1;
    expect(verifyChallenge(ibs.vk, bob, 'upload-1', challenge, proof)).toBe(false);
    expect(verifyChallenge(ibs.vk, alice, 'upload-2', challenge, proof)).toBe(false);
    expect(verifyChallenge(ibs.vk, alice, 'upload-1', other, proof)).toBe(false);
    expect(verifyChallenge(generateSigningKeys().vk, alice, 'upload-1', challenge, proof)).toBe(false);
    const flipped = proof.slice();
    flipped[40]! ^= 1;
    expect(verifyChallenge(ibs.vk, alice, 'upload-1', challenge, flipped)).toBe(false);
  });

  it('context and challenge are length-framed: ("ab", "c") never verifies as ("a", "bc")', () => {
    const enc = new TextEncoder();
    const proof = signChallenge(key, 'ab', enc.encode('c'));
    expect(verifyChallenge(ibs.vk, alice, 'ab', enc.encode('c'), proof)).toBe(true);
    expect(verifyChallenge(ibs.vk, alice, 'a', enc.encode('bc'), proof)).toBe(false);
    fc.assert(
      fc.property(fc.string(), fc.string(), fc.integer({ min: 1, max: 5 }), (a, b, cut) => {
        const joined = a + b;
        fc.pre(cut < joined.length && cut !== a.length);
        const p = signChallenge(key, a, enc.encode(b));
        expect(verifyChallenge(ibs.vk, alice, joined.slice(0, cut), enc.encode(joined.slice(cut)), p)).toBe(false);
      }),
      { numRuns: 20 },
    );
  });

  it("a header-style signature over the raw challenge is no proof (the domain prefix is ours, not the caller's)", () => {
    const raw = ggSign(signingKeyFromBase64(key), createShake128().update(challenge));
    expect(verifyChallenge(ibs.vk, alice, '', challenge, raw)).toBe(false);
    expect(verifyChallenge(ibs.vk, alice, 'upload-1', challenge, raw)).toBe(false);
  });

  it("the signer's e-mail in another spelling verifies (the identity is derived canonically)", () => {
    const proof = signChallenge(key, 'upload-1', challenge);
    const spelled: Policy = { ts: alice.ts, con: [{ t: EMAIL, v: ' Alice@Example.COM' }] };
    expect(verifyChallenge(ibs.vk, spelled, 'upload-1', challenge, proof)).toBe(true);
  });

  it('never throws: a policy with no identity, garbage keys and signatures are false', () => {
    const proof = signChallenge(key, 'upload-1', challenge);
    expect(verifyChallenge(ibs.vk, { ts: 1, con: [] }, 'upload-1', challenge, proof)).toBe(false);
    expect(verifyChallenge(ibs.vk, null, 'upload-1', challenge, proof)).toBe(false);
    expect(verifyChallenge('not a key', alice, 'upload-1', challenge, proof)).toBe(false);
    expect(verifyChallenge(ibs.vk, alice, 'upload-1', challenge, new Uint8Array(95))).toBe(false);
    expect(verifyChallenge(ibs.vk, alice, 'upload-1', challenge, 'nope' as unknown as Uint8Array)).toBe(false);
  });
});
