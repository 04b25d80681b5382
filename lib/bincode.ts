import { FormatError, ErrorCode, malformed, truncated } from './errors.js';

/**
 * The subset of bincode 1.x (fixint, little-endian) that PostGuard blobs use.
 * The Reader never trusts a length: every count is checked against the bytes left
 * before anything is allocated.
 */

const utf8Decoder = new TextDecoder('utf-8', { fatal: true });
const utf8Encoder = new TextEncoder();

export const utf8 = (s: string): Uint8Array => utf8Encoder.encode(s);

export class Reader {
  private offset = 0;

  constructor(
    private readonly bytes: Uint8Array,
    /** Names the blob in error messages ("header", "signature"). */
    private readonly what: string,
  ) {}

  get position(): number {
    return this.offset;
  }

  get remaining(): number {
    return this.bytes.length - this.offset;
  }

  take(n: number): Uint8Array {
    if (n > this.remaining) throw truncated(this.what);
    const out = this.bytes.subarray(this.offset, this.offset + n);
    this.offset += n;
    return out;
  }

  u8(): number {
    if (this.remaining < 1) throw truncated(this.what);
    return this.bytes[this.offset++]!;
  }

  u32(): number {
    const b = this.take(4);
    return (b[0]! | (b[1]! << 8) | (b[2]! << 16) | (b[3]! << 24)) >>> 0;
  }

  u64(): bigint {
    const b = this.take(8);
    const lo = BigInt((b[0]! | (b[1]! << 8) | (b[2]! << 16) | (b[3]! << 24)) >>> 0);
    const hi = BigInt((b[4]! | (b[5]! << 8) | (b[6]! << 16) | (b[7]! << 24)) >>> 0);
    return (hi << 32n) | lo;
  }

  /** A u64 that must fit a JS number exactly (timestamps, sizes). */
  safeU64(field: string): number {
    const v = this.u64();
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw malformed(`${this.what}: ${field} ${v} is out of range`);
    return Number(v);
  }

  /**
   * A u64 length or element count. Each element takes at least `minElementBytes`, so a count
   * the remaining input cannot hold is rejected before any allocation.
   */
  length(field: string, minElementBytes = 1): number {
    const v = this.u64();
    if (v * BigInt(minElementBytes) > BigInt(this.remaining)) {
      throw new FormatError(
        ErrorCode.TRUNCATED,
        `${this.what}: ${field} of ${v} does not fit in the ${this.remaining} bytes left`,
      );
    }
    return Number(v);
  }

  string(field: string): string {
    const n = this.length(field);
    try {
      return utf8Decoder.decode(this.take(n));
    } catch {
      throw malformed(`${this.what}: ${field} is not valid UTF-8`);
    }
  }

  option<T>(field: string, read: () => T): T | undefined {
    const tag = this.u8();
    if (tag === 0) return undefined;
    if (tag === 1) return read();
    throw malformed(`${this.what}: invalid Option tag ${tag} for ${field}`);
  }

  /** An enum variant index (u32) that must be below `count`. */
  variant(field: string, count: number): number {
    const v = this.u32();
    if (v >= count) throw malformed(`${this.what}: invalid ${field} variant ${v}`);
    return v;
  }
}

export class Writer {
  private buf: Uint8Array;
  private view: DataView;
  private len = 0;

  constructor(capacity = 256) {
    this.buf = new Uint8Array(capacity);
    this.view = new DataView(this.buf.buffer);
  }

  private reserve(n: number): number {
    const at = this.len;
    if (at + n > this.buf.length) {
      const next = new Uint8Array(Math.max(this.buf.length * 2, at + n));
      next.set(this.buf.subarray(0, at));
      this.buf = next;
      this.view = new DataView(next.buffer);
    }
    this.len += n;
    return at;
  }

  bytes(b: Uint8Array): this {
    const at = this.reserve(b.length); // may replace this.buf
    this.buf.set(b, at);
    return this;
  }

  u8(v: number): this {
    const at = this.reserve(1);
    this.buf[at] = v;
    return this;
  }

  u32(v: number): this {
    const at = this.reserve(4);
    this.view.setUint32(at, v, true);
    return this;
  }

  u64(v: number | bigint): this {
    const at = this.reserve(8);
    this.view.setBigUint64(at, BigInt(v), true);
    return this;
  }

  string(s: string): this {
    const b = utf8(s);
    return this.u64(b.length).bytes(b);
  }

  option<T>(value: T | undefined | null, write: (v: T) => void): this {
    if (value === undefined || value === null) return this.u8(0);
    this.u8(1);
    write(value);
    return this;
  }

  finish(): Uint8Array {
    return this.buf.slice(0, this.len);
  }
}
