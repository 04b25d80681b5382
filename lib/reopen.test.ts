import { beforeAll, describe, expect, it } from 'vitest';
import { expectSameBytes } from '../test/bytes.js';
import { chunkedSource, collector } from '../test/streams.js';
import { DEFAULT_SEGMENT_SIZE } from './header.js';
import { sealStream, type SealOptions } from './seal.js';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from './keys.js';
import { StreamUnsealer } from './unseal.js';
import { splitFrame } from './frame.js';

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
