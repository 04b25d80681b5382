import { describe, expect, it } from 'vitest';
import { PkgClient, type PkgClientOptions } from './client.js';
import { retryAfterSeconds } from './http.js';
import { memoryStore } from './store.js';

/**
 * Status and body handling, against a fixture fetch that answers what the reference PKG (or a
 * broken one) answers. The real PKG is in client.test.ts; these are the answers it does not give.
 */

const URL_ = 'https://pkg.example';
const MPK = 'A'.repeat(896);
const VK = 'B'.repeat(43) + '=';
const JWT = 'e30.eyJzdGF0dXMiOiJET05FIn0.sig';

type Handler = (url: string, init: RequestInit) => Response | Promise<Response>;

function pkg(handler: Handler, options: Partial<PkgClientOptions> = {}) {
  const calls: Array<{ url: string; init: RequestInit }> = [];
  const client = new PkgClient({
    url: URL_,
    store: memoryStore(),
    timeoutMs: 200,
    fetch: async (input, init = {}) => {
      calls.push({ url: String(input), init });
      return handler(String(input), init);
    },
    ...options,
  });
  return { client, calls };
}

const json = (body: unknown, status = 200, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } });

const envelope = (code: string, status: number) => json({ error: true, code, message: code.toLowerCase() }, status);

describe('public keys', () => {
  it('accepts the reference shape and refuses keys that are not', async () => {
    expect(await pkg(() => json({ formatVersion: 0, publicKey: MPK })).client.masterPublicKey()).toBe(MPK);
    expect(await pkg(() => json({ formatVersion: 0, publicKey: VK })).client.verificationKey()).toBe(VK);
    for (const body of [
      { formatVersion: 0, publicKey: MPK.slice(1) },
      { formatVersion: 0, publicKey: VK },
      { formatVersion: 1, publicKey: MPK },
      { formatVersion: 0, publicKey: MPK.slice(1) + '!' },
      { format_version: 0 },
      [MPK],
    ]) {
      await expect(pkg(() => json(body)).client.masterPublicKey()).rejects.toMatchObject({ code: 'BAD_RESPONSE' });
    }
  });

  it('refuses a body that is not JSON, or too large to be a key', async () => {
    await expect(pkg(() => new Response('<html>')).client.masterPublicKey()).rejects.toMatchObject({
      code: 'BAD_RESPONSE',
      status: 200,
    });
    const huge = new Response(new Uint8Array(1024 * 1024).fill(32));
    await expect(pkg(() => huge).client.masterPublicKey()).rejects.toMatchObject({
      code: 'BAD_RESPONSE',
      message: expect.stringMatching(/larger than/),
    });
  });

  it('a 304 to a request that named no validator is a bad answer', async () => {
    await expect(pkg(() => new Response(null, { status: 304 })).client.masterPublicKey()).rejects.toMatchObject({
      code: 'BAD_RESPONSE',
      status: 304,
    });
  });
});

describe('status mapping', () => {
  it.each([
    [500, 'PKG_UNAVAILABLE'],
    [502, 'PKG_UNAVAILABLE'],
    [503, 'PKG_UNAVAILABLE'],
    [408, 'PKG_UNAVAILABLE'],
    [401, 'UNAUTHORIZED'],
    [400, 'PKG_REJECTED'],
    [403, 'PKG_REJECTED'],
    [404, 'PKG_REJECTED'],
  ])('HTTP %i → %s', async (status, code) => {
    await expect(pkg(() => new Response('x', { status })).client.masterPublicKey()).rejects.toMatchObject({
      code,
      status,
    });
  });

  it("keeps the PKG's own code from its envelope", async () => {
    const { client } = pkg(() => envelope('CHRONOLOGY', 400));
    await expect(client.userSecretKey(JWT, 5)).rejects.toMatchObject({
      code: 'PKG_REJECTED',
      serverCode: 'CHRONOLOGY',
      status: 400,
    });
    const refused = pkg(() => envelope('JWT_INVALID', 401)).client;
    await expect(refused.userSecretKey(JWT, 5)).rejects.toMatchObject({
      code: 'UNAUTHORIZED',
      serverCode: 'JWT_INVALID',
    });
  });

  it('429 is RATE_LIMITED with Retry-After, from our envelope or pg-pkg plain text', async () => {
    const plain = () =>
      new Response('Too many requests, retry in 7s', { status: 429, headers: { 'retry-after': '7' } });
    await expect(pkg(plain).client.masterPublicKey()).rejects.toMatchObject({
      code: 'RATE_LIMITED',
      retryAfter: 7,
      serverCode: undefined,
    });
    const ours = () => json({ error: true, code: 'RATE_LIMITED', message: 'x' }, 429);
    await expect(pkg(ours).client.masterPublicKey()).rejects.toMatchObject({
      code: 'RATE_LIMITED',
      retryAfter: undefined,
      serverCode: 'RATE_LIMITED',
    });
  });

  it('reads Retry-After as seconds or an HTTP date', () => {
    expect(retryAfterSeconds('12')).toBe(12);
    expect(retryAfterSeconds(new Date(10_000 + 5_000).toUTCString(), 10_000)).toBe(5);
    expect(retryAfterSeconds('soon')).toBeUndefined();
    expect(retryAfterSeconds(null)).toBeUndefined();
  });

  it('a network failure and a PKG that never answers are PKG_UNAVAILABLE', async () => {
    await expect(
      pkg(() => Promise.reject(new TypeError('fetch failed'))).client.masterPublicKey(),
    ).rejects.toMatchObject({
      code: 'PKG_UNAVAILABLE',
      status: undefined,
    });
    const hang: Handler = (_url, init) =>
      new Promise((_, reject) =>
        init.signal?.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError'))),
      );
    await expect(pkg(hang).client.masterPublicKey()).rejects.toMatchObject({
      code: 'PKG_UNAVAILABLE',
      message: expect.stringMatching(/no answer within 200 ms/),
    });
  });

  it('the caller aborting is ABORTED, at once, and names the reason', async () => {
    const hang: Handler = (_url, init) =>
      new Promise((_, reject) =>
        init.signal?.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError'))),
      );
    const { client } = pkg(hang, { timeoutMs: 60_000 });
    const controller = new AbortController();
    const pending = client.userSecretKey(JWT, 5, { signal: controller.signal });
    const reason = new Error('user left');
    controller.abort(reason);
    await expect(pending).rejects.toMatchObject({ code: 'ABORTED', cause: reason });
  });
});

describe('key answers', () => {
  const usk = 'C'.repeat(766) + '==';

  it('a key only for DONE + VALID, and only in the expected format', async () => {
    const answer = (body: unknown) => pkg(() => json(body)).client.userSecretKey(JWT, 5);
    expect(await answer({ status: 'DONE', proofStatus: 'VALID', key: usk })).toBe(usk);
    await expect(answer({ status: 'DONE', proofStatus: 'INVALID', key: usk })).rejects.toMatchObject({
      code: 'NOT_VALID',
    });
    await expect(answer({ status: 'CONNECTED' })).rejects.toMatchObject({ code: 'NOT_VALID' });
    await expect(answer({ status: 'DONE', proofStatus: 'VALID', key: usk.slice(4) })).rejects.toMatchObject({
      code: 'BAD_RESPONSE',
    });
    await expect(answer({ status: 'DONE', proofStatus: 'VALID' })).rejects.toMatchObject({ code: 'BAD_RESPONSE' });
  });

  it('sends the JWT as a Bearer credential to key/{ts}', async () => {
    const { client, calls } = pkg(() => json({ status: 'DONE', proofStatus: 'VALID', key: usk }), {
      prefix: 'request',
    });
    await client.userSecretKey(JWT, 1234);
    expect(calls[0]!.url).toBe(`${URL_}/v2/request/key/1234`);
    expect(new Headers(calls[0]!.init.headers).get('authorization')).toBe(`Bearer ${JWT}`);
  });

  it('signing keys: checks the shape, drops null values from policies', async () => {
    const key = {
      key: 'D'.repeat(128),
      policy: {
        ts: 9,
        con: [
          { t: 'x', v: 'a' },
          { t: 'y', v: null },
        ],
      },
    };
    const answer = (body: unknown) => pkg(() => json(body)).client.signingKeys({ apiKey: 'PG-abc' });
    expect(await answer({ status: 'DONE', proofStatus: 'VALID', pubSignKey: key })).toEqual({
      pubSignKey: { key: key.key, policy: { ts: 9, con: [{ t: 'x', v: 'a' }, { t: 'y' }] } },
    });
    await expect(
      answer({ status: 'DONE', proofStatus: 'VALID', pubSignKey: { ...key, key: 'short' } }),
    ).rejects.toMatchObject({ code: 'BAD_RESPONSE' });
    await expect(
      answer({ status: 'DONE', proofStatus: 'VALID', pubSignKey: { ...key, policy: { ts: -1, con: [] } } }),
    ).rejects.toMatchObject({ code: 'BAD_RESPONSE' });
    await expect(
      answer({ status: 'DONE', proofStatus: 'VALID', pubSignKey: key, privSignKey: { key: 1 } }),
    ).rejects.toMatchObject({ code: 'BAD_RESPONSE' });
    await expect(answer({ status: 'DONE', proofStatus: 'MISSING_ATTRIBUTES' })).rejects.toMatchObject({
      code: 'NOT_VALID',
    });
  });

  it('refuses arguments that would make a bad request, before sending', async () => {
    const { client, calls } = pkg(() => json({}));
    await expect(client.signingKeys({ apiKey: 'PG-a\r\nX-Evil: 1' })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await expect(client.userSecretKey('', 5)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(client.userSecretKey(JWT, -5)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(calls).toHaveLength(0);
    expect(() => new PkgClient({ url: 'ftp://pkg' })).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
  });
});

describe('session package', () => {
  it('refuses a start answer without a usable pointer or token', async () => {
    const start = (body: unknown) => pkg(() => json(body)).client.startSession({ con: [{ t: 'a.b.c.d' }] });
    const u = 'https://is.example/irma/session/abc';
    await expect(start({ sessionPtr: { u, irmaqr: 'disclosing' } })).rejects.toMatchObject({ code: 'BAD_RESPONSE' });
    await expect(
      start({ sessionPtr: { u: 'javascript:alert(1)', irmaqr: 'disclosing' }, token: 'abc' }),
    ).rejects.toMatchObject({ code: 'BAD_RESPONSE' });
    await expect(start({ sessionPtr: { u, irmaqr: 'disclosing' }, token: '../../x' })).rejects.toMatchObject({
      code: 'BAD_RESPONSE',
    });
  });
});
