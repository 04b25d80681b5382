import { sha3_256 } from '@noble/hashes/sha3.js';
import { describe, expect, it } from 'vitest';
import { loadPgWasm } from '../test/pgwasm.js';
import { chunkedSource, collector } from '../test/streams.js';
import { fromBase64, toBase64 } from './base64.js';
import { ggKeygen } from './crypto/gg.js';
import { rawPolicyDigest } from './identity.js';
import { StreamUnsealer, Unsealer, seal, sealStream, type Policy, type SealOptions } from './index.js';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from './keys.js';

/**
 * Canonical identities end to end: what a user types seals for the identity a current PKG issues
 * keys for; the header carries the canonical spelling, so PostGuard 0.5.10 (which derives from
 * the header bytes) verifies it too; a key an older PKG issued for a raw spelling still works.
 */

const EMAIL = 'pbdf.sidn-pbdf.email.email';
const kem = generateKemKeys();
const ibs = generateSigningKeys();
const ts = 1_700_000_000;
const typed = (v: string): Policy => ({ ts, con: [{ t: EMAIL, v }] });
const plain = new TextEncoder().encode('canonical identities');

/** A signing key as a PKG before 0.6.5 issued it: for the spelling as written. */
const rawSigningKey = (policy: Policy) =>
  toBase64(ggKeygen(fromBase64(ibs.sk, 'sk', 32), sha3_256(rawPolicyDigest(policy))));

describe('canonical identities through seal and unseal', () => {
  const bobUsk = extractUsk(kem.msk, typed('bob@example.com'));
  const options: SealOptions = {
    policy: { bob: typed('  Bob@Example.COM ') },
    // A current PKG's key for Alice, handed in with the address as the user typed it.
    pubSignKey: { key: extractSigningKey(ibs.sk, typed('alice@example.com')), policy: typed('Alice@Example.com') },
  };

  it("sealed for what the user typed, opened with the canonical identity's key; the header shows the canonical sender", async () => {
    const ct = await seal(kem.mpk, options, plain);
    const u = await Unsealer.new(ct, ibs.vk);
    expect(u.public_identity()).toEqual(typed('alice@example.com'));
    expect(u.inspect_header().get('bob')!.con[0]!.t).toBe(EMAIL);
    const [got, signer] = await u.unseal('bob', bobUsk);
    expect(got).toEqual(plain);
    expect(signer.public).toEqual(typed('alice@example.com'));
  });

  it('pg-wasm 0.5.10 opens it with the same key and verifies the canonical sender (memory and stream)', async () => {
    const pg = await loadPgWasm();
    const ct = await seal(kem.mpk, options, plain);
    const u = await pg.Unsealer.new(ct, ibs.vk);
    const [got, signer] = await u.unseal('bob', bobUsk);
    expect(got).toEqual(plain);
    expect(signer).toEqual({ public: typed('alice@example.com') });

    const out = collector();
    await sealStream(kem.mpk, options, chunkedSource(plain), out.writable);
    const su = await pg.StreamUnsealer.new(chunkedSource(out.bytes()), ibs.vk);
    const sink = collector();
    expect(await su.unseal('bob', bobUsk, sink.writable)).toEqual({ public: typed('alice@example.com') });
    expect(sink.bytes()).toEqual(plain);
  });

  it('a key an older PKG issued for the raw spelling: sealed as written, verified leniently here and by pg-wasm', async () => {
    const raw = typed('Alice@Example.com');
    const old = { policy: { bob: typed('bob@example.com') }, pubSignKey: { key: rawSigningKey(raw), policy: raw } };
    const ct = await seal(kem.mpk, old, plain);
    const u = await Unsealer.new(ct, ibs.vk);
    expect(u.public_identity()).toEqual(raw); // reported as written
    expect((await u.unseal('bob', bobUsk))[1].public).toEqual(raw);
    const pg = await loadPgWasm();
    expect((await (await pg.Unsealer.new(ct, ibs.vk)).unseal('bob', bobUsk))[1]).toEqual({ public: raw });

    const out = collector();
    await sealStream(kem.mpk, old, chunkedSource(plain), out.writable);
    const su = await StreamUnsealer.new(chunkedSource(out.bytes()), ibs.vk);
    expect((await su.unseal('bob', bobUsk, collector().writable)).public).toEqual(raw);
  });

  it('a pg-wasm ciphertext whose header names a raw spelling, signed with that raw key, verifies here', async () => {
    const pg = await loadPgWasm();
    const raw = typed('Alice@Example.com');
    const ct = await pg.seal(
      kem.mpk,
      { policy: { bob: typed('bob@example.com') }, pubSignKey: { key: rawSigningKey(raw), policy: raw } },
      plain,
    );
    const u = await Unsealer.new(ct, ibs.vk);
    expect((await u.unseal('bob', bobUsk))[0]).toEqual(plain);
  });

  it('a key for another identity is still refused', async () => {
    const wrong = {
      policy: { bob: typed('bob@example.com') },
      pubSignKey: { key: extractSigningKey(ibs.sk, typed('eve@example.com')), policy: typed('Alice@Example.com') },
    };
    await expect(seal(kem.mpk, wrong, plain)).rejects.toMatchObject({ code: 'INVALID_KEY' });
  });
});
