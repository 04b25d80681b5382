import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseMailboxes, MailboxError } from './mailboxes.js';
import { downloadLink, formatSize, senderDisplayName } from './outbox.js';
import { receivePage } from './receive-page.js';
import { RangeSyntaxError, parseContentRange, parseRangeHeader } from './range.js';
import { nextToken, tokensEqual } from './tokens.js';
import { createHash } from 'node:crypto';

describe('parseContentRange (Cryptify upload semantics)', () => {
  it('reads start, exclusive end and size', () => {
    expect(parseContentRange('bytes 0-5/*')).toEqual({ start: 0n, end: 5n });
    expect(parseContentRange('bytes 10-20/100')).toEqual({ start: 10n, end: 20n, size: 100n });
    expect(parseContentRange('bytes */42')).toEqual({ size: 42n });
    expect(parseContentRange('bytes */*')).toEqual({});
    expect(parseContentRange('  bytes   +3-+9/*  ')).toEqual({ start: 3n, end: 9n });
    // Cryptify ignores anything after a second '-'.
    expect(parseContentRange('bytes 1-2-3/*')).toEqual({ start: 1n, end: 2n });
    expect(parseContentRange('bytes 0-18446744073709551615/*')).toEqual({ start: 0n, end: (1n << 64n) - 1n });
  });

  it('rejects everything else with RangeSyntaxError', () => {
    for (const bad of [
      '',
      'bytes',
      'bytes 0-5',
      'bytes 0-5/*/1',
      'items 0-5/*',
      'bytes 0-5/* extra',
      'bytes 5/*',
      'bytes -5/*',
      'bytes 5-/*',
      'bytes a-5/*',
      'bytes 0-5/x',
      'bytes 0x1-5/*',
      'bytes 0-18446744073709551616/*',
      'bytes */-1',
    ]) {
      expect(() => parseContentRange(bad), bad).toThrow(RangeSyntaxError);
    }
  });

  it('round-trips any u64 pair and size', () => {
    const u64 = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n });
    fc.assert(
      fc.property(u64, u64, fc.option(u64, { nil: undefined }), (start, end, size) => {
        const header = `bytes ${start}-${end}/${size ?? '*'}`;
        expect(parseContentRange(header)).toEqual(size === undefined ? { start, end } : { start, end, size });
      }),
    );
  });
});

describe('parseRangeHeader (downloads, inclusive ends)', () => {
  it('answers single ranges, clamped to the file', () => {
    expect(parseRangeHeader('bytes=0-9', 100)).toEqual({ start: 0, endInclusive: 9 });
    expect(parseRangeHeader('bytes=90-', 100)).toEqual({ start: 90, endInclusive: 99 });
    expect(parseRangeHeader('bytes=90-1000', 100)).toEqual({ start: 90, endInclusive: 99 });
    expect(parseRangeHeader('bytes=-10', 100)).toEqual({ start: 90, endInclusive: 99 });
    expect(parseRangeHeader('bytes=-1000', 100)).toEqual({ start: 0, endInclusive: 99 });
    expect(parseRangeHeader('bytes= 5 - 6 ', 100)).toEqual({ start: 5, endInclusive: 6 });
  });

  it('refuses malformed, multiple and unsatisfiable ranges', () => {
    for (const [header, size] of [
      ['bytes=100-', 100],
      ['bytes=5-4', 100],
      ['bytes=-0', 100],
      ['bytes=0-1,3-4', 100],
      ['items=0-1', 100],
      ['bytes=a-b', 100],
      ['bytes=5', 100],
      ['bytes=0-', 0],
      ['bytes=-5', 0],
      ['bytes=0-99999999999999999999999', 100],
    ] as const) {
      expect(parseRangeHeader(header, size), `${header} of ${size}`).toBeUndefined();
    }
  });
});

describe('parseMailboxes', () => {
  it('accepts bare and named addresses, comma separated', () => {
    expect(parseMailboxes('a@example.org')).toEqual(['a@example.org']);
    expect(parseMailboxes('a@example.org, b.c+d@sub.example.org')).toEqual(['a@example.org', 'b.c+d@sub.example.org']);
    expect(parseMailboxes('Alice <a@example.org>,"Bob, Jr." <b@example.org>')).toEqual([
      'a@example.org',
      'b@example.org',
    ]);
  });

  it('rejects what is not a mailbox list', () => {
    for (const bad of [
      '',
      ' ',
      'alice',
      'a@',
      '@b',
      'a@b@c',
      'a@example.org,',
      'a@example.org,,b@example.org',
      'a b@example.org',
      'Alice <a@example.org',
    ]) {
      expect(() => parseMailboxes(bad), bad).toThrow(MailboxError);
    }
  });
});

describe('tokens', () => {
  it('chains SHA-256 over the previous token text and the chunk', () => {
    const prev = 'ab'.repeat(32);
    const chunk = Uint8Array.of(1, 2, 3);
    const expected = createHash('sha256').update(Buffer.from(prev, 'ascii')).update(chunk).digest('hex');
    expect(nextToken(prev, chunk)).toBe(expected);
    expect(tokensEqual(expected, expected)).toBe(true);
    expect(tokensEqual(expected, expected.slice(1))).toBe(false);
    expect(tokensEqual(expected, `${expected.slice(0, -1)}0`)).toBe(expected.endsWith('0'));
  });
});

describe('mail details', () => {
  it('formats sizes as Cryptify does (1024-based, one decimal)', () => {
    expect(formatSize(0)).toBe('0 B');
    expect(formatSize(1023)).toBe('1023.0 B');
    expect(formatSize(1024)).toBe('1.0 kB');
    expect(formatSize(1536)).toBe('1.5 kB');
    expect(formatSize(5 * 1024 ** 3)).toBe('5.0 GB');
    expect(formatSize(3 * 1024 ** 5)).toBe('3072.0 TB');
  });

  it('names the sender from disclosed name attributes, else PostGuard', () => {
    expect(senderDisplayName([])).toBe('PostGuard');
    expect(senderDisplayName([['pbdf.gemeente.personalData.fullname', 'Jan Jansen']])).toBe('Jan Jansen');
    expect(senderDisplayName([['pbdf.gemeente.personalData.fullname', '']])).toBe('PostGuard');
    expect(
      senderDisplayName([
        ['irma-demo.pbdf.passport.firstName', 'Jan'],
        ['irma-demo.pbdf.passport.lastName', 'Jansen'],
      ]),
    ).toBe('Jan Jansen');
    expect(senderDisplayName([['pbdf.pbdf.passport.firstName', 'Jan']])).toBe('PostGuard');
  });

  it("links to the website's download page for an origin, to the page itself for a page", () => {
    expect(downloadLink('https://postguard.eu', 'u-1', 'a+b@example.org')).toBe(
      'https://postguard.eu/download?uuid=u-1&recipient=a%2Bb%40example.org',
    );
    expect(downloadLink('https://postguard.eu/', 'u-1', 'b@example.org')).toBe(
      'https://postguard.eu/download?uuid=u-1&recipient=b%40example.org',
    );
    // An app's receive page (pg-dev --public-url): the link opens it with the upload and the recipient.
    expect(downloadLink('http://127.0.0.1:5173/app/receive.html', 'u-1', 'b@example.org')).toBe(
      'http://127.0.0.1:5173/app/receive.html?uuid=u-1&recipient=b%40example.org',
    );
  });

  it("pg-dev's own receive page says how to open the file, and escapes what the link says", () => {
    const uuid = '0b5e3a8e-6f1c-4d2a-9a51-3f0e2b7c9d10';
    const html = receivePage({
      uuid,
      recipient: '<img src=x onerror=alert(1)>@example.org',
      storageUrl: 'http://127.0.0.1:8090',
      pkgUrl: 'http://127.0.0.1:8080',
    });
    expect(html).toContain('--public-url');
    expect(html).toContain(`http://127.0.0.1:8090/filedownload/${uuid}`);
    expect(html).toContain('pg-cli dec -p http://127.0.0.1:8080');
    expect(html).not.toContain('<img');
    expect(html).toContain('&#60;img src=x onerror=alert(1)&#62;@example.org');
    // Anything but an upload id is not echoed into the page.
    const odd = receivePage({ uuid: '"><script>', recipient: undefined, storageUrl: 'http://s', pkgUrl: undefined });
    expect(odd).not.toContain('<script>');
    expect(odd).toContain('This link names no upload.');
  });
});
