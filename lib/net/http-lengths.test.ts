import { describe, expect, it } from 'vitest';
import { expectLinearTime, repeated } from '../../test/linear-time.js';
import { contentLength, contentRange, reencoded, strongEtag, unsatisfiedTotal } from './http-lengths.js';

/** The headers a resume or a range read is judged by: read strictly, in time linear in their length. */

const h = (init: Record<string, string>) => new Headers(init);

describe('http-lengths', () => {
  it('Content-Length: a plain decimal within the safe integers, else nothing', () => {
    expect(contentLength(h({ 'content-length': '1234' }))).toBe(1234);
    expect(contentLength(h({ 'content-length': '0' }))).toBe(0);
    for (const bad of ['', '-1', '1e3', '0x10', '12 34', '1.5', '99999999999999999'])
      expect(contentLength(h({ 'content-length': bad })), bad).toBeUndefined();
    expect(contentLength(h({}))).toBeUndefined();
  });

  it('Content-Range: exactly bytes a-b/total with a <= b < total, else nothing', () => {
    expect(contentRange(h({ 'content-range': 'bytes 5-9/10' }))).toEqual({ start: 5, end: 9, total: 10 });
    for (const bad of ['bytes 5-9/*', 'bytes 9-5/10', 'bytes 5-10/10', 'bytes=5-9/10', 'items 5-9/10'])
      expect(contentRange(h({ 'content-range': bad })), bad).toBeUndefined();
    expect(unsatisfiedTotal(h({ 'content-range': 'bytes */0' }))).toBe(0);
    expect(unsatisfiedTotal(h({ 'content-range': 'bytes 0-1/2' }))).toBeUndefined();
  });

  it('Content-Encoding other than identity is a re-encoding; only a strong ETag pins bytes', () => {
    expect(reencoded(h({ 'content-encoding': 'gzip' }))).toBe(true);
    expect(reencoded(h({ 'content-encoding': 'Identity' }))).toBe(false);
    expect(reencoded(h({}))).toBe(false);
    expect(strongEtag(h({ etag: '"v1"' }))).toBe('"v1"');
    expect(strongEtag(h({ etag: 'W/"v1"' }))).toBeUndefined();
  });

  it('a crafted 1 MiB header is read in linear time', async () => {
    await expectLinearTime('Content-Range, a long run of digits and dashes', (n) => ({
      crafted: () => contentRange(h({ 'content-range': `bytes ${repeated('1-', n / 2)}` })),
      benign: () => contentRange(h({ 'content-range': `bytes ${repeated('a', n)}` })),
    }));
    await expectLinearTime('Content-Length, a long run of digits', (n) => ({
      crafted: () => contentLength(h({ 'content-length': repeated('9', n) })),
      benign: () => contentLength(h({ 'content-length': repeated('a', n) })),
    }));
  });
});
