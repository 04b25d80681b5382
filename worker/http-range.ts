/**
 * The `Range` request header (RFC 9110 §14), as far as the decrypting service worker answers it:
 * byte ranges of a representation whose length is known. Pure; sw-core.ts turns the answer into a
 * 206, a 416 or a plain 200.
 *
 *   full           no Range, another unit, or a header that does not parse: HTTP lets a server
 *                  ignore such a Range and send the whole representation (200)
 *   partial        the first satisfiable range, clamped to the representation (206)
 *   unsatisfiable  a well-formed byte range set of which no range overlaps the representation (416)
 *
 * A request for several ranges is answered with its first satisfiable range only (a 206 with one
 * Content-Range, which RFC 9110 §15.3.7 lets a client receive for a multi-range request), never
 * as multipart/byteranges: media elements, the one client that needs ranges here, ask for one.
 */

export type RangeAnswer =
  { kind: 'full' } | { kind: 'partial'; start: number; end: number } | { kind: 'unsatisfiable' };

const FULL: RangeAnswer = { kind: 'full' };

/** Most ranges considered in one header: more is a client that is broken or abusive (RFC 9110 §14.2). */
const MAX_RANGES = 100;

const DIGITS = /^\d+$/;

/** `Range` against a representation of `total` bytes (`total` a non-negative safe integer). */
export function parseRange(header: string | null | undefined, total: number): RangeAnswer {
  if (header === null || header === undefined) return FULL;
  const equals = header.indexOf('=');
  if (equals < 0 || header.slice(0, equals).trim().toLowerCase() !== 'bytes') return FULL;
  const specs = header
    .slice(equals + 1)
    .split(',')
    .map((s) => s.trim())
    // RFC 9110 list syntax tolerates empty elements ("bytes=0-1, ,5-6").
    .filter((s) => s !== '');
  if (specs.length === 0 || specs.length > MAX_RANGES) return FULL;
  let first: RangeAnswer | undefined;
  for (const spec of specs) {
    const dash = spec.indexOf('-');
    if (dash < 0) return FULL;
    const from = spec.slice(0, dash).trim();
    const to = spec.slice(dash + 1).trim();
    let answer: RangeAnswer;
    if (from === '') {
      // bytes=-n: the last n bytes.
      if (!DIGITS.test(to)) return FULL;
      const suffix = Number(to);
      answer =
        suffix === 0 || total === 0
          ? { kind: 'unsatisfiable' }
          : { kind: 'partial', start: Math.max(0, total - suffix), end: total - 1 };
    } else {
      if (!DIGITS.test(from) || (to !== '' && !DIGITS.test(to))) return FULL;
      const start = Number(from);
      const end = to === '' ? Infinity : Number(to);
      if (end < start) return FULL; // an invalid range-spec makes the whole header invalid
      answer = start >= total ? { kind: 'unsatisfiable' } : { kind: 'partial', start, end: Math.min(end, total - 1) };
    }
    // Every spec is checked for syntax first: one malformed spec makes the header one to ignore.
    if (first === undefined || (first.kind === 'unsatisfiable' && answer.kind === 'partial')) first = answer;
  }
  return first ?? FULL;
}

/** `bytes a-b/total` for a 206. */
export const contentRange = (start: number, end: number, total: number): string => `bytes ${start}-${end}/${total}`;

/** `bytes *\/total` for a 416. */
export const unsatisfiedRange = (total: number): string => `bytes */${total}`;
