import { describe, expect, it } from 'vitest';
import { chunkedSource, collector } from '../test/streams.js';
import { splitFrame } from './frame.js';
import { DEFAULT_SEGMENT_SIZE, sealStream, type SealOptions } from './index.js';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from './keys.js';
import { decodeSignerBlock } from './payload.js';
import { SEGMENT_OVERHEAD, openSegmentAlone } from './segments.js';
import { openSegmentAccess } from './unseal.js';

/**
 * Random access (the service worker's Range requests): a segment opened on its own authenticates
 * at its own position only. What the worker builds on it is tested in worker/sw-core.test.ts.
 */

const TS = 1_700_000_000;
const EMAIL = 'pbdf.sidn-pbdf.email.email';

describe('openSegmentAccess + openSegmentAlone', () => {
  it('open any segment alone, and only at its own position and with its own final flag', async () => {
    const kem = generateKemKeys();
    const ibs = generateSigningKeys();
    const alice = { ts: TS, con: [{ t: EMAIL, v: 'alice@example.org' }] };
    const sender = { ts: TS, con: [{ t: EMAIL, v: 'bob@example.org' }] };
    const options: SealOptions = {
      policy: { alice },
      pubSignKey: { key: extractSigningKey(ibs.sk, sender), policy: sender },
    };
    const plain = Uint8Array.from({ length: 2 * DEFAULT_SEGMENT_SIZE + 777 }, (_, i) => (i * 7) & 255);
    const out = collector();
    await sealStream(kem.mpk, options, chunkedSource(plain), out.writable);
    const { header, signature, payload } = splitFrame(out.bytes());

    const access = await openSegmentAccess(header, signature, ibs.vk, 'alice', extractUsk(kem.msk, alice));
    expect(access.segmentSize).toBe(DEFAULT_SEGMENT_SIZE);
    expect(access.publicPolicy).toMatchObject(sender);
    const wire = DEFAULT_SEGMENT_SIZE + SEGMENT_OVERHEAD;
    const segment = (i: number) => payload.subarray(i * wire, Math.min(payload.length, (i + 1) * wire));
    const open = (i: number, sealed = segment(i), final = i === 2) =>
      openSegmentAlone(access.key, access.iv, i, final, sealed);

    // Segment 0 starts with the signer block; the rest is the message, in order.
    const first = await open(0);
    const { length: prefix } = decodeSignerBlock(first);
    const regions = [first.subarray(prefix), await open(1), await open(2)];
    expect(Buffer.concat(regions).equals(plain)).toBe(true);

    await expect(open(1, segment(2), false)).rejects.toMatchObject({ code: 'TAMPERED' }); // moved
    await expect(open(1, segment(1), true)).rejects.toMatchObject({ code: 'TAMPERED' }); // marked final
    await expect(open(2, segment(2), false)).rejects.toMatchObject({ code: 'TAMPERED' }); // final flag dropped
    await expect(open(2, segment(2).subarray(0, 50))).rejects.toMatchObject({ code: 'TAMPERED' }); // shorter than a tag
    await expect(
      openSegmentAccess(header, signature, ibs.vk, 'mallory', extractUsk(kem.msk, alice)),
    ).rejects.toMatchObject({ code: 'UNKNOWN_RECIPIENT' });
  });
});
