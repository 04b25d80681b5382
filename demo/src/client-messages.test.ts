import { describe, expect, it } from 'vitest';
import { ClientError, ClientErrorCode } from 'postguard-ts/client';
import { describeClientError } from './client-messages.js';

/** The receive page's words for the client's errors: the wrong person is told whom the file is for. */

const refused = () =>
  new ClientError(
    ClientErrorCode.SESSION_FAILED,
    'the PKG issues no key for this session (status DONE, proof MISSING_ATTRIBUTES)',
    { cause: new Error('the PKG issues no key for this session (status DONE, proof MISSING_ATTRIBUTES)') },
  );

describe('describeClientError', () => {
  it('a proof of someone else (MISSING_ATTRIBUTES) names the recipient the file is for, not the proof status', () => {
    const text = describeClientError(refused(), 'bob@example.org');
    expect(text.title).toBe('This file is for bob@example.org.');
    expect(text.hint).toContain('Open the link with the Yivi app that holds bob@example.org');
    expect(`${text.title} ${text.hint}`).not.toMatch(/MISSING_ATTRIBUTES|without a proof/);
    expect(text.code).toBe('SESSION_FAILED');
  });

  it('other session endings, or no recipient known, keep the general text', () => {
    const cancelled = new ClientError(ClientErrorCode.SESSION_FAILED, 'the identity session was cancelled');
    expect(describeClientError(cancelled, 'bob@example.org').title).toBe('The Yivi session ended without a proof.');
    expect(describeClientError(refused()).title).toBe('The Yivi session ended without a proof.');
    const other = new ClientError(ClientErrorCode.PKG_UNAVAILABLE, 'MISSING_ATTRIBUTES in an unrelated message');
    expect(describeClientError(other, 'bob@example.org').title).toBe('The key server (PKG) cannot be reached.');
  });
});
