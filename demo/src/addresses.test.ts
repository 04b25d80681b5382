import { describe, expect, it } from 'vitest';
import { MAX_RECIPIENTS, parseRecipients, parseSender } from './addresses.js';

describe('parseRecipients', () => {
  it('splits on commas, semicolons and white space, keeping each address once in the order typed', () => {
    expect(parseRecipients(' bob@example.com, carol@example.org;\nBOB@example.com  dave@example.net ')).toEqual({
      ok: true,
      addresses: ['bob@example.com', 'carol@example.org', 'dave@example.net'],
    });
  });

  it('names the first entry that is not an address, and refuses an empty or overlong list', () => {
    expect(parseRecipients('bob@example.com, bob')).toEqual({ ok: false, problem: 'bob is not an e-mail address.' });
    expect(parseRecipients(' ,; ')).toEqual({ ok: false, problem: 'Add at least one recipient.' });
    const many = Array.from({ length: MAX_RECIPIENTS + 1 }, (_, i) => `r${i}@example.com`).join(',');
    expect(parseRecipients(many).ok).toBe(false);
  });
});

describe('parseSender', () => {
  it('wants one address', () => {
    expect(parseSender(' alice@example.org ')).toEqual({ ok: true, address: 'alice@example.org' });
    expect(parseSender('')).toMatchObject({ ok: false });
    expect(parseSender('alice@example')).toMatchObject({
      ok: false,
      problem: 'alice@example is not an e-mail address.',
    });
  });
});
