import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { PostGuard } from './index.js';
import type { PostGuardConfig } from './index.js';
import { resolveConfig } from './config.js';
import { CLIENT_VERSION } from './version.js';

/** Constructor validation: every rule, each failure a TypeError whose message starts with the field. */

const ok: PostGuardConfig = { pkgUrl: 'https://pkg.example.org', storageUrl: 'https://files.example.org' };

function typeError(config: unknown): TypeError {
  try {
    new PostGuard(config as PostGuardConfig);
  } catch (e) {
    expect(e).toBeInstanceOf(TypeError);
    return e as TypeError;
  }
  throw new Error(`accepted ${JSON.stringify(config)}`);
}

describe('new PostGuard(config)', () => {
  it('accepts https URLs, keeps a path prefix and drops a trailing slash', () => {
    const c = resolveConfig({ pkgUrl: 'https://pkg.example.org/', storageUrl: 'https://example.org/files/' });
    expect(c.pkgUrl).toBe('https://pkg.example.org');
    expect(c.storageUrl).toBe('https://example.org/files');
    expect(c.uploadChunkSize).toBe(5_000_000);
    expect(c.timeouts).toEqual({
      pkgMs: 30_000,
      storageMs: 60_000,
      finalizeMs: 120_000,
      idleMs: 30_000,
      transferMs: 0,
      uploadMs: 0,
    });
    expect(c.retry).toEqual({ maxAttempts: 5, initialDelayMs: 500, maxDelayMs: 30_000 });
    expect(c.attributes).toEqual({ email: 'pbdf.sidn-pbdf.email.email', domain: 'pbdf.sidn-pbdf.email.domain' });
  });

  it('needs a config object', () => {
    for (const bad of [undefined, null, 'https://pkg.example.org', 42])
      expect(typeError(bad).message).toMatch(/^config:/);
  });

  it('refuses any pkgUrl or storageUrl that is not an absolute https URL, naming the field', () => {
    const bad = [
      undefined,
      '',
      'http://pkg.example.org',
      'http://localhost:8080',
      'ftp://pkg.example.org',
      'ws://pkg.example.org',
      'pkg.example.org',
      '/v2',
      'https://',
      'https://user:pass@pkg.example.org',
      'https://pkg.example.org/?x=1',
      'https://pkg.example.org/#frag',
      42,
    ];
    for (const value of bad) {
      expect(typeError({ ...ok, pkgUrl: value }).message, String(value)).toMatch(/^pkgUrl: /);
      // No storage service is allowed (the client then seals and opens without uploading); a wrong one is not.
      if (value === undefined) continue;
      expect(typeError({ ...ok, storageUrl: value }).message, String(value)).toMatch(/^storageUrl: /);
      expect(typeError({ pkgUrl: ok.pkgUrl, cryptifyUrl: value }).message, String(value)).toMatch(/^cryptifyUrl: /);
    }
    expect(typeError({ ...ok, pkgUrl: 'http://localhost:8080' }).message).toMatch(/allowInsecureUrls/);
  });

  it("takes pg-js's names: cryptifyUrl for the storage service, emailAttributes for the attribute types; not both spellings", () => {
    const c = resolveConfig({
      pkgUrl: ok.pkgUrl,
      cryptifyUrl: 'https://files.example.org/',
      emailAttributes: { email: 'irma-demo.sidn-pbdf.email.email' },
    });
    expect(c.storageUrl).toBe('https://files.example.org');
    expect(c.attributes.email).toBe('irma-demo.sidn-pbdf.email.email');
    expect(resolveConfig({ pkgUrl: ok.pkgUrl }).storageUrl).toBe('');
    expect(typeError({ ...ok, cryptifyUrl: ok.storageUrl }).message).toMatch(
      /^cryptifyUrl: give cryptifyUrl or storageUrl/,
    );
    expect(typeError({ ...ok, attributes: {}, emailAttributes: {} }).message).toMatch(/^emailAttributes: /);
  });

  it('with allowInsecureUrls accepts http on loopback names only', () => {
    for (const url of [
      'http://localhost:8080',
      'http://127.0.0.1:9',
      'http://[::1]:8000/base',
      'https://pkg.example.org',
    ]) {
      expect(resolveConfig({ pkgUrl: url, storageUrl: url, allowInsecureUrls: true }).pkgUrl).toBe(
        url.replace(/\/$/, ''),
      );
    }
    for (const url of [
      'http://pkg.example.org',
      'http://localhost.evil.example',
      'http://127.0.0.2',
      'http://10.0.0.1',
      'ftp://localhost',
    ]) {
      expect(typeError({ ...ok, storageUrl: url, allowInsecureUrls: true }).message, url).toMatch(/^storageUrl: /);
    }
    expect(typeError({ ...ok, allowInsecureUrls: 'yes' }).message).toMatch(/^allowInsecureUrls: /);
  });

  it('checks fetch, headers, timeouts, retry, chunk size and attribute types', () => {
    const cases: Array<[Partial<Record<keyof PostGuardConfig, unknown>>, RegExp]> = [
      [{ fetch: 'fetch' }, /^fetch: /],
      [{ headers: 'x' }, /^headers: /],
      [{ headers: ['a'] }, /^headers: /],
      [{ headers: { 'bad name': 'x' } }, /^headers: /],
      [{ headers: { 'x-a': 'line\r\nbreak' } }, /^headers: /],
      [{ headers: { 'x-a': 7 } }, /^headers: /],
      [{ timeouts: 5 }, /^timeouts: /],
      [{ timeouts: { pkgMs: 0 } }, /^timeouts\.pkgMs: /],
      [{ timeouts: { storageMs: Infinity } }, /^timeouts\.storageMs: /],
      [{ timeouts: { finalizeMs: 2 ** 31 } }, /^timeouts\.finalizeMs: /],
      [{ timeouts: { pkgMs: '100' } }, /^timeouts\.pkgMs: /],
      [{ retry: { maxAttempts: 0 } }, /^retry\.maxAttempts: /],
      [{ retry: { maxAttempts: 1.5 } }, /^retry\.maxAttempts: /],
      [{ retry: { maxAttempts: 21 } }, /^retry\.maxAttempts: /],
      [{ retry: { initialDelayMs: -1 } }, /^retry\.initialDelayMs: /],
      [{ retry: { maxDelayMs: NaN } }, /^retry\.maxDelayMs: /],
      [{ uploadChunkSize: 0 }, /^uploadChunkSize: /],
      [{ uploadChunkSize: 1.5 }, /^uploadChunkSize: /],
      [{ uploadChunkSize: 2 ** 30 + 1 }, /^uploadChunkSize: /],
      [{ attributes: { email: 'email' } }, /^attributes\.email: /],
      [{ attributes: { domain: 'a b.c' } }, /^attributes\.domain: /],
      [{ attributes: 'x' }, /^attributes: /],
    ];
    for (const [patch, message] of cases)
      expect(typeError({ ...ok, ...patch }).message, JSON.stringify(patch)).toMatch(message);
    expect(
      resolveConfig({ ...ok, retry: { maxAttempts: 1, initialDelayMs: 0 }, uploadChunkSize: 1 }).retry.maxAttempts,
    ).toBe(1);
  });

  it('adds a client-version header unless the caller set one (any case)', () => {
    expect(resolveConfig(ok).headers).toEqual({
      'X-POSTGUARD-CLIENT-VERSION': `node,${process.versions.node},postguard-ts,${CLIENT_VERSION}`,
    });
    expect(resolveConfig({ ...ok, headers: { 'x-postguard-client-version': 'mine' } }).headers).toEqual({
      'x-postguard-client-version': 'mine',
    });
  });

  it('reports the package version', () => {
    const pkg = JSON.parse(readFileSync(new URL('../lib/package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    expect(CLIENT_VERSION).toBe(pkg.version);
  });
});

describe('pg.receiveLink({ uuid }, recipient): the link to your receive page', () => {
  const uuid = '0b5e3a8e-6f1c-4d2a-9a51-3f0e2b7c9d10';

  it('adds the upload id and the recipient to receiveUrl, keeping its own query', () => {
    const pg = new PostGuard({ ...ok, receiveUrl: 'https://app.example.org/receive.html' });
    expect(pg.receiveLink({ uuid })).toBe(`https://app.example.org/receive.html?uuid=${uuid}`);
    expect(pg.receiveLink({ uuid }, 'bob+x@example.com')).toBe(
      `https://app.example.org/receive.html?uuid=${uuid}&recipient=bob%2Bx%40example.com`,
    );
    const withQuery = new PostGuard({ ...ok, receiveUrl: 'http://localhost:5173/r?lang=nl' });
    const link = new URL(withQuery.receiveLink({ uuid }, 'bob@example.com'));
    expect([...link.searchParams]).toEqual([
      ['lang', 'nl'],
      ['uuid', uuid],
      ['recipient', 'bob@example.com'],
    ]);
  });

  it('refuses without a receiveUrl, and anything but an upload id', () => {
    expect(() => new PostGuard(ok).receiveLink({ uuid })).toThrow(
      expect.objectContaining({ code: 'INVALID_INPUT', message: expect.stringContaining('receiveUrl') }),
    );
    const pg = new PostGuard({ ...ok, receiveUrl: 'https://app.example.org/receive.html' });
    for (const bad of ['', 'not-an-id', `${uuid}&recipient=mallory@example.com`, '../x'])
      expect(() => pg.receiveLink({ uuid: bad }), bad).toThrow(expect.objectContaining({ code: 'INVALID_INPUT' }));
    expect(() => pg.receiveLink({ uuid }, '')).toThrow(expect.objectContaining({ code: 'INVALID_INPUT' }));
  });

  it('receiveUrl is an absolute http(s) URL of a page, named in the error', () => {
    for (const bad of [
      'receive.html',
      'javascript:alert(1)',
      'https://app.example.org/r#x',
      'https://u:p@app.example.org/',
      7,
    ])
      expect(typeError({ ...ok, receiveUrl: bad }).message).toMatch(/^receiveUrl:/);
  });
});
