import { beforeAll, describe, expect, it } from 'vitest';
import { expectSameBytes } from '../test/bytes.js';
import { chunkedSource, collector } from '../test/streams.js';
import { DEFAULT_SEGMENT_SIZE } from './header.js';
import { sealStream, type SealOptions } from './seal.js';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from './keys.js';
import { StreamUnsealer } from './unseal.js';
import { splitFrame } from './frame.js';
import { segmentLayout, totalRegionBytes } from './segment-map.js';

/**
 * StreamUnsealer.reopen: the second reading of bytes a first `open` authenticated in full (the
 * service worker's Blob, read twice under verifyFirst). It decrypts only, so what it must still
 * refuse is everything that is not those very bytes: another header, a changed or moved segment,
 * a cut.
 */

const EMAIL = 'pbdf.sidn-pbdf.email.email';
const alice = { ts: 1_700_000_000, con: [{ t: EMAIL, v: 'alice@example.org' }] };
const bob = { ts: 1_700_000_000, con: [{ t: EMAIL, v: 'bob@example.org' }] };
let vk: string;
let usk: string;
let options: SealOptions;
let plain: Uint8Array;
let ciphertext: Uint8Array;

async function sealed(bytes: Uint8Array): Promise<Uint8Array> {
  const out = collector();
  await sealStream(kemMpk, options, chunkedSource(bytes, 50_000), out.writable);
  return out.bytes();
}
let kemMpk: string;

beforeAll(async () => {
  const kem = generateKemKeys();
  const ibs = generateSigningKeys();
  kemMpk = kem.mpk;
  vk = ibs.vk;
  usk = extractUsk(kem.msk, alice);
  options = { policy: { alice }, pubSignKey: { key: extractSigningKey(ibs.sk, bob), policy: bob } };
  plain = Uint8Array.from({ length: 3 * DEFAULT_SEGMENT_SIZE + 777 }, (_, i) => (i * 7 + 3) & 255);
  ciphertext = await sealed(plain);
});

/** A first reading, authenticated in full: its unsealer and verdict. */
async function firstReading(bytes: Uint8Array) {
  const unsealer = await StreamUnsealer.new(chunkedSource(bytes, 64_000), vk, { size: bytes.length });
  const out = collector();
  const result = await unsealer.unseal('alice', usk, out.writable);
  return { unsealer, result };
}

async function secondReading(bytes: Uint8Array, earlier: Awaited<ReturnType<typeof firstReading>>) {
  const unsealer = await StreamUnsealer.new(chunkedSource(bytes, 64_000), vk, { size: bytes.length });
  const opened = await unsealer.reopen('alice', usk, earlier);
  const out = collector();
  await opened.readable.pipeTo(out.writable);
  return { bytes: out.bytes(), size: opened.size, result: await opened.result };
}

describe('StreamUnsealer.reopen', () => {
  it('gives the same plaintext, its exact size and the first reading’s verdict', async () => {
    const earlier = await firstReading(ciphertext);
    const again = await secondReading(ciphertext, earlier);
    expectSameBytes(again.bytes, plain);
    expect(again.size).toBe(plain.length);
    expect(again.result).toBe(earlier.result);
  });

  it('refuses another file’s header (the same sender, the same length) before any byte', async () => {
    const earlier = await firstReading(ciphertext);
    const other = await sealed(plain);
    expect(other.length).toBe(ciphertext.length);
    await expect(secondReading(other, earlier)).rejects.toMatchObject({ code: 'TAMPERED' });
  });

  it('refuses a changed, a swapped or a cut segment', async () => {
    const earlier = await firstReading(ciphertext);
    const framing = splitFrame(ciphertext).framingBytes;
    const wire = DEFAULT_SEGMENT_SIZE + 112;
    // One bit in segment 1.
    const changed = ciphertext.slice();
    changed[framing + wire + 100]! ^= 1;
    // Segments 1 and 2 swapped.
    const swapped = ciphertext.slice();
    swapped.set(ciphertext.subarray(framing + 2 * wire, framing + 3 * wire), framing + wire);
    swapped.set(ciphertext.subarray(framing + wire, framing + 2 * wire), framing + 2 * wire);
    for (const bytes of [changed, swapped]) {
      const again = secondReading(bytes, earlier);
      await expect(again).rejects.toMatchObject({ code: 'TAMPERED' });
    }
    // Cut at a segment boundary: the size given says it is not a whole ciphertext.
    const cut = ciphertext.subarray(0, framing + 3 * wire);
    await expect(secondReading(cut, earlier)).rejects.toMatchObject({
      code: expect.stringMatching(/^(TAMPERED|TRUNCATED)$/) as unknown,
    });
  });
});

/**
 * StreamUnsealer.resume: the same second reading, after plaintext the first reading kept (the
 * service worker sends that and decrypts only the rest of its Blob, from a slice).
 */
describe('StreamUnsealer.resume', () => {
  const WIRE = DEFAULT_SEGMENT_SIZE + 112;
  /** The message bytes of segments 0..n-1: segment 0 begins with the signer block, which is not message. */
  const keptThrough = (n: number) => {
    const framing = splitFrame(ciphertext).framingBytes;
    const layout = segmentLayout(ciphertext.length, framing, DEFAULT_SEGMENT_SIZE)!;
    const signerBlock = totalRegionBytes(layout) - plain.length;
    return n * DEFAULT_SEGMENT_SIZE - signerBlock;
  };
  const rest = async (unsealer: StreamUnsealer, from: Uint8Array, skip: number) => {
    const opened = unsealer.resume(chunkedSource(from, 64_000), skip);
    const out = collector();
    await opened.readable.pipeTo(out.writable);
    return { bytes: out.bytes(), size: opened.size, result: await opened.result };
  };

  it('gives the plaintext after the bytes kept, from the segment that follows them, with the verdict', async () => {
    const { unsealer, result } = await firstReading(ciphertext);
    const framing = splitFrame(ciphertext).framingBytes;
    for (const segment of [1, 2, 3]) {
      const skip = keptThrough(segment);
      expect(unsealer.resumeOffset(skip)).toBe(framing + segment * WIRE);
      const again = await rest(unsealer, ciphertext.subarray(framing + segment * WIRE), skip);
      expectSameBytes(again.bytes, plain.subarray(skip));
      expect(again.size).toBe(plain.length - skip);
      expect(again.result).toBe(result);
    }
  });

  it('refuses a point inside a segment, and an unsealer whose reading did not verify the whole file', async () => {
    const { unsealer } = await firstReading(ciphertext);
    const invalidState = expect.objectContaining({ code: 'INVALID_STATE' }) as Error;
    expect(() => unsealer.resumeOffset(keptThrough(1) + 1000)).toThrow(invalidState);
    expect(() => unsealer.resumeOffset(0)).toThrow(invalidState);
    const unread = await StreamUnsealer.new(chunkedSource(ciphertext, 64_000), vk, { size: ciphertext.length });
    const opened = await unread.open('alice', usk);
    expect(() => unread.resumeOffset(keptThrough(1))).toThrow(invalidState);
    await opened.readable.cancel();
  });

  it('refuses a segment that is not the one verified there: changed, or from elsewhere in the file', async () => {
    const { unsealer } = await firstReading(ciphertext);
    const skip = keptThrough(1);
    const offset = unsealer.resumeOffset(skip);
    const changed = ciphertext.slice(offset);
    changed[100]! ^= 1;
    // Segment 2 where segment 1 should be.
    const moved = ciphertext.slice(offset + WIRE);
    for (const bytes of [changed, moved]) {
      await expect(rest(unsealer, bytes, skip)).rejects.toMatchObject({ code: 'TAMPERED' });
    }
  });
});
