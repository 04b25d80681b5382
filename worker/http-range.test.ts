import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { expectLinearTime, repeated as run } from '../test/linear-time.js';
import { contentRange, parseRange, unsatisfiedRange } from './http-range.js';

describe('parseRange', () => {
  it('reads the forms media elements send', () => {
    expect(parseRange('bytes=0-', 1000)).toEqual({ kind: 'partial', start: 0, end: 999 });
    expect(parseRange('bytes=500-', 1000)).toEqual({ kind: 'partial', start: 500, end: 999 });
    expect(parseRange('bytes=10-19', 1000)).toEqual({ kind: 'partial', start: 10, end: 19 });
    expect(parseRange('bytes=-100', 1000)).toEqual({ kind: 'partial', start: 900, end: 999 });
    expect(parseRange('Bytes = 10 - 19', 1000)).toEqual({ kind: 'partial', start: 10, end: 19 });
  });

  it('clamps a range that runs past the end, and a suffix longer than the file', () => {
    expect(parseRange('bytes=990-5000', 1000)).toEqual({ kind: 'partial', start: 990, end: 999 });
    expect(parseRange('bytes=0-99999999999999999999999', 1000)).toEqual({ kind: 'partial', start: 0, end: 999 });
    expect(parseRange('bytes=-5000', 1000)).toEqual({ kind: 'partial', start: 0, end: 999 });
  });

  it('is unsatisfiable when no range overlaps the file', () => {
    expect(parseRange('bytes=1000-', 1000)).toEqual({ kind: 'unsatisfiable' });
    expect(parseRange('bytes=1000-2000, 2000-', 1000)).toEqual({ kind: 'unsatisfiable' });
    expect(parseRange('bytes=-0', 1000)).toEqual({ kind: 'unsatisfiable' });
    expect(parseRange('bytes=0-', 0)).toEqual({ kind: 'unsatisfiable' });
    expect(parseRange('bytes=-5', 0)).toEqual({ kind: 'unsatisfiable' });
  });

  it('answers a multi-range request with its first satisfiable range', () => {
    expect(parseRange('bytes=0-9, 20-29', 1000)).toEqual({ kind: 'partial', start: 0, end: 9 });
    expect(parseRange('bytes=5000-6000, 20-29', 1000)).toEqual({ kind: 'partial', start: 20, end: 29 });
    expect(parseRange('bytes=0-1, ,5-6', 1000)).toEqual({ kind: 'partial', start: 0, end: 1 });
  });

  it('ignores (whole file) what it does not understand', () => {
    for (const header of [
      null,
      undefined,
      '',
      'bytes',
      'bytes=',
      'items=0-5',
      'bytes=5-1',
      'bytes=a-b',
      'bytes=0-5,x',
      'bytes=1.5-2',
      'bytes=--5',
      `bytes=${'0-0,'.repeat(101)}`,
    ]) {
      expect(parseRange(header, 1000), String(header)).toEqual({ kind: 'full' });
    }
  });

  it('property: a parsed range always lies within the file and matches what was asked', () => {
    fc.assert(
      fc.property(
        fc.nat(1 << 30),
        fc.nat(1 << 30),
        fc.option(fc.nat(1 << 30), { nil: undefined }),
        (total, start, maybeEnd) => {
          const end = maybeEnd === undefined ? undefined : start + maybeEnd;
          const answer = parseRange(`bytes=${start}-${end ?? ''}`, total);
          expect(answer).toEqual(
            start >= total
              ? { kind: 'unsatisfiable' }
              : { kind: 'partial', start, end: Math.min(end ?? Infinity, total - 1) },
          );
        },
      ),
    );
  });

  it('formats Content-Range', () => {
    expect(contentRange(0, 9, 100)).toBe('bytes 0-9/100');
    expect(unsatisfiedRange(100)).toBe('bytes */100');
  });
});

describe('parseRange on crafted headers of about 1 MiB', () => {
  // A page's own media element sends the header, but a page can also fetch() with any Range it likes.
  const crafted: Array<[string, (n: number) => string]> = [
    ['empty list elements', (n) => `bytes=${run(',', n)}`],
    ['more ranges than considered', (n) => `bytes=${run('0-0,', n)}`],
    ['whitespace around a range', (n) => `bytes=${run(' ', n / 2)}0-1${run('\t ', n / 2)}`],
    ['a run of =', (n) => `bytes${run('=', n)}`],
    ['a run of -', (n) => `bytes=${run('-', n)}`],
    ['a start of a million digits', (n) => `bytes=${run('0', n)}-`],
    ['a suffix of a million digits', (n) => `bytes=-${run('9', n)}`],
    ['whitespace-separated list', (n) => `bytes=${run(' , ', n)}5-`],
  ];
  it.each(crafted)('%s', async (what, header) => {
    await expectLinearTime(`parseRange, ${what}`, (n) => ({
      crafted: () => parseRange(header(n), 1_000_000),
      benign: () => parseRange(run('x', n), 1_000_000),
    }));
  });
});
