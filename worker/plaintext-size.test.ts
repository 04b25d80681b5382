import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_SEGMENT_SIZE, StreamUnsealer, seal, sealStream, type SealOptions } from '../lib/index.js';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from '../lib/keys.js';
import { SEGMENT_OVERHEAD } from '../lib/segments.js';
import { chunkedSource, collector } from '../test/streams.js';
import { streamingPlaintextSize } from '../lib/segment-map.js';
import { FramingSniffer } from './plaintext-size.js';

/** Content-Length from ciphertext size: checked against real streaming ciphertexts of many sizes. */

const TS = 1_700_000_000;
const ALICE = 'alice@example.org';
const EMAIL = 'pbdf.sidn-pbdf.email.email';
const SEG = DEFAULT_SEGMENT_SIZE;

let mpk: string;
let vk: string;
let usk: string;
let plainOptions: SealOptions;
let privateOptions: SealOptions;

beforeAll(() => {
  const kem = generateKemKeys();
  const ibs = generateSigningKeys();
  mpk = kem.mpk;
  vk = ibs.vk;
  const alice = { ts: TS, con: [{ t: EMAIL, v: ALICE }] };
  usk = extractUsk(kem.msk, alice);
  const pub = { ts: TS, con: [{ t: EMAIL, v: 'bob@example.org' }] };
  // A long private policy makes the encrypted prefix long.
  const priv = { ts: TS, con: [{ t: 'pbdf.gemeente.personalData.fullname', v: 'B'.repeat(5000) }] };
  plainOptions = { policy: { [ALICE]: alice }, pubSignKey: { key: extractSigningKey(ibs.sk, pub), policy: pub } };
  privateOptions = { ...plainOptions, privSignKey: { key: extractSigningKey(ibs.sk, priv), policy: priv } };
});

async function measure(size: number, options: SealOptions) {
  const plain = new Uint8Array(size).fill(7);
  const sealed = collector();
  await sealStream(mpk, options, chunkedSource(plain), sealed.writable);
  const ct = sealed.bytes();
  const opened = collector();
  await (await StreamUnsealer.new(chunkedSource(ct), vk)).unseal(ALICE, usk, opened.writable);
  const sniffer = new FramingSniffer();
  for (let i = 0; i < Math.min(ct.length, 20_000); i += 997) sniffer.push(ct.subarray(i, i + 997));
  const framing = sniffer.framing;
  if (!framing) throw new Error('no framing');
  return {
    ct,
    framing,
    first: opened.chunks[0]?.length,
    computed: streamingPlaintextSize(ct.length, framing, opened.chunks[0]?.length),
  };
}

describe('streamingPlaintextSize', () => {
  it.each([0, 1, 1000, SEG - 200, SEG - 60, SEG - 59, SEG - 58, SEG, SEG + 1, 2 * SEG - 60, 3 * SEG + 17])(
    'is exact for %i bytes (public signer)',
    async (size) => {
      expect((await measure(size, plainOptions)).computed).toBe(size);
    },
  );

  it.each([0, 1, SEG - 5100, SEG - 5000, SEG, 2 * SEG + 3])(
    'is exact for %i bytes (long private signer policy)',
    async (size) => {
      expect((await measure(size, privateOptions)).computed).toBe(size);
    },
  );

  it('is exact for random sizes', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 3 * SEG }), fc.boolean(), async (size, priv) => {
        expect((await measure(size, priv ? privateOptions : plainOptions)).computed).toBe(size);
      }),
      { numRuns: 8 },
    );
  });

  it('gives no length when the numbers cannot come from a sealer', async () => {
    const { ct, framing, first } = await measure(SEG + 100, plainOptions);
    const wire = SEG + SEGMENT_OVERHEAD;
    // A payload too short for the final segment's overhead.
    expect(streamingPlaintextSize(framing.framingBytes + 10, framing, undefined)).toBeUndefined();
    // Sizes that leave the final segment without room for its overhead.
    expect(streamingPlaintextSize(framing.framingBytes + wire, framing, first)).toBeUndefined();
    expect(streamingPlaintextSize(framing.framingBytes + wire + SEGMENT_OVERHEAD - 1, framing, first)).toBeUndefined();
    // One full segment and an empty final one: the message is just segment 0's part.
    expect(streamingPlaintextSize(framing.framingBytes + wire + SEGMENT_OVERHEAD, framing, first)).toBe(first);
    // A first write longer than a segment's data region.
    expect(streamingPlaintextSize(ct.length, framing, SEG)).toBeUndefined();
    expect(streamingPlaintextSize(Number.NaN, framing, first)).toBeUndefined();
  });
});

describe('FramingSniffer', () => {
  it('learns the framing one byte at a time and stops keeping bytes', async () => {
    const { ct, framing } = await measure(10, plainOptions);
    const sniffer = new FramingSniffer();
    for (let i = 0; i < framing.framingBytes + 5; i++) sniffer.push(ct.subarray(i, i + 1));
    expect(sniffer.framing).toEqual(framing);
    expect(framing.segmentSize).toBe(SEG);
  });

  it('learns nothing from what it cannot measure', async () => {
    const garbage = new FramingSniffer();
    garbage.push(new Uint8Array(100));
    expect(garbage.framing).toBeNull();
    const memory = new FramingSniffer();
    memory.push(await seal(mpk, plainOptions, new Uint8Array(5)));
    expect(memory.framing).toBeNull();
    const short = new FramingSniffer();
    short.push(new Uint8Array([0x14, 0x8a, 0x8e]));
    expect(short.framing).toBeUndefined();
  });
});
