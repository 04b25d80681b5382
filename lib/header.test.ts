import { describe, expect, it } from 'vitest';
import { hex, stream2seg, unhex, vectors } from '../test/vectors.js';
import { Writer } from './bincode.js';
import { CAPSULE_BYTES, checkedSegmentSize, decodeHeader, encodeHeader, type Header } from './header.js';

const all = [...vectors.vectors, stream2seg.vector];

describe('header codec against pg-wasm headers', () => {
  for (const v of all) {
    it(`decodes and re-encodes ${v.name} byte for byte`, () => {
      const bytes = unhex(v.parsed.header_hex);
      const header = decodeHeader(bytes);
      const expected = v.parsed.header;
      expect([...header.recipients.keys()]).toEqual(expected.recipients.map((r: any) => r.id));
      for (const r of expected.recipients) {
        const got = header.recipients.get(r.id)!;
        expect(got.policy.ts).toBe(r.policy.ts);
        expect(got.policy.con).toEqual(r.policy.con.map((a: any) => (a.v === null ? { t: a.t } : a)));
        expect(hex(got.capsule)).toBe(r.ct);
      }
      expect(hex(header.iv)).toBe(expected.algo.Aes128Gcm);
      if (expected.mode.InMemory) expect(header.mode).toEqual({ type: 'InMemory', size: expected.mode.InMemory.size });
      else {
        expect(header.mode).toEqual({
          type: 'Streaming',
          segmentSize: expected.mode.Streaming.segment_size,
          sizeHint: [0n, undefined],
        });
      }
      expect(hex(encodeHeader(header))).toBe(v.parsed.header_hex);
    });
  }
});

describe('header codec rules', () => {
  const capsule = new Uint8Array(CAPSULE_BYTES).fill(7);
  const header = (ids: string[]): Header => ({
    recipients: new Map(ids.map((id) => [id, { policy: { ts: 1, con: [{ t: 'x', v: '' }] }, capsule }])),
    iv: new Uint8Array(12).fill(1),
    mode: { type: 'InMemory', size: 3 },
  });

  it('writes recipients in UTF-8 byte order', () => {
    const decoded = decodeHeader(encodeHeader(header(['zed@x', 'Charlie', 'Bob', '\u{1F600}', '\uFF5E'])));
    expect([...decoded.recipients.keys()]).toEqual(['Bob', 'Charlie', 'zed@x', '\uFF5E', '\u{1F600}']);
  });

  it('accepts trailing bytes, as the reference does', () => {
    const bytes = encodeHeader(header(['a']));
    const padded = new Uint8Array(bytes.length + 5);
    padded.set(bytes);
    expect(decodeHeader(padded).recipients.has('a')).toBe(true);
  });

  it('writes a streaming mode with an upper size hint', () => {
    const h: Header = { ...header(['a']), mode: { type: 'Streaming', segmentSize: 1000, sizeHint: [5n, 9n] } };
    expect(decodeHeader(encodeHeader(h)).mode).toEqual(h.mode);
  });

  it('rejects truncation at every offset with a typed error', () => {
    const bytes = encodeHeader(header(['a', 'b']));
    for (let n = 0; n < bytes.length; n++) {
      expect(() => decodeHeader(bytes.subarray(0, n)), `cut at ${n}`).toThrow(
        expect.objectContaining({ code: 'TRUNCATED' }),
      );
    }
  });

  it('rejects a recipient count that cannot fit before allocating', () => {
    const bytes = new Writer().u64(2n ** 63n).finish();
    expect(() => decodeHeader(bytes)).toThrow(expect.objectContaining({ code: 'TRUNCATED' }));
  });

  it('rejects unknown algorithm and mode variants and bad option tags', () => {
    const bytes = encodeHeader(header(['a']));
    const algoAt = bytes.length - 24;
    const bad = (at: number, value: number) => {
      const copy = bytes.slice();
      copy[at] = value;
      return copy;
    };
    expect(() => decodeHeader(bad(algoAt, 1))).toThrow(expect.objectContaining({ code: 'MALFORMED' }));
    expect(() => decodeHeader(bad(algoAt + 16, 2))).toThrow(expect.objectContaining({ code: 'MALFORMED' }));
    // The attribute value's Option tag sits right after the type string "x".
    const tagAt = 8 + 8 + 1 + 8 + 8 + 8 + 1;
    expect(bytes[tagAt]).toBe(1);
    expect(() => decodeHeader(bad(tagAt, 2))).toThrow(expect.objectContaining({ code: 'MALFORMED' }));
  });

  it('bounds the segment size', () => {
    const mode = (segmentSize: number) => ({ type: 'Streaming', segmentSize, sizeHint: [0n, undefined] }) as const;
    expect(checkedSegmentSize(mode(4 * 1024 * 1024))).toBe(4 * 1024 * 1024);
    expect(() => checkedSegmentSize(mode(4 * 1024 * 1024 + 1))).toThrow(expect.objectContaining({ code: 'MALFORMED' }));
    expect(() => checkedSegmentSize(mode(0))).toThrow(expect.objectContaining({ code: 'MALFORMED' }));
    expect(() => checkedSegmentSize({ type: 'InMemory', size: 1 })).toThrow(
      expect.objectContaining({ code: 'WRONG_MODE' }),
    );
  });
});
