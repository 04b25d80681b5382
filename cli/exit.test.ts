import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { ErrorCode, PostGuardError } from '../lib/errors.js';
import { PkgClientError, PkgClientErrorCode } from '../lib/pkg/errors.js';
import { CliError, Exit, describeFailure } from './exit.js';

describe('exit codes', () => {
  it('are distinct', () => {
    const codes = Object.values(Exit);
    expect(new Set(codes).size).toBe(codes.length);
  });

  it('are all documented in cli/README.md', async () => {
    const readme = await readFile(new URL('./README.md', import.meta.url), 'utf8');
    const table = readme.slice(readme.indexOf('## Exit codes'), readme.indexOf('## Output files'));
    const documented = [...table.matchAll(/^\| (\d+) \|/gm)].map((m) => Number(m[1]));
    expect(documented.sort((a, b) => a - b)).toEqual(Object.values(Exit).sort((a, b) => a - b));
  });
});

describe('describeFailure', () => {
  it('maps every library error code to an exit code', () => {
    const expected: Record<ErrorCode, number> = {
      NOT_POSTGUARD: 3,
      UNSUPPORTED_VERSION: 3,
      WRONG_MODE: 3,
      SOURCE_FAILED: 3,
      SINK_FAILED: 3,
      CANCELLED: 3,
      HEADER_TOO_LARGE: 8,
      MALFORMED: 8,
      TRUNCATED: 8,
      BAD_SIGNATURE: 8,
      SENDER_MISMATCH: 8,
      TAMPERED: 8,
      ARMOR_INVALID: 8,
      WRONG_KEY: 7,
      NO_MATCHING_KEY: 7,
      UNKNOWN_RECIPIENT: 2,
      INVALID_POLICY: 2,
      TOO_LARGE: 2,
      INVALID_KEY: 4,
      INVALID_INPUT: 1,
      INVALID_STATE: 1,
    };
    for (const code of Object.values(ErrorCode)) {
      expect(describeFailure(new PostGuardError(code, 'detail')).exitCode, code).toBe(expected[code]);
    }
  });

  it('maps every PKG client error code to an exit code', () => {
    const expected: Record<PkgClientErrorCode, number> = {
      PKG_UNAVAILABLE: 4,
      RATE_LIMITED: 4,
      BAD_RESPONSE: 4,
      UNAUTHORIZED: 5,
      PKG_REJECTED: 5,
      SESSION_CANCELLED: 6,
      SESSION_TIMEOUT: 6,
      NOT_VALID: 6,
      ABORTED: 1,
      INVALID_ARGUMENT: 2,
      NOT_CACHED: 6,
      PRF_UNAVAILABLE: 1,
      PASSKEY_FAILED: 1,
      PASSKEY_MISMATCH: 1,
    };
    for (const code of Object.values(PkgClientErrorCode)) {
      expect(describeFailure(new PkgClientError(code, 'detail')).exitCode, code).toBe(expected[code]);
    }
  });

  it('tells an incomplete file from a changed one', () => {
    const cut = describeFailure(new PostGuardError(ErrorCode.TRUNCATED, 'input ended inside segment 3')).message;
    const changed = describeFailure(new PostGuardError(ErrorCode.TAMPERED, 'segment 3 failed authentication')).message;
    expect(cut).toMatch(/incomplete \(TRUNCATED\).*get it again/);
    expect(cut).not.toMatch(/changed/);
    expect(changed).toMatch(/damaged or was changed \(TAMPERED\)/);
  });

  it('says what happened in words a user can act on', () => {
    expect(describeFailure(new PostGuardError(ErrorCode.WRONG_KEY, 'x')).message).toMatch(/does not open this file/);
    expect(describeFailure(new PostGuardError(ErrorCode.TAMPERED, 'segment 3 failed')).message).toBe(
      'the encrypted file is damaged or was changed (TAMPERED): segment 3 failed',
    );
    expect(describeFailure(new PkgClientError(PkgClientErrorCode.SESSION_TIMEOUT, 'x')).message).toBe(
      'the identity session timed out',
    );
    expect(describeFailure(new CliError(Exit.FILE, 'cannot read x: no such file'))).toEqual({
      exitCode: 3,
      message: 'cannot read x: no such file',
    });
    const diskFull = new CliError(Exit.FILE, 'cannot write out.txt: no space left on the device');
    expect(
      describeFailure(
        new PostGuardError(ErrorCode.SINK_FAILED, `the output stream failed: ${diskFull}`, { cause: diskFull }),
      ),
    ).toEqual({
      exitCode: 3,
      message: 'cannot write out.txt: no space left on the device',
    });
    expect(
      describeFailure(new PostGuardError(ErrorCode.SOURCE_FAILED, 'the input stream failed', { cause: new Error('x') }))
        .message,
    ).toBe('the input stream failed (SOURCE_FAILED)');
    expect(describeFailure(new TypeError('oops'))).toEqual({ exitCode: 1, message: 'unexpected failure: oops' });
    expect(describeFailure('a string')).toEqual({ exitCode: 1, message: 'unexpected failure: a string' });
  });
});
