import { describe, expect, it } from 'vitest';
import { PostGuard, ClientError, ClientErrorCode } from './index.js';
import { buildPolicy } from './recipients.js';

/** The helpers and encrypt()'s input checks: all synchronous, before anything is sent. */

const pg = new PostGuard({ pkgUrl: 'https://pkg.example.org', storageUrl: 'https://files.example.org' });
const types = { email: 'pbdf.sidn-pbdf.email.email', domain: 'pbdf.sidn-pbdf.email.domain' };

function sdkError(run: () => unknown): ClientError {
  try {
    run();
  } catch (e) {
    expect(e).toBeInstanceOf(ClientError);
    return e as ClientError;
  }
  throw new Error('did not throw');
}

const file = { name: 'a.txt', content: new Uint8Array(1) };

describe('recipients', () => {
  it('email(): the address, bound to the e-mail attribute', () => {
    const r = pg.recipient.email('alice@example.org');
    expect(buildPolicy([r], 1700000000, types)).toEqual({
      'alice@example.org': { ts: 1700000000, con: [{ t: types.email, v: 'alice@example.org' }] },
    });
  });

  it('emailDomain(): as the .NET SDK, keyed by what was given and bound to the domain part', () => {
    const policy = buildPolicy(
      [pg.recipient.emailDomain('alice@example.org'), pg.recipient.emailDomain('example.net')],
      5,
      types,
    );
    expect(policy).toEqual({
      'alice@example.org': { ts: 5, con: [{ t: types.domain, v: 'example.org' }] },
      'example.net': { ts: 5, con: [{ t: types.domain, v: 'example.net' }] },
    });
  });

  it('extraAttribute() adds required attributes after the base one, chainable', () => {
    const r = pg.recipient
      .email('a@example.org')
      .extraAttribute('pbdf.gemeente.personalData.surname', 'Jansen')
      .extraAttribute('x.y.z', 'w');
    expect(buildPolicy([r], 1, types)['a@example.org']!.con).toEqual([
      { t: types.email, v: 'a@example.org' },
      { t: 'pbdf.gemeente.personalData.surname', v: 'Jansen' },
      { t: 'x.y.z', v: 'w' },
    ]);
    expect(sdkError(() => r.extraAttribute('surname', 'x')).code).toBe(ClientErrorCode.INVALID_INPUT);
    expect(sdkError(() => r.extraAttribute('x.y.z', '')).code).toBe(ClientErrorCode.INVALID_INPUT);
  });

  it('refuses what is not an address (or a domain, for emailDomain)', () => {
    for (const bad of ['', 'alice', 'a@', '@b', 'a@b@c', ' a@b.c', 'a b@c.d', 'a@b.c\n', 7, undefined]) {
      expect(sdkError(() => pg.recipient.email(bad as string)).code, String(bad)).toBe(ClientErrorCode.INVALID_INPUT);
    }
    for (const bad of ['', 'a@b@c', 'exa mple.org', '.org', 'example..org', '@example.org', 7]) {
      expect(sdkError(() => pg.recipient.emailDomain(bad as string)).code, String(bad)).toBe(
        ClientErrorCode.INVALID_INPUT,
      );
    }
  });
});

describe('sign.apiKey', () => {
  it('needs PG- and printable characters', () => {
    expect(pg.sign.apiKey('PG-abc_DEF-123').type).toBe('apiKey');
    for (const bad of ['', 'PG-', 'pg-abc', 'abc', 'Bearer PG-abc', 'PG-a b', 'PG-a\r\nX-Evil: 1', 'PG-é', 7, null]) {
      const e = sdkError(() => pg.sign.apiKey(bad as string));
      expect(e.code, String(bad)).toBe(ClientErrorCode.INVALID_API_KEY);
      if (typeof bad === 'string' && bad.length > 3) expect(e.message).not.toContain(bad);
    }
  });

  it('never shows the key when printed or serialised', () => {
    const sign = pg.sign.apiKey('PG-secret-value');
    expect(JSON.stringify(sign)).not.toContain('secret');
    expect(String(sign)).not.toContain('secret');
  });
});

describe('encrypt() input checks', () => {
  const recipients = [pg.recipient.email('bob@example.org')];
  const sign = pg.sign.apiKey('PG-key');

  it('needs at least one file and one recipient, real helpers and a sign method', () => {
    const cases: unknown[] = [
      undefined,
      { files: [], recipients, sign },
      { files: 'a.txt', recipients, sign },
      { files: [file], recipients: [], sign },
      { files: [file], recipients: [{ email: 'bob@example.org', kind: 'email' }], sign },
      { files: [file], recipients, sign: { type: 'apiKey', apiKey: 'PG-key' } },
      { files: [file], recipients },
    ];
    for (const input of cases) {
      expect(sdkError(() => pg.encrypt(input as never)).code, JSON.stringify(input)).toBe(
        ClientErrorCode.INVALID_INPUT,
      );
    }
  });

  it('refuses duplicate recipients', () => {
    const e = sdkError(() =>
      pg.encrypt({
        files: [file],
        recipients: [pg.recipient.email('b@x.org'), pg.recipient.emailDomain('b@x.org')],
        sign,
      }),
    );
    expect(e.message).toMatch(/duplicate recipient "b@x.org"/);
  });

  it('reduces file names to their last segment, and refuses empty, dot, duplicate or control-character names', () => {
    expect(() =>
      pg.encrypt({ files: [{ name: '../../etc/passwd', content: new Uint8Array(1) }], recipients, sign }),
    ).not.toThrow();
    const bad: Array<Array<{ name: unknown; content: unknown }>> = [
      [{ name: '', content: new Uint8Array(1) }],
      [{ name: 'dir/', content: new Uint8Array(1) }],
      [{ name: 'a\\..', content: new Uint8Array(1) }],
      [{ name: '.', content: new Uint8Array(1) }],
      [{ name: 'a\u0000b', content: new Uint8Array(1) }],
      [{ name: 7, content: new Uint8Array(1) }],
      [
        { name: 'a/x.txt', content: new Uint8Array(1) },
        { name: 'b\\x.txt', content: new Uint8Array(1) },
      ],
      [{ name: 'a.txt', content: 'text' }],
      [{ name: 'a.txt', content: [1, 2] }],
      [{ name: 'a.txt', content: new Uint8Array(1), lastModified: 'yesterday' } as never],
      [{ name: 'a.txt', content: new Uint8Array(1), lastModified: new Date(NaN) } as never],
    ];
    for (const files of bad) {
      expect(sdkError(() => pg.encrypt({ files: files as never, recipients, sign })).code, JSON.stringify(files)).toBe(
        ClientErrorCode.INVALID_INPUT,
      );
    }
    expect(
      sdkError(() =>
        pg.encrypt({
          files: [
            { name: 'a/x.txt', content: new Uint8Array(1) },
            { name: 'b\\x.txt', content: new Uint8Array(1) },
          ],
          recipients,
          sign,
        }),
      ).message,
    ).toMatch(/duplicate ZIP entry name "x.txt"/);
  });

  it('accepts Uint8Array, Blob and ReadableStream contents, and sends nothing yet', () => {
    let calls = 0;
    const lazy = new PostGuard({
      pkgUrl: 'https://pkg.example.org',
      storageUrl: 'https://files.example.org',
      fetch: async () => {
        calls++;
        throw new Error('no network in this test');
      },
    });
    lazy.encrypt({
      files: [
        { name: 'a', content: new Uint8Array(1) },
        { name: 'b', content: new Blob(['x']) },
        { name: 'c', content: new ReadableStream() },
      ],
      recipients,
      sign,
    });
    expect(calls).toBe(0);
  });
});
