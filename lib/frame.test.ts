import { describe, expect, it } from 'vitest';
import { unb64, vectors } from '../test/vectors.js';
import { MAX_HEADER_BYTES, encodeFrame, parsePreamble, parseSignatureLength, splitFrame } from './frame.js';

const code = (c: string) => expect.objectContaining({ code: c });

describe('preamble', () => {
  const ct = unb64(vectors.vectors[0].ciphertext_b64);

  it('reads the header length of a pg-wasm ciphertext', () => {
    expect(parsePreamble(ct.subarray(0, 10))).toBe(vectors.vectors[0].parsed.header_len);
  });

  it('rejects a wrong prelude, also when it is short', () => {
    const bad = ct.slice(0, 10);
    bad[1]! ^= 1;
    expect(() => parsePreamble(bad)).toThrow(code('NOT_POSTGUARD'));
    expect(() => parsePreamble(Uint8Array.of(0x50, 0x4b))).toThrow(code('NOT_POSTGUARD'));
    expect(() => parsePreamble(new Uint8Array(0))).toThrow(code('TRUNCATED'));
    expect(() => parsePreamble(ct.subarray(0, 7))).toThrow(code('TRUNCATED'));
  });

  it.each([0, 1, 3, 0xffff])('rejects version %i', (version) => {
    const bad = ct.slice(0, 10);
    new DataView(bad.buffer).setUint16(4, version);
    expect(() => parsePreamble(bad)).toThrow(code('UNSUPPORTED_VERSION'));
  });

  it('bounds the header length at 1 MiB', () => {
    const p = ct.slice(0, 10);
    new DataView(p.buffer).setUint32(6, MAX_HEADER_BYTES);
    expect(parsePreamble(p)).toBe(MAX_HEADER_BYTES);
    new DataView(p.buffer).setUint32(6, MAX_HEADER_BYTES + 1);
    expect(() => parsePreamble(p)).toThrow(code('HEADER_TOO_LARGE'));
  });

  it('bounds the signature length: a 4 GiB claim fails before allocating', () => {
    expect(() => parseSignatureLength(Uint8Array.of(0xff, 0xff, 0xff, 0xff))).toThrow(code('HEADER_TOO_LARGE'));
    expect(parseSignatureLength(Uint8Array.of(0, 0, 0, 172))).toBe(172);
  });
});

describe('frame split', () => {
  it('round-trips encodeFrame', () => {
    const framed = encodeFrame(Uint8Array.of(1, 2, 3), Uint8Array.of(4, 5));
    const payload = Uint8Array.of(9, 9);
    const all = new Uint8Array([...framed, ...payload]);
    const f = splitFrame(all);
    expect([...f.header]).toEqual([1, 2, 3]);
    expect([...f.signature]).toEqual([4, 5]);
    expect([...f.payload]).toEqual([9, 9]);
  });

  it('reports truncation inside the framing at every cut, never a crash', () => {
    const ct = unb64(vectors.vectors[1].ciphertext_b64);
    const { header_len, header_sig_len } = vectors.vectors[1].parsed;
    for (let n = 0; n < 14 + header_len + header_sig_len; n++) {
      expect(() => splitFrame(ct.subarray(0, n)), `cut at ${n}`).toThrow(code('TRUNCATED'));
    }
  });
});
