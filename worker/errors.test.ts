import { describe, expect, it } from 'vitest';
import { AuthenticationError, ErrorCode, FormatError, InputError, PostGuardError } from '../lib/errors.js';
import { PkgClientError } from '../lib/pkg/errors.js';
import { encodeError, isWireError, reviveError } from './errors.js';

/** What crosses a realm boundary: structured clone of the encoded form. */
const across = (value: unknown) => reviveError(structuredClone(encodeError(value)));

describe('errors across realms', () => {
  it.each([
    [new FormatError(ErrorCode.TRUNCATED, 'cut'), FormatError],
    [new AuthenticationError(ErrorCode.TAMPERED, 'bad tag'), AuthenticationError],
    [new InputError(ErrorCode.INVALID_KEY, 'not a key'), InputError],
    [new PostGuardError(ErrorCode.SINK_FAILED, 'sink'), PostGuardError],
  ])('%s keeps its class, code, message and stack', (error, cls) => {
    const back = across(error) as PostGuardError;
    expect(back).toBeInstanceOf(cls);
    expect(back).toBeInstanceOf(PostGuardError);
    expect(back.code).toBe(error.code);
    expect(back.message).toBe(error.message);
    expect(back.name).toBe(error.name);
    expect(back.stack).toBe(error.stack);
  });

  it('a PkgClientError keeps its details', () => {
    const error = new PkgClientError('RATE_LIMITED', 'slow down', {
      status: 429,
      retryAfter: 3,
      serverCode: 'RATE_LIMITED',
      url: 'https://pkg/x',
    });
    const back = across(error) as PkgClientError;
    expect(back).toBeInstanceOf(PkgClientError);
    expect(back).toMatchObject({
      code: 'RATE_LIMITED',
      status: 429,
      retryAfter: 3,
      serverCode: 'RATE_LIMITED',
      url: 'https://pkg/x',
    });
  });

  it('causes travel, a few levels deep', () => {
    const root = new TypeError('socket closed');
    const error = new PostGuardError(ErrorCode.SOURCE_FAILED, 'input failed', {
      cause: new Error('wrapper', { cause: root }),
    });
    const back = across(error) as PostGuardError;
    const cause = back.cause as Error;
    expect(cause.message).toBe('wrapper');
    expect((cause.cause as Error).name).toBe('TypeError');
    let deep: unknown = new Error('0');
    for (let i = 1; i < 10; i++) deep = new Error(String(i), { cause: deep });
    let depth = 0;
    for (let e = across(deep) as Error | undefined; e !== undefined; e = e.cause as Error | undefined) depth++;
    expect(depth).toBe(4);
  });

  it('plain errors keep name and a code if they had one; other values pass or become strings', () => {
    const dom = Object.assign(new Error('nope'), { name: 'AbortError', code: 20 });
    const back = across(dom) as Error & { code?: unknown };
    expect(back.name).toBe('AbortError');
    expect(back.code).toBeUndefined(); // a numeric code is not ours to keep
    expect(across('text')).toBe('text');
    expect(across({ a: 1 })).toEqual({ a: 1 });
    expect(across(undefined)).toBeUndefined();
    expect(encodeError(() => 1)).toMatch(/=>/);
    expect(encodeError({ f: () => 1 })).toBe('[object Object]');
    expect(isWireError(encodeError(new Error('x')))).toBe(true);
    expect(isWireError({ __postguardError: 2 })).toBe(false);
  });
});
