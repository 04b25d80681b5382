import { describe, expect, it } from 'vitest';
import { ErrorCode, PostGuardError } from 'postguard-ts';
import { PkgClientError, PkgClientErrorCode } from 'postguard-ts/pkg';
import { DemoError, describeError } from './messages.js';

describe('describeError', () => {
  it('has words for every library and PKG-client code (a new code needs a sentence here)', () => {
    for (const code of [...Object.values(ErrorCode), ...Object.values(PkgClientErrorCode)]) {
      const text = describeError({ code });
      expect(text.title, code).not.toBe('Something went wrong.');
      expect(text.hint, code).not.toBe('');
      expect(text.code).toBe(code);
    }
  });

  it('reads codes from the real error classes', () => {
    expect(describeError(new PostGuardError(ErrorCode.TAMPERED, 'segment 3'))).toMatchObject({
      title: 'This file was changed after it was encrypted.',
      code: 'TAMPERED',
    });
    expect(describeError(new DemoError('UNKNOWN_DOWNLOAD', 'gone')).title).toBe(
      'This download link expired or was already used.',
    );
  });

  it("names the PKG's own code and its wait where it gave them", () => {
    expect(
      describeError(new PkgClientError(PkgClientErrorCode.PKG_REJECTED, 'no', { serverCode: 'CHRONOLOGY' })).hint,
    ).toBe('The key server says CHRONOLOGY.');
    expect(describeError(new PkgClientError(PkgClientErrorCode.RATE_LIMITED, 'slow', { retryAfter: 7 })).hint).toBe(
      'Try again in 7 seconds.',
    );
  });

  it('falls back to the message for anything without a known code', () => {
    expect(describeError(new Error('disk full'))).toEqual({
      title: 'Something went wrong.',
      hint: 'disk full',
      code: undefined,
    });
    expect(describeError('plain string')).toEqual({
      title: 'Something went wrong.',
      hint: 'plain string',
      code: undefined,
    });
    expect(describeError({ code: 'NEVER_HEARD_OF_IT' }).code).toBe('NEVER_HEARD_OF_IT');
  });
});
