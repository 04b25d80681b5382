import { generateKeyPairSync } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import type { FastifyRequest } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIB, expectLinearTime, repeated as run } from '../test/linear-time.js';
import { bearerCredential } from './auth.js';
import { PkgError } from './errors.js';
import { ResultJwtVerifier } from './idp/jwt.js';
import { disclosingClaims, signPayload } from './idp/testing.js';
import { manualClock } from '../devtools/standin/testing.js';
import { disclose } from '../devtools/standin/wallet.js';
import { startPkg, type RunningPkg } from './testing.js';

/**
 * What the PKG reads from strangers, fed the worst input we could craft and a benign one of the
 * same size (test/linear-time.ts): the Authorization header (JWT or API key), the session JWT, the
 * JSON bodies of the key and session routes, If-None-Match and If-Modified-Since, and the
 * attribute values a session proved, which the key routes canonicalise (an e-mail's whitespace
 * trim). Each is refused with a typed error or handled in time linear in its size.
 */

const EMAIL = 'irma-demo.sidn-pbdf.email.email';
const b64url = (text: string) => Buffer.from(text).toString('base64url');
const typed = (error: unknown) => error instanceof PkgError;

let pkg: RunningPkg;

beforeAll(async () => {
  pkg = await startPkg();
});

afterAll(async () => {
  await pkg?.close();
});

/** The PKG's answer to a request made in process (no socket: no HTTP header size limit either). */
async function inject(options: {
  method?: 'GET' | 'POST';
  url: string;
  headers?: Record<string, string>;
  payload?: string;
}): Promise<{ status: number; code: string | undefined }> {
  const response = await pkg.app.inject({ method: options.method ?? 'GET', ...options });
  const type = String(response.headers['content-type'] ?? '');
  const code = type.startsWith('application/json') ? (response.json() as { code?: string }).code : undefined;
  return { status: response.statusCode, code };
}

describe('Authorization: Bearer (server/auth.ts)', () => {
  const credential = (authorization: string) => bearerCredential({ headers: { authorization } } as FastifyRequest);
  const crafted: Array<[string, (n: number) => string]> = [
    ['spaces before the credential', (n) => `Bearer ${run(' ', n)}x`],
    ['spaces after it, then a stray character', (n) => `Bearer x${run(' ', n)}!`],
    ['a long token, then a stray character', (n) => `Bearer ${run('a', n)}!`],
    ['a run of padding', (n) => `Bearer a${run('=', n)}!`],
    ['padding without a token', (n) => `Bearer ${run('=', n)}`],
    ['words separated by spaces', (n) => `Bearer ${run('a ', n)}`],
    ['a scheme of spaces', (n) => `bearer${run(' ', n)}`],
    ['an API key', (n) => `Bearer PG-${run('a-_', n)}`],
  ];
  it.each(crafted)('%s', async (what, header) => {
    await expectLinearTime(
      `bearerCredential, ${what}`,
      (n) => ({ crafted: () => credential(header(n)), benign: () => credential(`Bearer ${run('a', n)}`) }),
      { refused: typed },
    );
  });

  it('through the app: a 1 MiB Authorization is 401, and over a socket Node refuses it (431)', async () => {
    await expectLinearTime('GET key with a crafted Authorization', (n) => ({
      crafted: async () =>
        expect(await inject({ url: '/v2/irma/key/1', headers: { authorization: `Bearer a${run(' ', n)}!` } })).toEqual({
          status: 401,
          code: 'UNAUTHENTICATED',
        }),
      benign: () => inject({ url: '/v2/irma/key/1', headers: { authorization: `Basic ${run('a', n)}` } }),
    }));
    const status = await new Promise<number>((resolve, reject) => {
      const url = new URL('/v2/irma/key/1', pkg.url);
      const req = httpRequest(url, { headers: { authorization: `Bearer ${run(' ', MIB)}x` } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.end();
    });
    expect(status).toBe(431);
  });
});

describe('the session JWT (server/idp/jwt.ts)', () => {
  const clock = manualClock(1_800_000_000);
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const pem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
  const verifier = new ResultJwtVerifier({ fetchPublicKey: async () => pem, clock });
  const now = clock.now();
  const claims = (extra: Record<string, unknown>) => disclosingClaims(now, undefined, extra);
  const sign = (payload: string, header?: Record<string, unknown>) => signPayload(payload, privateKey, header);
  /** A signed token whose JSON payload is about `n` characters once encoded, padded with a claim of `unit`. */
  const padded = (n: number, unit: string, extra: Record<string, unknown> = {}) =>
    sign(JSON.stringify(claims({ ...extra, pad: run(unit, Math.max(0, (n * 3) / 4 - 600)) })));
  const benign = async (n: number) => {
    const token = await padded(n, 'a');
    return () => verifier.verify(token);
  };

  it('at 1 MiB, anything is refused before it is parsed', async () => {
    await expectLinearTime(
      'verify, a long run of one character',
      (n) => ({ crafted: () => verifier.verify(`${run('a', n)}!`), benign: () => verifier.verify(run('a', n)) }),
      { refused: typed },
    );
  });

  it('under the 64 KiB cap: nesting, separators, whitespace and many disclosed groups', async () => {
    const size = 60 * 1024;
    const crafted: Array<[string, (n: number) => Promise<string> | string]> = [
      ['a header of nested arrays', (n) => `${b64url(`{"alg":"RS256","x":${run('[', n / 3)}}`)}.e30.`],
      ['dots and dashes', (n) => `a.${run('-', n - 4)}.!`],
      ['a run of separators', (n) => `a.a${run('.', n)}`],
      ['a signed payload of nested arrays', (n) => sign(`{"x":${run('[', (n * 3) / 4 - 16)}`)],
      [
        'a signed payload padded with whitespace',
        (n) => sign(`${run(' \t\n', (n * 3) / 4 - 300)}${JSON.stringify(claims({}))}`),
      ],
      [
        'many empty disclosed groups',
        (n) => sign(JSON.stringify(claims({ disclosed: Array.from({ length: n / 4 }, () => []) }))),
      ],
      [
        'too many disclosed attributes',
        (n) =>
          sign(
            JSON.stringify(
              claims({ disclosed: [Array.from({ length: n / 80 }, () => ({ id: EMAIL, status: 'NULL' }))] }),
            ),
          ),
      ],
      [
        'a disclosed e-mail of whitespace',
        (n) =>
          padded(0, 'a', {
            disclosed: [[{ id: EMAIL, status: 'PRESENT', rawvalue: `a${run(' ', (n * 3) / 4 - 800)}a` }]],
          }),
      ],
    ];
    for (const [what, token] of crafted) {
      await expectLinearTime(
        `verify, ${what}`,
        async (n) => {
          const jwt = await token(n);
          return { crafted: () => verifier.verify(jwt), benign: await benign(n) };
        },
        { size, refused: typed },
      );
    }
  });
});

describe('request bodies and conditional headers, through the app', () => {
  /** start → the wallet discloses → the session JWT. */
  async function sessionJwt(value: string): Promise<string> {
    const response = await pkg.app.inject({
      method: 'POST',
      url: '/v2/request/start',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ con: [{ t: EMAIL }] }),
    });
    expect(response.statusCode).toBe(200);
    const session = response.json() as { token: string };
    expect((await disclose(session, { [EMAIL]: value })).proofStatus).toBe('VALID');
    return (await pkg.app.inject({ url: `/v2/request/jwt/${session.token}` })).body;
  }

  it('the keys for a session that proved an e-mail with a long inner run of whitespace', async () => {
    // The JWT is at most 64 KiB of base64url, and the identity server writes a value four times
    // (rawvalue and value in three languages): a value of 11 000 characters fits.
    const size = 11_000;
    const tokens = new Map<string, string>();
    const jwtFor = async (value: string) => {
      if (!tokens.has(value)) tokens.set(value, await sessionJwt(value));
      return tokens.get(value)!;
    };
    const keyRequests = (jwt: string) => ({
      usk: () => inject({ url: `/v2/irma/key/${pkg.clock.now()}`, headers: { authorization: `Bearer ${jwt}` } }),
      signing: () =>
        inject({
          method: 'POST',
          url: '/v2/irma/sign/key',
          headers: { authorization: `Bearer ${jwt}`, 'content-type': 'application/json' },
          payload: JSON.stringify({ pubSignId: [{ t: EMAIL }] }),
        }),
    });
    for (const route of ['usk', 'signing'] as const) {
      await expectLinearTime(
        `${route} key for a spaced e-mail`,
        async (n) => {
          const crafted = keyRequests(await jwtFor(`a${run(' ', n - 2)}a`))[route];
          const benign = keyRequests(await jwtFor(run('a', n)))[route];
          return {
            crafted: async () => expect((await crafted()).status).toBe(200),
            benign: async () => expect((await benign()).status).toBe(200),
          };
        },
        { size },
      );
    }
  });

  it('JSON bodies of the key and session routes: nesting, whitespace, long strings; over 64 KiB refused', async () => {
    const jwt = await sessionJwt('bob@example.org');
    const post = (url: string, payload: string, authorization?: string) =>
      inject({
        method: 'POST',
        url,
        headers: { 'content-type': 'application/json', ...(authorization ? { authorization } : {}) },
        payload,
      });
    const bodies: Array<[string, (n: number) => string]> = [
      ['nested arrays', (n) => `{"pubSignId":${run('[', n - 20)}`],
      ['nested objects', (n) => `{"pubSignId":[${run('{"t":', n - 20)}`],
      ['whitespace between tokens', (n) => `{"pubSignId"${run(' \t\r\n', n - 30)}:[]}`],
      ['a value of whitespace', (n) => JSON.stringify({ pubSignId: [{ t: EMAIL, v: `a${run(' ', n - 80)}a` }] })],
      ['many attributes', (n) => JSON.stringify({ pubSignId: Array.from({ length: n / 40 }, () => ({ t: EMAIL })) })],
      ['escapes', (n) => `{"pubSignId":[{"t":"${run('\\u0020', n - 40)}"}]}`],
    ];
    const benignBody = (n: number) => JSON.stringify({ pubSignId: [{ t: EMAIL }], x: run('a', n - 60) });
    for (const [url, authorization] of [
      ['/v2/irma/sign/key', `Bearer ${jwt}`],
      ['/v2/request/start', undefined],
    ] as const) {
      for (const [what, body] of bodies) {
        const at = (n: number) => body(n).replace('pubSignId', url.endsWith('start') ? 'con' : 'pubSignId');
        await expectLinearTime(`${url}, ${what}`, (n) => ({
          crafted: async () => {
            const payload = at(n);
            const { status } = await post(url, payload, authorization);
            // Over the body limit: 413; under it, the schema or the JSON parser refuses it.
            expect(status).toBe(payload.length > 64 * 1024 ? 413 : 400);
          },
          benign: () => post(url, benignBody(n), authorization),
        }));
      }
    }
  });

  it('If-None-Match and If-Modified-Since of repeated separators and whitespace', async () => {
    const headers: Array<[string, (n: number) => Record<string, string>]> = [
      ['If-None-Match of commas', (n) => ({ 'if-none-match': run(',', n) })],
      ['If-None-Match of whitespace', (n) => ({ 'if-none-match': `${run(' \t', n)}"x"` })],
      ['If-None-Match of weak tags', (n) => ({ 'if-none-match': run('W/"", ', n) })],
      ['If-Modified-Since of whitespace', (n) => ({ 'if-modified-since': `Mon, 01 Jan 2024${run(' ', n)}` })],
      ['If-Modified-Since of brackets', (n) => ({ 'if-modified-since': run('(', n) })],
    ];
    for (const [what, header] of headers) {
      await expectLinearTime(`parameters, ${what}`, (n) => ({
        crafted: async () => expect((await inject({ url: '/v2/parameters', headers: header(n) })).status).toBe(200),
        benign: () => inject({ url: '/v2/parameters', headers: { 'x-benign': run('a', n) } }),
      }));
    }
  });
});
