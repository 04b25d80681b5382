import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { aesGcmSealPieces } from '#aes';
import { beforeAll, describe, expect, it } from 'vitest';
import { inlineSegmentHasher } from './crypto/segment-hasher.js';
import { prepareSeal, prepareUserSecretKey, type SealOptions } from './index.js';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from './keys.js';
import { encodeSignerBlock } from './payload.js';
import { openRandomAccess, type ByteSource, type RandomAccessFile } from './random-access.js';
import { SEGMENT_OVERHEAD, SegmentSealer, type SegmentOutput } from './segments.js';
import { SIGNATURE_BYTES } from './signatures.js';

/**
 * Random access plans a span as it reads it (issue 30): the heap a span holds before its first
 * byte does not grow with the span, whatever the segment size. The worst case is a large file of
 * tiny segments read from its start, as a media element's `Range: bytes=0-` does: 64 MiB sealed in
 * 256-byte segments is a quarter of a million segments, and planning them all up front held
 * 26.6 MiB of heap before the first byte.
 *
 * Sealing a quarter of a million segments takes a minute (each is signed), and random access reads
 * only the framing, segment 0, the final segment and the runs it is asked for. So the file here is
 * real where it is read: its first 4 MiB sealed by SegmentSealer, its last segments encrypted at
 * their positions by the format's rule (docs/format.md: AES-GCM under IV[0..7] ‖ BE32(counter) ‖
 * final flag, over region ‖ signature; random access checks no signature, so the signatures there
 * are zeros), and a read of the never-sealed middle fails the test.
 */

const TS = 1_700_000_000;
const EMAIL = 'pbdf.sidn-pbdf.email.email';
const alice = { ts: TS, con: [{ t: EMAIL, v: 'alice@example.org' }] };
const bob = { ts: TS, con: [{ t: EMAIL, v: 'bob@example.org' }] };
const kem = generateKemKeys();
const ibs = generateSigningKeys();
const keys = { vk: ibs.vk, recipientId: 'alice', usk: prepareUserSecretKey(extractUsk(kem.msk, alice)) };
const options: SealOptions = {
  policy: { alice },
  pubSignKey: { key: extractSigningKey(ibs.sk, bob), policy: bob },
};

const MiB = 1024 * 1024;
const MESSAGE_BYTES = 64 * MiB;
const SEGMENT = 256;
const WIRE = SEGMENT + SEGMENT_OVERHEAD;
/** The bound issue 30 sets. */
const HEAP_BOUND = 4 * MiB;
/** Segments sealed for real at the start: 4 MiB and some, more than the spans read here. */
const HEAD_SEGMENTS = 16_384 + 1_024;
/** Full segments encrypted at the end, before the final one. */
const TAIL_SEGMENTS = 3;

/** The message's byte at `i`: a pattern, so no copy of 64 MiB is kept to compare with. */
const byteAt = (i: number) => (i * 31 + (i >> 8)) & 255;
const pattern = (from: number, to: number) => Uint8Array.from({ length: to - from }, (_, i) => byteAt(from + i));

const concat = (parts: readonly Uint8Array[]): Uint8Array => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
};
const flat = async (outputs: Promise<SegmentOutput>[]) =>
  concat((await Promise.all(outputs)).flatMap((o) => (o instanceof Uint8Array ? [o] : [...o])));

/** The sparse file described above, as a ByteSource, and the reads it answered. */
async function sparseCiphertext(): Promise<ByteSource> {
  const mode = { type: 'Streaming', segmentSize: SEGMENT, sizeHint: [0n, undefined] } as const;
  const ctx = await prepareSeal(kem.mpk, options, mode);
  const prefix = encodeSignerBlock(ctx.signer.policy, ctx.sender).length;
  const regions = prefix + MESSAGE_BYTES; // the plaintext T of segments.ts: signer block, then the message
  const count = Math.floor(regions / SEGMENT) + 1; // full regions, then the final one (possibly empty)
  const tailStart = count - 1 - TAIL_SEGMENTS;

  const sealer = new SegmentSealer({ ...ctx, hasher: inlineSegmentHasher(ctx.transcript) }, SEGMENT);
  const head = await flat(sealer.push(pattern(0, HEAD_SEGMENTS * SEGMENT - prefix)));
  expect(head.length).toBe(HEAD_SEGMENTS * WIRE);

  const tailParts: Uint8Array[] = [];
  for (let index = tailStart; index < count; index++) {
    const final = index === count - 1;
    const from = index * SEGMENT - prefix;
    const region = pattern(from, final ? MESSAGE_BYTES : from + SEGMENT);
    const nonce = new Uint8Array(12);
    nonce.set(ctx.iv.subarray(0, 7));
    new DataView(nonce.buffer).setUint32(7, index);
    nonce[11] = final ? 1 : 0;
    tailParts.push(concat(await aesGcmSealPieces(ctx.key, nonce, concat([region, new Uint8Array(SIGNATURE_BYTES)]))));
  }
  const tail = concat(tailParts);

  const frame = ctx.frame;
  const tailAt = frame.length + tailStart * WIRE;
  const headEnd = frame.length + head.length;
  return {
    size: tailAt + tail.length,
    async read(offset, length) {
      const end = offset + length;
      if (end <= frame.length) return frame.slice(offset, end);
      if (offset >= frame.length && end <= headEnd) return head.slice(offset - frame.length, end - frame.length);
      if (offset >= tailAt) return tail.slice(offset - tailAt, end - tailAt);
      throw new Error(`bytes ${offset}-${end - 1} were read: the middle of the file is never sealed`);
    },
  };
}

/** A full collection, for measuring what is live (vitest's forks run without --expose-gc). */
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const liveHeap = (): number => {
  gc();
  gc();
  return getHeapStatistics().used_heap_size;
};

let file: RandomAccessFile;

beforeAll(async () => {
  file = await openRandomAccess(await sparseCiphertext(), keys);
});

describe('random access on 64 MiB sealed in 256-byte segments', () => {
  it('holds at most 4 MiB more heap at the first byte of the whole span than before it', async () => {
    expect(file.size).toBe(MESSAGE_BYTES);
    const before = liveHeap();
    const parts = file.range(0);
    const first = await parts.next();
    const grown = liveHeap() - before;
    console.log(`heap at the first byte of bytes=0- (64 MiB, 256-byte segments): +${(grown / MiB).toFixed(2)} MiB`);
    expect(first.done).toBe(false);
    const piece = first.value as Uint8Array;
    expect(piece.length).toBeGreaterThan(0);
    expect(Array.from(piece.subarray(0, 64))).toEqual(Array.from({ length: 64 }, (_, i) => byteAt(i)));
    expect(grown).toBeLessThanOrEqual(HEAP_BOUND);
    await parts.return();
  });

  it('reads a whole 4 MiB span at the same bound, byte for byte, the next run read ahead as it goes', async () => {
    const start = 17;
    const end = start + 4 * MiB;
    const before = liveHeap();
    let peak = 0;
    let at = start;
    let mismatches = 0;
    let count = 0;
    for await (const piece of file.range(start, end)) {
      for (let i = 0; i < piece.length; i++) if (piece[i] !== byteAt(at + i)) mismatches++;
      at += piece.length;
      // Sampled every 1024 pieces: a full collection per piece would take minutes.
      if (++count % 1024 === 0) peak = Math.max(peak, liveHeap() - before);
    }
    console.log(`heap while reading 4 MiB of it: peak +${(peak / MiB).toFixed(2)} MiB over ${count} pieces`);
    expect(at).toBe(end);
    expect(mismatches).toBe(0);
    expect(peak).toBeLessThanOrEqual(HEAP_BOUND);
  });
});
