import { invalidKey } from './errors.js';

/**
 * Strict RFC 4648 base64 (standard alphabet, '=' padding), as the reference encodes keys.
 * Decoding rejects anything else: wrong length, stray characters, non-zero pad bits.
 */

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const DECODE = new Int16Array(128).fill(-1);
for (let i = 0; i < ALPHABET.length; i++) DECODE[ALPHABET.charCodeAt(i)] = i;

export function toBase64(bytes: Uint8Array): string {
  let out = '';
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    out += ALPHABET[n >> 18]! + ALPHABET[(n >> 12) & 63]! + ALPHABET[(n >> 6) & 63]! + ALPHABET[n & 63]!;
  }
  const rest = bytes.length - i;
  if (rest === 1) {
    const n = bytes[i]! << 16;
    out += ALPHABET[n >> 18]! + ALPHABET[(n >> 12) & 63]! + '==';
  } else if (rest === 2) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8);
    out += ALPHABET[n >> 18]! + ALPHABET[(n >> 12) & 63]! + ALPHABET[(n >> 6) & 63]! + '=';
  }
  return out;
}

/** Decodes padded base64; `expectedBytes` (when given) pins the decoded length. */
export function fromBase64(text: unknown, what: string, expectedBytes?: number): Uint8Array {
  if (typeof text !== 'string') throw invalidKey(`${what}: expected a base64 string, got ${typeof text}`);
  if (expectedBytes !== undefined && text.length !== 4 * Math.ceil(expectedBytes / 3)) {
    throw invalidKey(
      `${what}: expected a base64 string of length ${4 * Math.ceil(expectedBytes / 3)}, got ${text.length}`,
    );
  }
  if (text.length % 4 !== 0) throw invalidKey(`${what}: base64 length ${text.length} is not a multiple of 4`);
  const pad = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  const n = (text.length / 4) * 3 - pad;
  const out = new Uint8Array(n);
  let o = 0;
  for (let i = 0; i < text.length; i += 4) {
    const last = i + 4 === text.length;
    let acc = 0;
    for (let j = 0; j < 4; j++) {
      const c = text.charCodeAt(i + j);
      let d: number;
      if (c === 61 /* '=' */ && last && j >= 4 - pad) d = 0;
      else {
        d = c < 128 ? DECODE[c]! : -1;
        if (d < 0) throw invalidKey(`${what}: invalid base64 character at offset ${i + j}`);
      }
      acc = (acc << 6) | d;
    }
    const b0 = (acc >> 16) & 255,
      b1 = (acc >> 8) & 255,
      b2 = acc & 255;
    if (!last || pad === 0) {
      out[o++] = b0;
      out[o++] = b1;
      out[o++] = b2;
    } else if (pad === 1) {
      if (b2 !== 0) throw invalidKey(`${what}: non-canonical base64 padding`);
      out[o++] = b0;
      out[o++] = b1;
    } else {
      if (b1 !== 0 || b2 !== 0) throw invalidKey(`${what}: non-canonical base64 padding`);
      out[o++] = b0;
    }
  }
  if (expectedBytes !== undefined && n !== expectedBytes) {
    throw invalidKey(`${what}: expected ${expectedBytes} bytes, got ${n}`);
  }
  return out;
}
