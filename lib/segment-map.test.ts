import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SEGMENT_OVERHEAD } from './segments.js';
import { messageBytes, rangePieces, regionBytes, segmentLayout, totalRegionBytes, wireSpan } from './segment-map.js';

/**
 * A model of a sealed file with a small segment size: the regions prefix ‖ message cut into
 * segments the way SegmentSealer cuts them, each put on the "wire" with SEGMENT_OVERHEAD bytes
 * of filler in place of the signature and tag. The real seal is exercised by sw-core.test.ts.
 */
function model(framing: number, segmentSize: number, prefix: number, message: Uint8Array) {
  const regions = new Uint8Array(prefix + message.length);
  regions.set(message, prefix);
  const segments: Uint8Array[] = [];
  for (let at = 0; at + segmentSize <= regions.length; at += segmentSize)
    segments.push(regions.subarray(at, at + segmentSize));
  segments.push(regions.subarray(segments.length * segmentSize)); // the final one, possibly empty
  const wire = new Uint8Array(framing + segments.reduce((n, s) => n + s.length + SEGMENT_OVERHEAD, 0));
  let offset = framing;
  const spans: Array<{ offset: number; length: number }> = [];
  for (const segment of segments) {
    wire.set(segment, offset);
    spans.push({ offset, length: segment.length + SEGMENT_OVERHEAD });
    offset += segment.length + SEGMENT_OVERHEAD;
  }
  return { wire, segments, spans };
}

describe('segment layout', () => {
  it('derives the segment count and the final region from the ciphertext size', () => {
    const S = 100;
    const W = S + SEGMENT_OVERHEAD;
    expect(segmentLayout(50 + SEGMENT_OVERHEAD, 50, S)).toEqual({
      framingBytes: 50,
      segmentSize: S,
      count: 1,
      finalRegionBytes: 0,
    });
    expect(segmentLayout(50 + W + SEGMENT_OVERHEAD + 7, 50, S)).toEqual({
      framingBytes: 50,
      segmentSize: S,
      count: 2,
      finalRegionBytes: 7,
    });
    // A remainder shorter than a segment's overhead cannot end a file: it was cut.
    expect(segmentLayout(50 + W + SEGMENT_OVERHEAD - 1, 50, S)).toBeUndefined();
    expect(segmentLayout(50 + W, 50, S)).toBeUndefined();
    expect(segmentLayout(49, 50, S)).toBeUndefined();
  });

  it('refuses a prefix that does not fit in segment 0', () => {
    const layout = segmentLayout(10 + 30 + SEGMENT_OVERHEAD, 10, 100)!;
    expect(messageBytes(layout, 30)).toBe(0);
    expect(messageBytes(layout, 31)).toBeUndefined();
  });

  it('property: the model sealer and the arithmetic agree on spans, lengths and every range', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 300 }), // framing
        fc.integer({ min: 1, max: 64 }), // segment size
        fc.integer({ min: 0, max: 64 }), // prefix (fits in segment 0 when the segment is big enough)
        fc.uint8Array({ maxLength: 700 }),
        fc.nat(),
        fc.nat(),
        (framing, segmentSize, prefixWanted, message, a, b) => {
          const prefix = Math.min(prefixWanted, segmentSize);
          const { wire, segments, spans } = model(framing, segmentSize, prefix, message);
          const layout = segmentLayout(wire.length, framing, segmentSize)!;
          expect(layout.count).toBe(segments.length);
          expect(totalRegionBytes(layout)).toBe(prefix + message.length);
          expect(messageBytes(layout, prefix)).toBe(message.length);
          for (let i = 0; i < segments.length; i++) {
            expect(wireSpan(layout, i)).toEqual(spans[i]);
            expect(regionBytes(layout, i)).toBe(segments[i]!.length);
          }
          if (message.length === 0) return;
          const start = a % message.length;
          const end = start + (b % (message.length - start));
          // What a range response sends: each piece read from its segment's place on the wire.
          const served: number[] = [];
          let previous = -1;
          for (const { index, from, to } of rangePieces(layout, prefix, start, end)) {
            if (previous >= 0) expect(index).toBe(previous + 1); // consecutive
            previous = index;
            expect(0 <= from && from < to && to <= regionBytes(layout, index)).toBe(true);
            const { offset } = wireSpan(layout, index);
            served.push(...wire.subarray(offset + from, offset + to));
          }
          expect(Uint8Array.from(served)).toEqual(message.slice(start, end + 1));
        },
      ),
      { numRuns: 500 },
    );
  });

  it('refuses a range outside the message', () => {
    const layout = segmentLayout(10 + 100 + SEGMENT_OVERHEAD + 5 + SEGMENT_OVERHEAD, 10, 100)!;
    expect(() => [...rangePieces(layout, 20, 0, 85)]).toThrow(RangeError);
    expect([...rangePieces(layout, 20, 0, 84)]).toEqual([
      { index: 0, from: 20, to: 100 },
      { index: 1, from: 0, to: 5 },
    ]);
  });
});
