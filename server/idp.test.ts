import { createServer, type Server } from 'node:http';
import { createServer as createTcpServer, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTcpProxy, type TcpProxy } from './db/testing.js';
import { IdentityServerClient } from './idp/client.js';
import { disclosureRequest } from './idp/request.js';
import { manualClock, startStandin, type RunningStandin } from '../devtools/standin/testing.js';
import { disclose } from '../devtools/standin/wallet.js';
import { startPkg, type RunningPkg } from './testing.js';

/**
 * The identity server as the PKG meets it in production: down, slow, talking nonsense, demanding a
 * token. Every failure is a clear 502/503 in the envelope, and the PKG keeps serving everything that
 * does not need the identity server.
 */

const EMAIL = 'irma-demo.sidn-pbdf.email.email';

const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });

async function expectError(response: Response, status: number, code: string): Promise<void> {
  expect(response.status).toBe(status);
  expect(await response.json()).toEqual({ error: true, code, message: expect.any(String) });
}

async function listen(server: Server | ReturnType<typeof createTcpServer>): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (typeof address !== 'object' || address === null) throw new Error('no port');
  return address.port;
}

describe('identity server down and back', () => {
  const clock = manualClock(Math.floor(Date.now() / 1000));
  let yivi: RunningStandin;
  let proxy: TcpProxy;
  let pkg: RunningPkg;

  beforeAll(async () => {
    yivi = await startStandin({ clock, sweepIntervalMs: 0, sseOpenDelayMs: 20 });
    proxy = await startTcpProxy(Number(new URL(yivi.url).port));
    pkg = await startPkg({ clock, yivi, identityServer: { url: `http://127.0.0.1:${proxy.port}`, timeoutMs: 1000 } });
  });

  afterAll(async () => {
    await pkg?.close();
    await proxy?.close();
    yivi.app.server.closeAllConnections();
    await yivi?.close();
  });

  it('every identity route answers 503 IDP_UNAVAILABLE; parameters and health still work', async () => {
    // A JWT from before the outage, so that the key route has something to check.
    const session = await (await post(`${pkg.url}/v2/irma/start`, { con: [{ t: EMAIL, v: 'a@example.org' }] })).json();
    await disclose(session, { [EMAIL]: 'a@example.org' });
    const jwt = await (await fetch(`${pkg.url}/v2/irma/jwt/${session.token}`)).text();

    await proxy.down();
    await expectError(await post(`${pkg.url}/v2/irma/start`, { con: [{ t: EMAIL }] }), 503, 'IDP_UNAVAILABLE');
    await expectError(await fetch(`${pkg.url}/v2/irma/jwt/${session.token}`), 503, 'IDP_UNAVAILABLE');
    await expectError(await fetch(`${pkg.url}/v2/irma/statusevents/${session.token}`), 503, 'IDP_UNAVAILABLE');
    // The JWT key was never fetched, and cannot be now.
    const key = () => fetch(`${pkg.url}/v2/irma/key/${clock.now()}`, { headers: { authorization: `Bearer ${jwt}` } });
    await expectError(await key(), 503, 'IDP_UNAVAILABLE');

    expect((await fetch(`${pkg.url}/health`)).status).toBe(200);
    expect((await fetch(`${pkg.url}/v2/parameters`)).status).toBe(200);

    await proxy.up();
    await expectError(await key(), 503, 'IDP_UNAVAILABLE'); // a failed key fetch is remembered for 3 s
    clock.advance(3);
    expect((await key()).status).toBe(200);
    expect((await post(`${pkg.url}/v2/irma/start`, { con: [{ t: EMAIL }] })).status).toBe(200);
  });

  it('once the JWT key is cached, decryption keys keep flowing while the identity server is down', async () => {
    const session = await (await post(`${pkg.url}/v2/irma/start`, { con: [{ t: EMAIL, v: 'b@example.org' }] })).json();
    await disclose(session, { [EMAIL]: 'b@example.org' });
    const jwt = await (await fetch(`${pkg.url}/v2/irma/jwt/${session.token}`)).text();
    await proxy.down();
    try {
      const response = await fetch(`${pkg.url}/v2/irma/key/${clock.now()}`, {
        headers: { authorization: `Bearer ${jwt}` },
      });
      expect(response.status).toBe(200);
      expect((await response.json()).key).toHaveLength(768);
    } finally {
      await proxy.up();
    }
  });
});

describe('a slow or misbehaving identity server', () => {
  const sockets = new Set<Socket>();
  let silent: ReturnType<typeof createTcpServer>;
  let silentPort: number;
  let nonsense: Server;
  let nonsensePort: number;
  let pkg: RunningPkg;

  beforeAll(async () => {
    // Accepts connections and never says a word.
    silent = createTcpServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
    });
    silentPort = await listen(silent);
    // Answers, but not in Yivi's protocol.
    nonsense = createServer((req, res) => {
      if (req.url === '/session')
        return res.writeHead(200, { 'content-type': 'application/json' }).end('{"sessionPtr": "nope"}');
      if (req.url?.endsWith('/result-jwt') && req.url.includes('B'.repeat(20)))
        return res.writeHead(200).end('x'.repeat(70 * 1024));
      if (req.url?.endsWith('/result-jwt')) return res.writeHead(200).end('<html>not a jwt</html>');
      if (req.url?.endsWith('/statusevents')) return res.writeHead(200, { 'content-type': 'text/html' }).end('<html>');
      if (req.url === '/publickey')
        return res.writeHead(200).end('-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----\n');
      res
        .writeHead(500, { 'content-type': 'application/json' })
        .end('{"status":500,"error":"INTERNAL_ERROR","stacktrace":"secret detail"}');
    });
    nonsensePort = await listen(nonsense);
    pkg = await startPkg({ identityServer: { url: `http://127.0.0.1:${nonsensePort}`, timeoutMs: 300 } });
  });

  afterAll(async () => {
    await pkg?.close();
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => silent.close(resolve));
    nonsense.closeAllConnections();
    await new Promise((resolve) => nonsense.close(resolve));
  });

  it('a server that never answers costs a request the deadline: 503 IDP_UNAVAILABLE', async () => {
    const slow = await startPkg({
      yivi: pkg.yivi,
      identityServer: { url: `http://127.0.0.1:${silentPort}`, timeoutMs: 300 },
    });
    try {
      const started = performance.now();
      await expectError(await post(`${slow.url}/v2/irma/start`, { con: [{ t: EMAIL }] }), 503, 'IDP_UNAVAILABLE');
      await expectError(await fetch(`${slow.url}/v2/irma/statusevents/${'A'.repeat(20)}`), 503, 'IDP_UNAVAILABLE');
      expect(performance.now() - started).toBeLessThan(5000);
    } finally {
      await slow.close();
    }
  });

  it('answers outside the protocol are 502 IDP_ERROR, without the upstream detail', async () => {
    await expectError(await post(`${pkg.url}/v2/irma/start`, { con: [{ t: EMAIL }] }), 502, 'IDP_ERROR');
    await expectError(await fetch(`${pkg.url}/v2/irma/jwt/${'A'.repeat(20)}`), 502, 'IDP_ERROR');
    await expectError(await fetch(`${pkg.url}/v2/irma/jwt/${'B'.repeat(20)}`), 502, 'IDP_ERROR'); // 70 KiB "JWT"
    await expectError(await fetch(`${pkg.url}/v2/irma/statusevents/${'A'.repeat(20)}`), 502, 'IDP_ERROR');
    const body = await (await fetch(`${pkg.url}/v2/irma/statusevents/${'C'.repeat(20)}`)).text();
    expect(body).not.toContain('secret detail');
  });

  it('an unusable JWT key is 503 for the key routes', async () => {
    const header = Buffer.from('{"alg":"RS256"}').toString('base64url');
    const response = await fetch(`${pkg.url}/v2/irma/key`, { headers: { authorization: `Bearer ${header}.e30.c2ln` } });
    await expectError(response, 503, 'IDP_UNAVAILABLE');
  });
});

describe('requestor token', () => {
  let yivi: RunningStandin;

  beforeAll(async () => {
    yivi = await startStandin({ requestorToken: 'secret-requestor-token', sweepIntervalMs: 0 });
  });

  afterAll(async () => {
    yivi.app.server.closeAllConnections();
    await yivi?.close();
  });

  it('is sent as the raw Authorization value; without it or with a wrong one the session is refused (502)', async () => {
    for (const [token, status] of [
      ['secret-requestor-token', 200],
      [undefined, 502],
      ['wrong', 502],
    ] as const) {
      const pkg = await startPkg({ yivi, identityServer: { url: yivi.url, token } });
      try {
        const response = await post(`${pkg.url}/v2/irma/start`, { con: [{ t: EMAIL }] });
        expect(response.status).toBe(status);
      } finally {
        await pkg.close();
      }
    }
  });
});

describe('IdentityServerClient', () => {
  it('posts the extended request with JSON and the raw token, to {base}/session whatever the trailing slash', async () => {
    const seen: Array<{ url: string; init: RequestInit }> = [];
    const fake: typeof fetch = async (url, init) => {
      seen.push({ url: String(url), init: init! });
      return new Response(
        JSON.stringify({
          sessionPtr: { u: 'https://yivi.example/irma/session/x', irmaqr: 'disclosing' },
          token: 'A'.repeat(20),
          frontendRequest: { authorization: 'z' },
        }),
        {
          headers: { 'content-type': 'application/json' },
        },
      );
    };
    const client = new IdentityServerClient({ url: 'https://yivi.example/base/', token: 'tok', fetch: fake });
    const request = disclosureRequest({ con: [{ t: EMAIL, v: 'a@x' }] });
    const pkg = await client.startSession(request);
    expect(pkg).toEqual({
      sessionPtr: { u: 'https://yivi.example/irma/session/x', irmaqr: 'disclosing' },
      token: 'A'.repeat(20),
    });
    expect(seen[0]!.url).toBe('https://yivi.example/base/session');
    expect(seen[0]!.init.headers).toEqual({ 'content-type': 'application/json', authorization: 'tok' });
    expect(JSON.parse(String(seen[0]!.init.body))).toEqual(request);
  });

  it('refuses a session package with a token that is not Yivi-shaped', async () => {
    const fake: typeof fetch = async () =>
      new Response(
        JSON.stringify({ sessionPtr: { u: 'https://y/irma/session/x', irmaqr: 'disclosing' }, token: '../../admin' }),
      );
    await expect(
      new IdentityServerClient({ url: 'https://y', fetch: fake }).startSession(
        disclosureRequest({ con: [{ t: EMAIL }] }),
      ),
    ).rejects.toMatchObject({
      code: 'IDP_ERROR',
    });
  });

  it('never builds an upstream URL from a bad token', async () => {
    let called = false;
    const client = new IdentityServerClient({
      url: 'https://y',
      fetch: async () => {
        called = true;
        return new Response('');
      },
    });
    await expect(client.resultJwt('../publickey?x=AAAAAAAA')).rejects.toMatchObject({ code: 'SESSION_TOKEN' });
    await expect(client.statusEvents('AAAA', new AbortController().signal)).rejects.toMatchObject({
      code: 'SESSION_TOKEN',
    });
    expect(called).toBe(false);
  });
});
