import { GCM_TAG_BYTES } from './crypto/aes.js';
import type { FrameParts } from './frame.js';
import { checkedSegmentSize, decodeHeader } from './header.js';
import { SEGMENT_OVERHEAD } from './segments.js';
import { SIGNATURE_BYTES } from './signatures.js';

/**
 * Where a plaintext byte lives in a streaming ciphertext, and how long the message is: pure
 * arithmetic over the fixed layout, no I/O: the opener's exact size (messageBytes), a stated size
 * checked against the layout (plaintextSize), and the segments a plaintext range needs (rangePieces).
 *
 *   ciphertext = framing ‖ segment 0 ‖ … ‖ segment n−1 (final)
 *   segment i  = AES-GCM(region i ‖ signature): region + SEGMENT_OVERHEAD bytes on the wire
 *   regions    = BE32(len P) ‖ P ‖ message, cut into `segmentSize` pieces; the final region holds
 *                what is left (0 to segmentSize − 1 bytes, or a whole one in an empty-final file)
 *
 * The prefix (the signer block, BE32(len P) ‖ P) is encrypted, so its length is learnt by opening
 * segment 0; everything else follows from the ciphertext's size.
 */

export interface SegmentLayout {
  /** Bytes before segment 0. */
  framingBytes: number;
  /** Region bytes of a full segment. */
  segmentSize: number;
  /** Segments, the final one included (at least 1). */
  count: number;
  /** Region bytes of the final segment. */
  finalRegionBytes: number;
}

/** The layout of a ciphertext of `ciphertextBytes`; undefined when no sealer writes that size. */
export function segmentLayout(
  ciphertextBytes: number,
  framingBytes: number,
  segmentSize: number,
): SegmentLayout | undefined {
  const payload = ciphertextBytes - framingBytes;
  if (
    !Number.isSafeInteger(payload) ||
    payload < SEGMENT_OVERHEAD ||
    !Number.isSafeInteger(segmentSize) ||
    segmentSize < 1
  )
    return undefined;
  const wire = segmentSize + SEGMENT_OVERHEAD;
  const full = Math.floor(payload / wire);
  const last = payload - full * wire;
  // The final segment always exists and carries the overhead: a remainder smaller than that is a
  // cut, not a file. (A remainder of exactly the overhead is an empty final segment.)
  if (last < SEGMENT_OVERHEAD) return undefined;
  return { framingBytes, segmentSize, count: full + 1, finalRegionBytes: last - SEGMENT_OVERHEAD };
}

export const isFinal = (layout: SegmentLayout, index: number): boolean => index === layout.count - 1;

/** Region bytes of segment `index`. */
export const regionBytes = (layout: SegmentLayout, index: number): number =>
  isFinal(layout, index) ? layout.finalRegionBytes : layout.segmentSize;

/** Where segment `index` sits in the ciphertext. */
export function wireSpan(layout: SegmentLayout, index: number): { offset: number; length: number } {
  return {
    offset: layout.framingBytes + index * (layout.segmentSize + SEGMENT_OVERHEAD),
    length: regionBytes(layout, index) + SEGMENT_OVERHEAD,
  };
}

/** All region bytes together (prefix and message). */
export const totalRegionBytes = (layout: SegmentLayout): number =>
  (layout.count - 1) * layout.segmentSize + layout.finalRegionBytes;

/**
 * The message's length, given the prefix length that segment 0 revealed; undefined when the prefix
 * does not fit in segment 0's region.
 */
export function messageBytes(layout: SegmentLayout, prefixBytes: number): number | undefined {
  if (!Number.isSafeInteger(prefixBytes) || prefixBytes < 0 || prefixBytes > regionBytes(layout, 0)) return undefined;
  return totalRegionBytes(layout) - prefixBytes;
}

/** The bytes of one segment's region that a message range needs: region[from, to). */
export interface SegmentPiece {
  index: number;
  from: number;
  to: number;
}

/**
 * The segments that hold message bytes `start..end` (inclusive, within the message), in order,
 * each with the part of its region that belongs to the range.
 */
export function* rangePieces(
  layout: SegmentLayout,
  prefixBytes: number,
  start: number,
  end: number,
): Generator<SegmentPiece> {
  const total = messageBytes(layout, prefixBytes);
  if (
    total === undefined ||
    !(Number.isSafeInteger(start) && Number.isSafeInteger(end)) ||
    start < 0 ||
    end < start ||
    end >= total
  ) {
    throw new RangeError(`bytes ${start}-${end} are not within a message of ${total ?? '?'} bytes`);
  }
  // Offsets in the concatenated regions: the message starts after the prefix.
  const first = start + prefixBytes;
  const last = end + prefixBytes;
  const size = layout.segmentSize;
  for (let index = Math.floor(first / size); index <= Math.floor(last / size); index++) {
    const base = index * size;
    yield {
      index,
      from: Math.max(first, base) - base,
      to: Math.min(last + 1, base + regionBytes(layout, index)) - base,
    };
  }
}

/** BE32 length and the smallest bincode policy (ts u64, attribute count u64). */
const MIN_PREFIX_BYTES = 4 + 8 + 8;

/**
 * A ciphertext's plaintext length, from its size and its framing alone, without a key: for a
 * stream, the exact size hint its sealer wrote (ours does whenever the length is known: Blob,
 * File and bytes input, or `options.size`), once it fits the segment layout of a ciphertext of
 * this size; for an in-memory ciphertext, the length in its header. Undefined when the file does
 * not say (the reference's sealers write no hint) or what it says cannot be true. The header's
 * signature covers the hint, but only decrypting proves it: `StreamUnsealer.open` gives the
 * proven size.
 */
export function plaintextSize(ciphertextBytes: number, frame: FrameParts): number | undefined {
  const { mode } = decodeHeader(frame.header);
  if (mode.type === 'InMemory') {
    // LE64 length, message, signature, two minimal policies, tag.
    return ciphertextBytes - frame.framingBytes >= 8 + mode.size + SIGNATURE_BYTES + 16 + GCM_TAG_BYTES
      ? mode.size
      : undefined;
  }
  const [lower, upper] = mode.sizeHint;
  if (upper !== lower || lower > BigInt(Number.MAX_SAFE_INTEGER)) return undefined;
  const layout = segmentLayout(ciphertextBytes, frame.framingBytes, checkedSegmentSize(mode));
  if (layout === undefined) return undefined;
  const stated = Number(lower);
  const prefix = totalRegionBytes(layout) - stated;
  return prefix >= MIN_PREFIX_BYTES && prefix <= regionBytes(layout, 0) ? stated : undefined;
}
