/**
 * What an HTTP answer says about its bytes, read strictly: a header that is absent, unreadable
 * (a cross-origin host that does not expose it) or not exactly the expected form says nothing.
 * Each pattern is anchored and has no nested repetition: linear in the header's length.
 */

const DECIMAL = /^\d{1,16}$/;
const CONTENT_RANGE = /^bytes (\d{1,16})-(\d{1,16})\/(\d{1,16})$/;
const UNSATISFIED_RANGE = /^bytes \*\/(\d{1,16})$/;

const safe = (digits: string): number | undefined => {
  const n = Number(digits);
  return Number.isSafeInteger(n) ? n : undefined;
};

/** Content-Length as a number; undefined when absent or not a plain decimal. */
export function contentLength(headers: Headers): number | undefined {
  const value = headers.get('content-length');
  return value !== null && DECIMAL.test(value) ? safe(value) : undefined;
}

/** A byte span as Content-Range states it: bytes `start` to `end` (inclusive) of `total`. */
export interface ContentRange {
  start: number;
  end: number;
  total: number;
}

/** Content-Range `bytes a-b/total`; undefined when absent, unreadable or of another form. */
export function contentRange(headers: Headers): ContentRange | undefined {
  const match = CONTENT_RANGE.exec(headers.get('content-range') ?? '');
  if (match === null) return undefined;
  const [start, end, total] = [safe(match[1]!), safe(match[2]!), safe(match[3]!)];
  if (start === undefined || end === undefined || total === undefined || start > end || end >= total) return undefined;
  return { start, end, total };
}

/** The total of a 416's Content-Range `bytes *\/total`, when readable. */
export function unsatisfiedTotal(headers: Headers): number | undefined {
  const match = UNSATISFIED_RANGE.exec(headers.get('content-range') ?? '');
  return match === null ? undefined : safe(match[1]!);
}

/**
 * True when the body is re-encoded for transfer (gzip, br...): its Content-Length then counts the
 * encoded bytes, not those a reader gets, and byte offsets into it mean nothing.
 */
export function reencoded(headers: Headers): boolean {
  const encoding = headers.get('content-encoding');
  return encoding !== null && encoding.trim().toLowerCase() !== 'identity';
}

/** A strong ETag (a weak one, `W/…`, does not promise the same bytes); undefined if none is readable. */
export function strongEtag(headers: Headers): string | undefined {
  const etag = headers.get('etag');
  return etag !== null && !etag.startsWith('W/') ? etag : undefined;
}
