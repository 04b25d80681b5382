import { contentLength, contentRange, reencoded, unsatisfiedTotal } from './http-lengths.js';

/**
 * The one reading of an answer to `Range: bytes=…`, for every reader of ranges (random access, the
 * resumable download). It judges by what a reader can see: same-origin (or from a host that exposes
 * it) the Content-Range; cross-origin only the status and the Content-Length, since a storage
 * service such as Cryptify exposes no other header. A re-encoded answer (Content-Encoding) says
 * nothing of byte offsets, so it is never a span.
 */

/** The bytes an answer holds, as far as a reader can see them. */
export interface SeenSpan {
  /** Where they start: known only where the Content-Range is readable. */
  start: number | undefined;
  /** How many: the Content-Range's span, else the Content-Length. */
  length: number;
  /** The file's size: known only where the Content-Range is readable. */
  total: number | undefined;
}

/** What an answer to a ranged GET is. */
export type RangedAnswer =
  /** A 206 of the span it states (see {@link SeenSpan}). */
  | { kind: 'span'; span: SeenSpan }
  /** A 200 of the whole file where one was accepted (a resume): its Content-Length, when readable. */
  | { kind: 'whole'; length: number | undefined }
  /** A 416: no byte at the offset asked; the file's size when its Content-Range is readable. */
  | { kind: 'unsatisfiable'; total: number | undefined; readable: boolean }
  /** Not an answer in ranges: another status, re-encoded bytes, lengths unreadable or at odds. */
  | { kind: 'refused'; status: number; why: string };

/**
 * Judges `response` to a ranged GET. `whole` accepts a 200 (of the whole file) beside a 206, as a
 * resume does (a server may answer a Range with the whole file again).
 */
export function judgeRangedAnswer(response: Response, whole = false): RangedAnswer {
  const { status, headers } = response;
  const readable = headers.has('content-range');
  const refused = (why: string): RangedAnswer => ({ kind: 'refused', status, why });
  if (status === 416)
    return { kind: 'unsatisfiable', total: readable ? unsatisfiedTotal(headers) : undefined, readable };
  if (status !== 206 && !(whole && status === 200)) return refused(`it answered a range request with HTTP ${status}`);
  if (reencoded(headers))
    return refused(`its answer is re-encoded (Content-Encoding: ${headers.get('content-encoding')})`);
  const length = contentLength(headers);
  if (status === 200) return { kind: 'whole', length };
  const range = contentRange(headers);
  if (readable && range === undefined)
    return refused(`its 206 answer has a Content-Range we do not read (${headers.get('content-range')})`);
  if (range === undefined) {
    if (length === undefined)
      return refused('its 206 answer says neither which bytes it holds (Content-Range) nor how many (Content-Length)');
    return { kind: 'span', span: { start: undefined, length, total: undefined } };
  }
  const spanned = range.end - range.start + 1;
  if (length !== undefined && length !== spanned)
    return refused(
      `its 206 answer's Content-Length (${length}) is not its Content-Range's (${headers.get('content-range')})`,
    );
  return { kind: 'span', span: { start: range.start, length: spanned, total: range.total } };
}

/** The span a reader wanted: `length` bytes from `offset` of a file of `total`. */
export interface WantedSpan {
  offset: number;
  length: number;
  total: number;
}

/**
 * Why `span` is not `wanted` (the file changed, or the server answered other bytes), in words;
 * undefined when it is, as far as a reader can see.
 */
export function spanMismatch(span: SeenSpan, wanted: WantedSpan): string | undefined {
  const { offset, length, total } = wanted;
  const same = span.length === length && (span.start === undefined || (span.start === offset && span.total === total));
  if (same) return undefined;
  const asked = `a request for ${offset}-${offset + length - 1}/${total}`;
  return span.start === undefined
    ? `answered ${span.length} bytes to ${asked}: the file changed`
    : `answered bytes ${span.start}-${span.start + span.length - 1}/${span.total} to ${asked}: the file changed`;
}

/**
 * The file's size from an answer of the whole file (a 200 whose bytes are not re-encoded): its
 * Content-Length; undefined for any other answer, or one without a readable length.
 */
export function wholeSize(response: Response): number | undefined {
  return response.status === 200 && !reencoded(response.headers) ? contentLength(response.headers) : undefined;
}
