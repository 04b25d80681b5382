/**
 * The two range headers of the Cryptify protocol, parsed the way Cryptify parses them.
 *
 * Upload side, `Content-Range: bytes <start>-<end>/<size>` (size may be a star; at finalize the
 * span is a star instead):
 * Cryptify reads `end` as EXCLUSIVE (the chunk is `end - start` bytes), unlike RFC 9110. Numbers are
 * u64 (a leading `+` is accepted, as Rust's parser does); a part after `<end>` separated by another `-`
 * is ignored, as Cryptify ignores it. Values are BigInt so that nothing above 2^53 is rounded.
 *
 * Download side, `Range: bytes=a-b | a- | -n` (single range, inclusive end, RFC style).
 */

export interface ContentRange {
  /** Absent when the span is a star (finalize). */
  start?: bigint;
  /** Exclusive. Absent when the span is a star. */
  end?: bigint;
  /** Absent when the size is a star. */
  size?: bigint;
}

const MAX_U64 = (1n << 64n) - 1n;

export class RangeSyntaxError extends Error {
  override readonly name = 'RangeSyntaxError';
}

/** 2^64 - 1 has 20 decimal digits. */
const U64_DIGITS = 20;

/**
 * A u64 in Rust's syntax (an optional `+`, decimal digits, leading zeros allowed); 'invalid' or
 * 'too large' otherwise. Only up to 20 significant digits reach BigInt, whose decimal parsing grows
 * faster than the length of its input: a header of a million digits is too large at a glance.
 */
function decimalU64(text: string): bigint | 'invalid' | 'too large' {
  if (!/^\+?\d+$/.test(text)) return 'invalid';
  let start = text.startsWith('+') ? 1 : 0;
  while (start < text.length - 1 && text[start] === '0') start++;
  if (text.length - start > U64_DIGITS) return 'too large';
  const value = BigInt(text.slice(start));
  return value > MAX_U64 ? 'too large' : value;
}

function u64(text: string | undefined, what: string): bigint {
  const value = text === undefined ? 'invalid' : decimalU64(text);
  if (value === 'invalid') throw new RangeSyntaxError(`invalid ${what}`);
  if (value === 'too large') throw new RangeSyntaxError(`${what} too large`);
  return value;
}

export function parseContentRange(header: string): ContentRange {
  const words = header.split(/\s+/).filter((w) => w !== '');
  if (words.length < 2) throw new RangeSyntaxError('missing unit or range');
  if (words.length > 2) throw new RangeSyntaxError('excess data');
  const [unit, spec] = words as [string, string];
  if (unit !== 'bytes') throw new RangeSyntaxError(`unknown unit ${unit}`);
  const parts = spec.split('/');
  if (parts.length !== 2)
    throw new RangeSyntaxError(parts.length < 2 ? 'missing size part of range' : 'excess data in range');
  const [span, sizeText] = parts as [string, string];
  const range: ContentRange = {};
  if (sizeText !== '*') range.size = u64(sizeText, 'size');
  if (span !== '*') {
    const bounds = span.split('-');
    range.start = u64(bounds[0], 'start of range');
    range.end = u64(bounds[1], 'end of range');
  }
  return range;
}

/** An inclusive byte range inside a resource. */
export interface ByteRange {
  start: number;
  endInclusive: number;
}

/** `undefined` means "answer 416": malformed, several ranges, or nothing satisfiable. */
export function parseRangeHeader(header: string, totalSize: number): ByteRange | undefined {
  if (!header.startsWith('bytes=')) return undefined;
  const rest = header.slice('bytes='.length).trim();
  if (rest.includes(',')) return undefined;
  const dash = rest.indexOf('-');
  if (dash < 0) return undefined;
  const first = rest.slice(0, dash).trim();
  const last = rest.slice(dash + 1).trim();
  const number = (text: string): number | undefined => {
    const value = decimalU64(text);
    return typeof value === 'bigint' ? Number(value) : undefined;
  };
  if (first === '') {
    const n = number(last);
    if (n === undefined || n === 0 || totalSize === 0) return undefined;
    return { start: totalSize - Math.min(n, totalSize), endInclusive: totalSize - 1 };
  }
  const start = number(first);
  if (start === undefined || start >= totalSize) return undefined;
  let endInclusive = totalSize - 1;
  if (last !== '') {
    const end = number(last);
    if (end === undefined) return undefined;
    endInclusive = Math.min(end, totalSize - 1);
  }
  return endInclusive < start ? undefined : { start, endInclusive };
}
