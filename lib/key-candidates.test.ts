import { describe, expect, it } from 'vitest';
import { chunkedSource, collector } from '../test/streams.js';
import { inspectCiphertext, userKeyForInspection } from './detached.js';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from './keys.js';
import type { KeyCandidate } from './key-candidates.js';
import { seal, sealStream } from './seal.js';
import { StreamUnsealer, Unsealer } from './unseal.js';

/**
 * A PKG's key set on the readers' side (lib/key-candidates.ts through unseal.ts and detached.ts):
 * the user key and the verifying key that open a file are found among candidates, every other
 * candidate is passed over, and each rule has its refusal.
 */

const TS = 1_700_000_000;
const EMAIL = 'pbdf.sidn-pbdf.email.email';
const bob = { ts: TS, con: [{ t: EMAIL, v: 'bob@example.com' }] };
const alice = { ts: TS, con: [{ t: EMAIL, v: 'alice@example.com' }] };
const plain = new TextEncoder().encode('under the old key');

// Key A sealed and signed the file; key B is the newer one.
const kemA = generateKemKeys();
const kemB = generateKemKeys();
const ibsA = generateSigningKeys();
const ibsB = generateSigningKeys();
const options = {
  policy: { bob: bob },
  pubSignKey: { key: extractSigningKey(ibsA.sk, alice), policy: alice },
};
const ct = await seal(kemA.mpk, options, plain);
const out = collector();
await sealStream(kemA.mpk, options, chunkedSource(plain), out.writable);
const streamCt = out.bytes();

const usk = (msk: string, id: string): KeyCandidate => ({ id, key: extractUsk(msk, bob) });
// Ids are the PKG's business (server/keyset.ts); here any name does.
const ids = new Map<string, string>();
const keyIdOf = (key: string) => ids.get(key) ?? (ids.set(key, `vk${ids.size}`), `vk${ids.size - 1}`);
const vk = (key: string, status: KeyCandidate['status']): KeyCandidate => ({ id: keyIdOf(key), key, status });
const usks = [usk(kemB.msk, 'b'), usk(kemA.msk, 'a')];
const current = [vk(ibsB.vk, 'primary'), vk(ibsA.vk, 'decrypt-only')];

describe('candidates from a key set', () => {
  it('open a file under the older key, in memory and streaming, and name both keys', async () => {
    const [got, result] = await (await Unsealer.new(ct, current)).unseal('bob', usks);
    expect(got).toEqual(plain);
    expect(result.keyIds).toEqual({ userKey: 'a', verifyingKey: keyIdOf(ibsA.vk) });
    const s = await StreamUnsealer.new(chunkedSource(streamCt), current);
    const sink = collector();
    expect((await s.unseal('bob', usks, sink.writable)).keyIds).toEqual({
      userKey: 'a',
      verifyingKey: keyIdOf(ibsA.vk),
    });
    expect(sink.bytes()).toEqual(plain);
    // One key, as before: pg-wasm's result shape, no keyIds.
    const [, single] = await (await Unsealer.new(ct, ibsA.vk)).unseal('bob', usks[1]!.key);
    expect(single).not.toHaveProperty('keyIds');
  });

  it('none opens: WRONG_KEY, as one key would give it, and the stream source is left for another try', async () => {
    const wrong = [usk(kemB.msk, 'b'), usk(generateKemKeys().msk, 'c')];
    await expect((await Unsealer.new(ct, current)).unseal('bob', wrong)).rejects.toMatchObject({ code: 'WRONG_KEY' });
    const s = await StreamUnsealer.new(chunkedSource(streamCt), current);
    await expect(s.unseal('bob', wrong, collector().writable)).rejects.toMatchObject({ code: 'WRONG_KEY' });
    const sink = collector();
    await s.unseal('bob', usks, sink.writable);
    expect(sink.bytes()).toEqual(plain);
  });

  it('a header that verifies only under a retired key is NO_MATCHING_KEY; under none, BAD_SIGNATURE', async () => {
    const retiredA = [vk(ibsB.vk, 'primary'), vk(ibsA.vk, 'retired')];
    await expect(Unsealer.new(ct, retiredA)).rejects.toMatchObject({
      code: 'NO_MATCHING_KEY',
      message: expect.stringContaining(keyIdOf(ibsA.vk)),
    });
    await expect(StreamUnsealer.new(chunkedSource(streamCt), retiredA)).rejects.toMatchObject({
      code: 'NO_MATCHING_KEY',
    });
    await expect(Unsealer.new(ct, [vk(ibsB.vk, 'primary')])).rejects.toMatchObject({ code: 'BAD_SIGNATURE' });
    // A changed header is BAD_SIGNATURE under every key, retired ones included: never "retired".
    const changed = ct.slice();
    changed[40]! ^= 1;
    await expect(Unsealer.new(changed, [...current, vk(generateSigningKeys().vk, 'retired')])).rejects.toMatchObject({
      code: 'BAD_SIGNATURE',
    });
    // Only retired keys: nothing current verifies anything.
    await expect(Unsealer.new(ct, [vk(ibsA.vk, 'retired')])).rejects.toMatchObject({ code: 'NO_MATCHING_KEY' });
  });

  it('refuses an empty list and malformed entries; a candidate that does not decode stops the search', async () => {
    await expect(Unsealer.new(ct, [])).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    await expect(Unsealer.new(ct, [{ id: 1, key: ibsA.vk }] as never)).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    const u = await Unsealer.new(ct, current);
    await expect(u.unseal('bob', [])).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    await expect(u.unseal('bob', [{ id: 'x', key: 'not base64' }, usks[1]!])).rejects.toMatchObject({
      code: 'INVALID_KEY',
    });
  });

  it('userKeyForInspection finds the user key from the header alone', async () => {
    const inspection = await inspectCiphertext(streamCt, { vk: current });
    expect(inspection.verifyingKeyId).toBe(keyIdOf(ibsA.vk));
    expect(await userKeyForInspection(inspection, 'bob', usks)).toBe(usks[1]);
    await expect(userKeyForInspection(inspection, 'bob', [usks[0]!, usk(kemB.msk, 'b2')])).rejects.toMatchObject({
      code: 'WRONG_KEY',
    });
    await expect(userKeyForInspection({ ...inspection }, 'bob', usks)).rejects.toMatchObject({
      code: 'INVALID_INPUT',
    });
  });
});
