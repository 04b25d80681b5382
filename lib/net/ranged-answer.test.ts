import { describe, expect, it } from 'vitest';
import { judgeRangedAnswer, spanMismatch, wholeSize } from './ranged-answer.js';

/** One judge of a ranged answer: every rule, each with a case that breaks it. */

const answer = (status: number, headers: Record<string, string> = {}) =>
  new Response(status === 204 || status === 416 ? null : 'x', { status, headers });

describe('judgeRangedAnswer', () => {
  it.each([
    [
      'same-origin 206',
      answer(206, { 'content-range': 'bytes 10-19/100', 'content-length': '10' }),
      { kind: 'span', span: { start: 10, length: 10, total: 100 } },
    ],
    [
      'cross-origin 206: only the length is seen',
      answer(206, { 'content-length': '10' }),
      { kind: 'span', span: { start: undefined, length: 10, total: undefined } },
    ],
    [
      'a Content-Range without a length',
      answer(206, { 'content-range': 'bytes 0-9/100' }),
      { kind: 'span', span: { start: 0, length: 10, total: 100 } },
    ],
    [
      '416, its total readable',
      answer(416, { 'content-range': 'bytes */0' }),
      { kind: 'unsatisfiable', total: 0, readable: true },
    ],
    ['416, nothing readable', answer(416), { kind: 'unsatisfiable', total: undefined, readable: false }],
  ])('%s', (_, response, expected) => {
    expect(judgeRangedAnswer(response)).toEqual(expected);
  });

  it.each([
    ['a 200 to a range request', answer(200, { 'content-length': '100' }), /HTTP 200/],
    ['a 404', answer(404), /HTTP 404/],
    ['re-encoded bytes', answer(206, { 'content-length': '10', 'content-encoding': 'gzip' }), /re-encoded/],
    [
      'a Content-Range of another form',
      answer(206, { 'content-range': 'bytes 0-9/*', 'content-length': '10' }),
      /do not read/,
    ],
    ['neither Content-Range nor Content-Length', answer(206), /neither/],
    [
      'lengths at odds',
      answer(206, { 'content-range': 'bytes 0-9/100', 'content-length': '11' }),
      /Content-Length \(11\)/,
    ],
  ])('refuses %s', (_, response, why) => {
    const judged = judgeRangedAnswer(response);
    expect(judged.kind).toBe('refused');
    expect(judged.kind === 'refused' && judged.why).toMatch(why);
  });

  it('a 200 is the whole file only where the caller accepts one (a resume)', () => {
    expect(judgeRangedAnswer(answer(200, { 'content-length': '100' }), true)).toEqual({ kind: 'whole', length: 100 });
    expect(judgeRangedAnswer(answer(200, { 'content-encoding': 'br' }), true).kind).toBe('refused');
  });
});

describe('spanMismatch', () => {
  const wanted = { offset: 10, length: 10, total: 100 };
  it('accepts the span asked for, seen whole or by its length alone', () => {
    expect(spanMismatch({ start: 10, length: 10, total: 100 }, wanted)).toBeUndefined();
    expect(spanMismatch({ start: undefined, length: 10, total: undefined }, wanted)).toBeUndefined();
  });
  it.each([
    ['another start', { start: 11, length: 10, total: 100 }],
    ['another length', { start: 10, length: 9, total: 100 }],
    ['another total', { start: 10, length: 10, total: 101 }],
    ['another length, cross-origin', { start: undefined, length: 11, total: undefined }],
  ])('refuses %s: the file changed', (_, span) => {
    expect(spanMismatch(span, wanted)).toMatch(/the file changed/);
  });
});

it('wholeSize: the Content-Length of a plain 200 only', () => {
  expect(wholeSize(answer(200, { 'content-length': '7' }))).toBe(7);
  expect(wholeSize(answer(206, { 'content-length': '7' }))).toBeUndefined();
  expect(wholeSize(answer(200, { 'content-length': '7', 'content-encoding': 'gzip' }))).toBeUndefined();
});
