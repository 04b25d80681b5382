import { createShake128 } from '#shake';
import { describe, expect, it } from 'vitest';
import { loadPgWasm } from '../test/pgwasm.js';
import { chunkedSource, collector } from '../test/streams.js';
import { encodeFrame, splitFrame } from './frame.js';
import { StreamUnsealer, Unsealer, seal, sealStream, type Policy, type SealOptions } from './index.js';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys, signingKeyFromBase64 } from './keys.js';
import {
  decodeMemoryPayload,
  decodeSignerBlock,
  encodeMemoryPayload,
  encodeSignerBlock,
  senderBound,
} from './payload.js';
import { encodeSignatureExt, signTranscript } from './signatures.js';

/**
 * The sender bound inside the encryption (pg-core 0.6.4, upstream #338): the header's signature
 * sits outside the AEAD, so anyone with a signing key of the same PKG can re-sign the same header
 * bytes as themselves. The copy of the public sender inside the payload makes that visible.
 */

const EMAIL = 'pbdf.sidn-pbdf.email.email';
const kem = generateKemKeys();
const ibs = generateSigningKeys();
const ts = 1_700_000_000;
const who = (v: string): Policy => ({ ts, con: [{ t: EMAIL, v }] });
const alice = who('alice@example.com');
const mallory = who('mallory@example.com');
const bob = who('bob@example.com');
const bobUsk = extractUsk(kem.msk, bob);
const options: SealOptions = { policy: { bob }, pubSignKey: { key: extractSigningKey(ibs.sk, alice), policy: alice } };
const plain = new TextEncoder().encode('signed by alice');

/** The same header bytes and payload, the header signature replaced by Mallory's (same PKG). */
function resignedByMallory(ct: Uint8Array): Uint8Array {
  const { header, payload } = splitFrame(ct);
  const signer = { key: signingKeyFromBase64(extractSigningKey(ibs.sk, mallory)), policy: mallory };
  const signature = encodeSignatureExt(signTranscript(signer, createShake128().update(header)), mallory);
  const frame = encodeFrame(header, signature);
  const out = new Uint8Array(frame.length + payload.length);
  out.set(frame);
  out.set(payload, frame.length);
  return out;
}

async function streamSealed(): Promise<Uint8Array> {
  const out = collector();
  await sealStream(kem.mpk, options, chunkedSource(new Uint8Array(300_000).fill(7)), out.writable);
  return out.bytes();
}

describe('the sender copy inside the encryption', () => {
  it('our files open bound (memory and stream)', async () => {
    const [, memory] = await (await Unsealer.new(await seal(kem.mpk, options, plain), ibs.vk)).unseal('bob', bobUsk);
    expect(memory).toEqual({ public: alice, contentSigner: 'public', bound: true });
    const su = await StreamUnsealer.new(chunkedSource(await streamSealed()), ibs.vk);
    expect(await su.unseal('bob', bobUsk, collector().writable)).toEqual({
      public: alice,
      contentSigner: 'public',
      bound: true,
    });
  });

  it('a header re-signed by another key of the same PKG: pg-wasm 0.5.10 is fooled, we refuse with SENDER_MISMATCH', async () => {
    const forged = resignedByMallory(await seal(kem.mpk, options, plain));
    const pg = await loadPgWasm();
    const [, fooled] = await (await pg.Unsealer.new(forged, ibs.vk)).unseal('bob', bobUsk);
    expect(fooled).toMatchObject({ public: mallory }); // Mallory shown as the public sender

    const u = await Unsealer.new(forged, ibs.vk);
    expect(u.public_identity()).toEqual(mallory); // before decryption the header's sender is only a claim
    await expect(u.unseal('bob', bobUsk)).rejects.toMatchObject({ code: 'SENDER_MISMATCH' });
  });

  it('the same for a stream: refused, and the sink is aborted', async () => {
    const forged = resignedByMallory(await streamSealed());
    const su = await StreamUnsealer.new(chunkedSource(forged), ibs.vk);
    const sink = collector();
    await expect(su.unseal('bob', bobUsk, sink.writable)).rejects.toMatchObject({ code: 'SENDER_MISMATCH' });
    expect(sink.state()).toBe('aborted');
  });

  it('layouts: 0.5.10 fields first, the copy after; absent means an older sealer; a different copy is refused', () => {
    const inner = encodeMemoryPayload(plain, new Uint8Array(96), alice, alice);
    expect(decodeMemoryPayload(inner)).toMatchObject({ message: plain, signer: alice, senderCopy: alice });
    const old = inner.subarray(0, inner.length - (inner.length - 8 - plain.length - 96) / 2);
    expect(decodeMemoryPayload(old).senderCopy).toBeUndefined();

    const block = encodeSignerBlock(bob, alice);
    const decoded = decodeSignerBlock(block);
    expect(decoded).toMatchObject({ signer: bob, senderCopy: alice, length: block.length });
    expect(new DataView(block.buffer).getUint32(0)).toBe(block.length - 4);

    expect(senderBound(undefined, alice)).toBe(false);
    expect(senderBound(alice, alice)).toBe(true);
    expect(() => senderBound(mallory, alice)).toThrow(expect.objectContaining({ code: 'SENDER_MISMATCH' }));
  });
});
