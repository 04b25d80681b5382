import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { notModified, publishKey } from './routes/parameters.js';
import { connect, fromQr, sendDisclosure } from '../devtools/standin/wallet.js';
import { startPkg, testKeys, type RunningPkg } from './testing.js';

/**
 * HTTP behaviour around the keys: caching headers, CORS, body rules and the error envelope, session
 * token checks, the status-event relay, health and metrics.
 */

const EMAIL = 'irma-demo.sidn-pbdf.email.email';
const MODIFIED = new Date('2026-03-01T12:34:56.789Z');

let pkg: RunningPkg;

beforeAll(async () => {
  pkg = await startPkg({
    allowedOrigins: ['https://app.example', 'http://localhost:5173'],
    keysModified: { mpk: MODIFIED, vk: new Date('2026-03-02T00:00:00Z') },
  });
});

afterAll(async () => {
  await pkg?.close();
});

const get = (path: string, headers: Record<string, string> = {}) => fetch(`${pkg.url}${path}`, { headers });

const post = (path: string, body: string, headers: Record<string, string> = { 'content-type': 'application/json' }) =>
  fetch(`${pkg.url}${path}`, { method: 'POST', headers, body });

async function expectError(response: Response, status: number, code: string): Promise<string> {
  expect(response.status).toBe(status);
  expect(response.headers.get('content-type')).toMatch(/^application\/json/);
  const body = await response.json();
  expect(body).toEqual({ error: true, code, message: expect.any(String) });
  return body.message;
}

describe('parameters caching', () => {
  it('200 with a strong ETag, Last-Modified of the key file and Cache-Control: public, no-cache', async () => {
    const response = await get('/v2/parameters');
    expect(response.status).toBe(200);
    expect(response.headers.get('etag')).toMatch(/^"[\w-]{22}"$/);
    expect(response.headers.get('last-modified')).toBe('Sun, 01 Mar 2026 12:34:56 GMT');
    expect(response.headers.get('cache-control')).toBe('public, no-cache');
    const sign = await get('/v2/sign/parameters');
    expect(sign.headers.get('etag')).not.toBe(response.headers.get('etag'));
    expect(sign.headers.get('last-modified')).toBe('Mon, 02 Mar 2026 00:00:00 GMT');
  });

  it('304 with an empty body for a matching If-None-Match, also inside a list', async () => {
    const etag = (await get('/v2/parameters')).headers.get('etag')!;
    for (const header of [etag, `"other", ${etag}`]) {
      const response = await get('/v2/parameters', { 'if-none-match': header });
      expect(response.status).toBe(304);
      expect(await response.text()).toBe('');
      expect(response.headers.get('etag')).toBe(etag);
    }
  });

  it('200 for a weak, different or * If-None-Match (strong comparison; * is no match, as pg-pkg)', async () => {
    const etag = (await get('/v2/parameters')).headers.get('etag')!;
    for (const header of [`W/${etag}`, '"nope"', '*']) {
      const response = await get('/v2/parameters', { 'if-none-match': header });
      expect(response.status).toBe(200);
      expect((await response.json()).publicKey).toBe(pkg.keys.mpk);
    }
  });

  it('If-Modified-Since: 304 at or after Last-Modified, 200 before it or when unparsable', async () => {
    const at = async (value: string) => (await get('/v2/parameters', { 'if-modified-since': value })).status;
    expect(await at('Sun, 01 Mar 2026 12:34:56 GMT')).toBe(304);
    expect(await at('Tue, 01 Jan 2030 00:00:00 GMT')).toBe(304);
    expect(await at('Sun, 01 Mar 2026 12:34:55 GMT')).toBe(200);
    expect(await at('yesterday')).toBe(200);
  });

  it('If-None-Match wins over If-Modified-Since (a changed key is never hidden by a date)', async () => {
    const response = await get('/v2/parameters', {
      'if-none-match': '"old"',
      'if-modified-since': 'Tue, 01 Jan 2030 00:00:00 GMT',
    });
    expect(response.status).toBe(200);
  });

  it('notModified and publishKey as pure functions', () => {
    const key = publishKey(testKeys().mpk, MODIFIED);
    expect(JSON.parse(key.body)).toEqual({ formatVersion: 0, publicKey: testKeys().mpk });
    expect(publishKey(testKeys().vk, MODIFIED).etag).not.toBe(key.etag);
    expect(notModified(key, undefined, undefined)).toBe(false);
    expect(notModified(key, key.etag, undefined)).toBe(true);
    expect(notModified(key, key.etag.slice(0, -2) + '"', undefined)).toBe(false);
  });
});

describe('CORS', () => {
  it('a preflight from an allowed origin: methods, headers, max-age 86400', async () => {
    const response = await fetch(`${pkg.url}/v2/irma/start`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://app.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type',
      },
    });
    expect(response.status).toBe(204);
    expect(response.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(response.headers.get('access-control-allow-methods')).toBe('GET, POST');
    expect(response.headers.get('access-control-allow-headers')).toBe(
      'Content-Type, Authorization, ETag, If-None-Match, X-POSTGUARD-CLIENT-VERSION, X-Cryptify-Source',
    );
    expect(response.headers.get('access-control-max-age')).toBe('86400');
    expect(response.headers.get('vary')).toMatch(/origin/i);
  });

  it('pg-js up to 2.5 sends X-Cryptify-Source: its preflights allow it, on every route it calls', async () => {
    for (const [path, method, requested] of [
      ['/v2/parameters', 'GET', 'x-cryptify-source'],
      ['/v2/sign/parameters', 'GET', 'x-cryptify-source'],
      ['/v2/irma/start', 'POST', 'content-type,x-cryptify-source'],
      ['/v2/irma/key/1', 'GET', 'authorization,x-cryptify-source,x-postguard-client-version'],
      ['/v2/irma/sign/key', 'POST', 'authorization,content-type,x-cryptify-source'],
    ] as const) {
      const response = await fetch(`${pkg.url}${path}`, {
        method: 'OPTIONS',
        headers: {
          origin: 'https://app.example',
          'access-control-request-method': method,
          'access-control-request-headers': requested,
        },
      });
      expect(response.status).toBe(204);
      // As a browser checks it: every requested name, case-insensitively, in the allowed list.
      const allowed = (response.headers.get('access-control-allow-headers') ?? '')
        .split(',')
        .map((h) => h.trim().toLowerCase());
      for (const name of requested.split(',')) expect(allowed).toContain(name);
    }
  });

  it('a request from an allowed origin gets its origin back, and may read ETag and Retry-After', async () => {
    const response = await get('/v2/parameters', { origin: 'http://localhost:5173' });
    expect(response.status).toBe(200);
    expect(response.headers.get('access-control-allow-origin')).toBe('http://localhost:5173');
    expect(response.headers.get('access-control-expose-headers')).toBe('ETag, Retry-After');
  });

  it('a disallowed origin is refused, preflight or not, on every route', async () => {
    for (const origin of ['https://evil.example', 'https://app.example.evil', 'null', 'http://app.example']) {
      await expectError(await get('/v2/parameters', { origin }), 403, 'ORIGIN_NOT_ALLOWED');
      const preflight = await fetch(`${pkg.url}/v2/irma/key/1`, {
        method: 'OPTIONS',
        headers: { origin, 'access-control-request-method': 'GET' },
      });
      expect(preflight.headers.get('access-control-allow-origin')).toBeNull();
      await expectError(preflight, 403, 'ORIGIN_NOT_ALLOWED');
    }
    await expectError(await get('/health', { origin: 'https://evil.example' }), 403, 'ORIGIN_NOT_ALLOWED');
  });

  it('requests without Origin (servers, the CLI) are not CORS requests', async () => {
    const response = await get('/v2/parameters');
    expect(response.status).toBe(200);
    expect(response.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('"*" allows any origin', async () => {
    const open = await startPkg({ allowedOrigins: ['*'], yivi: pkg.yivi });
    try {
      const response = await fetch(`${open.url}/v2/parameters`, { headers: { origin: 'https://anyone.example' } });
      expect(response.status).toBe(200);
      expect(response.headers.get('access-control-allow-origin')).toBe('*');
    } finally {
      await open.close();
    }
  });
});

describe('request bodies and the error envelope', () => {
  it('malformed JSON, an empty body and prototype poisoning: 400 BAD_REQUEST', async () => {
    await expectError(await post('/v2/irma/start', '{"con": ['), 400, 'BAD_REQUEST');
    await expectError(await post('/v2/irma/start', ''), 400, 'BAD_REQUEST');
    await expectError(
      await post('/v2/irma/start', '{"__proto__": {"x": 1}, "con": [{"t": "a.b.c.d"}]}'),
      400,
      'BAD_REQUEST',
    );
  });

  it('a body over 64 KiB: 413 BODY_TOO_LARGE, before the identity server hears of it', async () => {
    const big = JSON.stringify({ con: [{ t: EMAIL, v: 'x'.repeat(65 * 1024) }] });
    await expectError(await post('/v2/irma/start', big), 413, 'BODY_TOO_LARGE');
  });

  it('a non-JSON content type: 415', async () => {
    await expectError(
      await post('/v2/irma/start', '{"con":[]}', { 'content-type': 'text/plain' }),
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    );
    await expectError(
      await post('/v2/irma/start', 'con=1', { 'content-type': 'application/x-www-form-urlencoded' }),
      415,
      'UNSUPPORTED_MEDIA_TYPE',
    );
  });

  it('unknown fields are refused at every level, naming the field', async () => {
    const cases: Array<[unknown, string]> = [
      [{ con: [{ t: EMAIL }], validty: 300 }, 'validty'],
      [{ con: [{ t: EMAIL, vaule: 'x' }] }, 'vaule'],
      [{ con: [[[{ t: EMAIL, x: 1 }]]] }, 'x'],
      [{ attr: { a: { t: 1, con: [{ t: EMAIL }], extra: 1 } } }, 'extra'],
    ];
    for (const [body, field] of cases) {
      expect(await expectError(await post('/v2/irma/start', JSON.stringify(body)), 400, 'BAD_REQUEST')).toContain(
        field,
      );
    }
    const sign = await post('/v2/irma/sign/key', JSON.stringify({ pubSignId: [], sort: 1 }), {
      'content-type': 'application/json',
      authorization: 'Bearer PG-x',
    });
    // Authentication runs first; without a database the API key is refused before the body is read.
    await expectError(sign, 401, 'API_KEYS_DISABLED');
  });

  it('wrong shapes and values: 400 BAD_REQUEST, no coercion', async () => {
    for (const body of [
      [],
      {},
      { con: [{ t: EMAIL }], validity: '300' },
      { con: [{ t: EMAIL }], validity: -1 },
      { con: [{ t: EMAIL }], validity: 1.5 },
      { con: [{}] },
      { con: [{ t: 'email' }] },
      { con: [{ t: `${EMAIL}.extra.parts` }] },
      { con: [{ t: EMAIL, v: 5 }] },
      { con: [{ t: EMAIL, optional: 'yes' }] },
      { con: [[{ t: EMAIL }]] },
      { con: [[]] },
      { con: [{ t: EMAIL }], attr: { a: { t: 1, con: [{ t: EMAIL }] } } },
      { attr: {} },
      { attr: { a: { t: -5, con: [{ t: EMAIL }] } } },
      { attr: { a: { con: [{ t: EMAIL }] } } },
    ]) {
      await expectError(await post('/v2/irma/start', JSON.stringify(body)), 400, 'BAD_REQUEST');
    }
  });

  it('an identity with no attributes: 400 EMPTY_IDENTITY, before any upstream call', async () => {
    let upstreamCalls = 0;
    const count = () => void upstreamCalls++;
    pkg.yivi.app.server.on('request', count);
    try {
      for (const body of [
        { con: [] },
        { con: [[[]]] },
        { con: [[[], []]] },
        { attr: { a: { t: 1, con: [] } } },
        { attr: { a: { t: 1, con: [{ t: EMAIL }] }, b: { t: 1, con: [] } } },
      ]) {
        await expectError(await post('/v2/irma/start', JSON.stringify(body)), 400, 'EMPTY_IDENTITY');
      }
    } finally {
      pkg.yivi.app.server.off('request', count);
    }
    expect(upstreamCalls).toBe(0);
  });

  it('validity above 86400: 400 VALIDITY; 86400 itself is fine', async () => {
    const message = await expectError(
      await post('/v2/irma/start', JSON.stringify({ con: [{ t: EMAIL }], validity: 86_401 })),
      400,
      'VALIDITY',
    );
    expect(message).toBe('validity exceeds maximum validity');
    expect((await post('/v2/irma/start', JSON.stringify({ con: [{ t: EMAIL }], validity: 86_400 }))).status).toBe(200);
  });

  it('unknown routes and methods: 404 NOT_FOUND in the envelope', async () => {
    await expectError(await get('/v2/nothing'), 404, 'NOT_FOUND');
    // HEAD exists where it is cheap; a HEAD on a key route would derive a key for nothing.
    const head = await fetch(`${pkg.url}/v2/parameters`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('etag')).toMatch(/^"/);
    expect((await fetch(`${pkg.url}/health`, { method: 'HEAD' })).status).toBe(200);
    expect((await fetch(`${pkg.url}/v2/irma/key/1`, { method: 'HEAD' })).status).toBe(404);
    await expectError(await get('/v2/irma/start'), 404, 'NOT_FOUND');
    await expectError(await fetch(`${pkg.url}/v2/parameters`, { method: 'DELETE' }), 404, 'NOT_FOUND');
  });
});

describe('session tokens', () => {
  it('are checked before any upstream call: 20 alphanumerics or 400 SESSION_TOKEN', async () => {
    for (const token of [
      'short',
      'A'.repeat(19),
      'A'.repeat(21),
      'A'.repeat(65),
      'A'.repeat(201),
      'A'.repeat(5000),
      'AAAAAAAAAA.AAAAAAAAA',
      '550e8400-e29b-41d4-a716',
      'AAAAAAAAAA%2FAAAAAAAAA',
    ]) {
      await expectError(await get(`/v2/irma/jwt/${token}`), 400, 'SESSION_TOKEN');
      await expectError(await get(`/v2/irma/statusevents/${token}`), 400, 'SESSION_TOKEN');
    }
  });

  it("a URL the router cannot decode: 400 BAD_REQUEST in the envelope, not Fastify's own body", async () => {
    await expectError(await get('/v2/irma/jwt/%E0%A4%A'), 400, 'BAD_REQUEST');
    await expectError(await get('/v2/irma/key/%FF'), 400, 'BAD_REQUEST');
  });

  it('a well-formed token the identity server does not know: 404 SESSION_UNKNOWN', async () => {
    await expectError(await get(`/v2/irma/jwt/${'A'.repeat(20)}`), 404, 'SESSION_UNKNOWN');
  });
});

async function readAll(response: Response): Promise<string> {
  return new TextDecoder().decode(new Uint8Array(await response.arrayBuffer()));
}

describe('statusevents relay', () => {
  it("relays the identity server's events byte for byte and ends after the final status", async () => {
    const session = await (
      await post('/v2/request/start', JSON.stringify({ con: [{ t: EMAIL, v: 'a@example.org' }] }))
    ).json();
    const events = await get(`/v2/request/statusevents/${session.token}`, { origin: 'https://app.example' });
    expect(events.status).toBe(200);
    expect(events.headers.get('content-type')).toBe('text/event-stream');
    expect(events.headers.get('cache-control')).toBe('no-cache');
    expect(events.headers.get('x-accel-buffering')).toBe('no');
    expect(events.headers.get('access-control-allow-origin')).toBe('https://app.example');
    const body = readAll(events);
    await new Promise((resolve) => setTimeout(resolve, 50)); // let the "open" event through first
    const connection = await connect(fromQr(session));
    await sendDisclosure(connection, [[{ id: EMAIL, rawvalue: 'a@example.org' }]]);
    expect(await body).toBe('event: open\n\ndata: "CONNECTED"\n\ndata: "DONE"\n\n');
  });

  it('closes the upstream request when the client goes away', async () => {
    const session = await (await post('/v2/irma/start', JSON.stringify({ con: [{ t: EMAIL }] }))).json();
    let upstreamClosed: Promise<void> | undefined;
    const watch = (req: { url?: string }, res: { once(e: 'close', f: () => void): void }) => {
      if (req.url?.includes('/statusevents'))
        upstreamClosed = new Promise((resolve) => res.once('close', () => resolve()));
    };
    pkg.yivi.app.server.on('request', watch);
    try {
      const client = new AbortController();
      const events = await fetch(`${pkg.url}/v2/irma/statusevents/${session.token}`, { signal: client.signal });
      const reader = events.body!.getReader();
      expect(new TextDecoder().decode((await reader.read()).value)).toBe('event: open\n\n');
      expect(upstreamClosed).toBeDefined();
      client.abort();
      await expect(upstreamClosed).resolves.toBeUndefined();
    } finally {
      pkg.yivi.app.server.off('request', watch);
    }
  });

  it('an unknown session is 404 SESSION_UNKNOWN in the envelope, not a stream', async () => {
    await expectError(await get(`/v2/irma/statusevents/${'B'.repeat(20)}`), 404, 'SESSION_UNKNOWN');
  });
});

describe('health and metrics', () => {
  it('GET /health is plain OK', async () => {
    const response = await get('/health');
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await response.text()).toBe('OK');
  });

  it('postguard_clients counts /v2 requests with bounded labels', async () => {
    const client = (value: string) => ({ 'x-postguard-client-version': value });
    const unmatched =
      'postguard_clients{path="unknown",host="unknown",client="unknown",client_version="unknown",status="404"}';
    const count = (text: string, prefix: string) =>
      Number(
        text
          .split('\n')
          .find((l) => l.startsWith(prefix))
          ?.split(' ')[1] ?? 0,
      );
    const before = count(await (await get('/metrics')).text(), unmatched);
    await get('/v2/parameters', client('browser,126.0,pg-js,1.4.2'));
    await get('/v2/parameters', client('browser,126.0,pg-js,1.4.2'));
    await get('/v2/sign/parameters', client(' dotnet , .NET 8 , pg-dotnet , 0.3.0 '));
    await get('/v2/parameters', client('Emacs,29,my-client,1.0'));
    await get('/v2/parameters', client('node,20,pg-js,1.0<script>'));
    await get('/v2/parameters', client('only,three,fields'));
    await get('/v2/nothing/here');
    await get('/health', client('browser,1,pg-js,9.9.9'));

    const text = await (await get('/metrics')).text();
    const line = (labels: string) => text.split('\n').find((l) => l.startsWith(`postguard_clients{${labels}}`));
    expect(line('path="/v2/parameters",host="browser",client="pg-js",client_version="1.4.2",status="200"')).toMatch(
      / 2$/,
    );
    expect(
      line('path="/v2/sign/parameters",host="dotnet",client="pg-dotnet",client_version="0.3.0",status="200"'),
    ).toMatch(/ 1$/);
    expect(line('path="/v2/parameters",host="other",client="other",client_version="1.0",status="200"')).toMatch(/ 1$/);
    expect(line('path="/v2/parameters",host="node",client="pg-js",client_version="other",status="200"')).toMatch(/ 1$/);
    expect(
      line('path="/v2/parameters",host="unknown",client="unknown",client_version="unknown",status="200"'),
    ).toBeDefined();
    expect(count(text, unmatched)).toBe(before + 1);
    expect(text).not.toContain('9.9.9'); // /health is not counted
    expect(text).toContain('# TYPE postguard_keys_issued_total counter');
  });

  it('a client may create at most 64 version labels', async () => {
    for (let i = 0; i < 70; i++)
      await get('/v2/sign/parameters', { 'x-postguard-client-version': `deno,1,cli,0.0.${i}` });
    const text = await (await get('/metrics')).text();
    const cliLines = text
      .split('\n')
      .filter((l) => l.startsWith('postguard_clients{path="/v2/sign/parameters",host="deno",client="cli"'));
    expect(cliLines).toHaveLength(65);
    expect(cliLines.find((l) => l.includes('client_version="other"'))).toMatch(/ 6$/);
  });
});
