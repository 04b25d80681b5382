import { Writable } from 'node:stream';
import { decodeProtectedHeader, importSPKI, jwtVerify } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import { manualClock, startStandin } from './testing.js';
import type { ManualClock, RunningStandin } from './testing.js';
import type { StandinOptions } from './settings.js';
import * as wallet from './wallet.js';
import type { SessionPackage, SessionResult } from './protocol.js';

const DISCLOSURE = 'https://irma.app/ld/request/disclosure/v2';
const EMAIL = 'irma-demo.sidn-pbdf.email.email';
const MOBILE = 'irma-demo.sidn-pbdf.mobilenumber.mobilenumber';
const TOKEN = /^[A-Z0-9]{20}$/i;

/** The body PostGuard's PKG (0.5.9) posts for "email = alice, mobile optional". */
const pkgBody = (validity = 300) => ({
  validity,
  request: {
    '@context': DISCLOSURE,
    disclose: [[[{ type: EMAIL, value: 'alice@example.org', notNull: true }]], [[], [{ type: MOBILE, notNull: true }]]],
  },
});

let running: RunningStandin[] = [];
afterEach(async () => {
  await Promise.all(running.map((r) => r.close()));
  running = [];
});

async function start(options: StandinOptions = {}): Promise<RunningStandin & { clock: ManualClock }> {
  const clock = manualClock();
  const r = await startStandin({ clock, sweepIntervalMs: 0, ...options });
  running.push(r);
  return { ...r, clock };
}

async function post(url: string, body: unknown, headers: Record<string, string> = {}) {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

async function startSession(r: RunningStandin, body: unknown = pkgBody(), headers: Record<string, string> = {}) {
  const res = await post(`${r.url}/session`, body, headers);
  expect(res.status, await res.clone().text()).toBe(200);
  return (await res.json()) as SessionPackage;
}

const getJson = async (url: string) => {
  const res = await fetch(url);
  return { status: res.status, body: (await res.json()) as unknown, type: res.headers.get('content-type') };
};

describe('requestor flow as the PKG drives it', () => {
  it('starts a session, lets the wallet disclose, and signs a result JWT that verifies with /publickey', async () => {
    const r = await start();
    const pkg = await startSession(r);

    expect(pkg.token).toMatch(TOKEN);
    expect(pkg.sessionPtr.irmaqr).toBe('disclosing');
    const clientToken = pkg.sessionPtr.u.slice(`${r.url}/irma/session/`.length);
    expect(pkg.sessionPtr.u).toBe(`${r.url}/irma/session/${clientToken}`);
    expect(clientToken).toMatch(TOKEN);
    expect(clientToken).not.toBe(pkg.token);
    // A requested value makes irmago recommend pairing.
    expect(pkg.frontendRequest).toEqual({
      authorization: expect.stringMatching(TOKEN),
      pairingHint: true,
      minProtocolVersion: '1.0',
      maxProtocolVersion: '1.1',
    });

    expect(await getJson(`${r.url}/session/${pkg.token}/status`)).toEqual({
      status: 200,
      body: 'INITIALIZED',
      type: 'application/json; charset=UTF-8',
    });

    const report = await wallet.disclose(pkg.sessionPtr, { [EMAIL]: 'alice@example.org' });
    expect(report.proofStatus).toBe('VALID');
    expect(report.disclosed).toEqual([[{ id: EMAIL, rawvalue: 'alice@example.org' }], []]);
    expect((await getJson(`${r.url}/session/${pkg.token}/status`)).body).toBe('DONE');

    const expectedDisclosed = [
      [
        {
          rawvalue: 'alice@example.org',
          value: { '': 'alice@example.org', en: 'alice@example.org', nl: 'alice@example.org' },
          id: EMAIL,
          status: 'PRESENT',
          issuancetime: Math.floor(r.clock.now() / 604_800) * 604_800,
        },
      ],
      [],
    ];
    const result = await getJson(`${r.url}/session/${pkg.token}/result`);
    expect(result.body).toEqual({
      token: pkg.token,
      status: 'DONE',
      type: 'disclosing',
      proofStatus: 'VALID',
      disclosed: expectedDisclosed,
    });

    r.clock.advance(7);
    const jwtRes = await fetch(`${r.url}/session/${pkg.token}/result-jwt`);
    expect(jwtRes.status).toBe(200);
    expect(jwtRes.headers.get('content-type')).toBe('text/plain');
    const jwt = await jwtRes.text();

    const pemRes = await fetch(`${r.url}/publickey`);
    const pem = await pemRes.text();
    expect(pem).toMatch(/^-----BEGIN PUBLIC KEY-----\n[\s\S]+\n-----END PUBLIC KEY-----\n$/);
    const key = await importSPKI(pem, 'RS256');
    const { payload, protectedHeader } = await jwtVerify(jwt, key, {
      algorithms: ['RS256'],
      currentDate: new Date(r.clock.now() * 1000),
    });
    expect(protectedHeader).toEqual({ alg: 'RS256', typ: 'JWT' });
    expect(payload).toEqual({
      exp: r.clock.now() + 300,
      iat: r.clock.now(),
      iss: 'irmaserver',
      sub: 'disclosing_result',
      token: pkg.token,
      status: 'DONE',
      type: 'disclosing',
      proofStatus: 'VALID',
      disclosed: expectedDisclosed,
    });
    // Claim order as golang-jwt writes it: standard claims, then the result's fields.
    const raw = JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString()) as object;
    expect(Object.keys(raw)).toEqual([
      'exp',
      'iat',
      'iss',
      'sub',
      'token',
      'status',
      'type',
      'proofStatus',
      'disclosed',
    ]);
    // And the JWT does not verify once validity has run out.
    await expect(
      jwtVerify(jwt, key, { algorithms: ['RS256'], currentDate: new Date((r.clock.now() + 301) * 1000) }),
    ).rejects.toThrow(/exp/);
  });

  it('mints a fresh JWT per call, for unfinished sessions too, with validity defaulting to 120 s', async () => {
    const r = await start({ jwtIssuer: '' });
    const plain = await startSession(r, { '@context': DISCLOSURE, disclose: [[[EMAIL]]] });
    const first = decodePayload(await (await fetch(`${r.url}/session/${plain.token}/result-jwt`)).text());
    expect(first).toEqual({
      exp: r.clock.now() + 120,
      iat: r.clock.now(),
      sub: 'disclosing_result',
      token: plain.token,
      status: 'INITIALIZED',
      type: 'disclosing',
    });
    expect(first).not.toHaveProperty('iss');
    r.clock.advance(10);
    const second = decodePayload(await (await fetch(`${r.url}/session/${plain.token}/result-jwt`)).text());
    expect(second.iat).toBe((first.iat as number) + 10);

    const zero = await startSession(r, pkgBody(0));
    const z = decodePayload(await (await fetch(`${r.url}/session/${zero.token}/result-jwt`)).text());
    expect((z.exp as number) - (z.iat as number)).toBe(120);
  });

  it('requires the pre-shared token exactly as Yivi does when one is configured', async () => {
    const r = await start({ requestorToken: 'sekrit-requestor-token' });
    const noAuth = await post(`${r.url}/session`, pkgBody());
    expect(noAuth.status).toBe(400);
    expect(await noAuth.json()).toEqual({
      status: 400,
      error: 'INVALID_REQUEST',
      description: 'Invalid HTTP request',
      message: 'request could not be authenticated',
    });

    for (const wrong of ['wrong', 'Bearer sekrit-requestor-token', 'SEKRIT-REQUESTOR-TOKEN']) {
      const res = await post(`${r.url}/session`, pkgBody(), { authorization: wrong });
      expect(res.status).toBe(403);
      expect(res.headers.get('content-type')).toBe('application/json; charset=UTF-8');
      expect(await res.text()).toBe(
        '{"status":403,"error":"UNAUTHORIZED","description":"You are not authorized to issue or verify this attribute"}',
      );
    }
    // The token is checked before the body is even parsed.
    expect((await post(`${r.url}/session`, '{not json', { authorization: 'wrong' })).status).toBe(403);

    const pkg = await startSession(r, pkgBody(), { authorization: 'sekrit-requestor-token' });
    expect(pkg.token).toMatch(TOKEN);
    // Session routes need no auth, as in irmago.
    expect((await getJson(`${r.url}/session/${pkg.token}/status`)).body).toBe('INITIALIZED');
  });

  it('refuses an Authorization header and non-JSON content types in no-auth mode', async () => {
    const r = await start();
    const withAuth = await post(`${r.url}/session`, pkgBody(), { authorization: 'anything' });
    expect(withAuth.status).toBe(400);
    expect(((await withAuth.json()) as { message: string }).message).toBe('request could not be authenticated');

    const html = await post(`${r.url}/session`, pkgBody(), { 'content-type': 'text/html' });
    expect(await html.json()).toEqual({
      status: 400,
      error: 'INVALID_REQUEST',
      description: 'Invalid HTTP request',
      message: 'Unsupported Content-Type: text/html',
    });
    const jwtForm = await post(`${r.url}/session`, 'eyJhbGciOiJIUzI1NiJ9.e30.x', { 'content-type': 'text/plain' });
    expect(jwtForm.status).toBe(400);
  });

  it('honours a configured public URL and tolerates a PKG base URL with a trailing slash', async () => {
    const r = await start({ publicUrl: 'https://yivi.example.test/proxy' });
    const pkg = await startSession(r);
    expect(pkg.sessionPtr.u).toMatch(/^https:\/\/yivi\.example\.test\/proxy\/irma\/session\/[A-Za-z0-9]{20}$/);
    const res = await fetch(`${r.url}//session/${pkg.token}/result-jwt`);
    expect(res.status).toBe(200);

    const r2 = await start({ publicUrl: 'http://localhost:8088/irma' });
    expect((await startSession(r2)).sessionPtr.u).toMatch(/^http:\/\/localhost:8088\/irma\/session\/[A-Za-z0-9]{20}$/);
  });
});

function decodePayload(jwt: string): Record<string, unknown> {
  expect(decodeProtectedHeader(jwt)).toEqual({ alg: 'RS256', typ: 'JWT' });
  return JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString()) as Record<string, unknown>;
}

describe('wallet side', () => {
  it('hands the wallet the request in irmago client format and binds the session to its Authorization', async () => {
    const r = await start();
    const pkg = await startSession(r, {
      validity: 60,
      request: {
        '@context': DISCLOSURE,
        disclose: [[[EMAIL, { type: MOBILE }, { type: 'irma-demo.gemeente.personalData.surname', value: 'Jansen' }]]],
        clientReturnUrl: 'https://example.test/back',
      },
    });
    const res = await fetch(`${pkg.sessionPtr.u}/`, {
      headers: {
        'X-IRMA-MinProtocolVersion': '2.4',
        'X-IRMA-MaxProtocolVersion': '"2.8"',
        authorization: 'wallet-auth-1234567890',
      },
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { request: { nonce: string } };
    expect(body).toEqual({
      '@context': 'https://irma.app/ld/request/client/v1',
      protocolVersion: '2.8',
      options: { '@context': 'https://irma.app/ld/options/v1', pairingMethod: 'none' },
      request: {
        '@context': DISCLOSURE,
        context: 'AQ==',
        nonce: expect.stringMatching(/^[A-Z0-9+/]+=*$/i),
        protocolVersion: '2.8',
        devMode: true,
        clientReturnUrl: 'https://example.test/back',
        // Requests without value or notNull go back out as bare ids.
        disclose: [[[EMAIL, MOBILE, { type: 'irma-demo.gemeente.personalData.surname', value: 'Jansen' }]]],
      },
    });
    expect((await getJson(`${r.url}/session/${pkg.token}/status`)).body).toBe('CONNECTED');

    // A second GET is refused without cancelling the session.
    const again = await fetch(`${pkg.sessionPtr.u}/`, {
      headers: {
        'X-IRMA-MinProtocolVersion': '2.8',
        'X-IRMA-MaxProtocolVersion': '2.8',
        authorization: 'other-auth-1234567890',
      },
    });
    expect(again.status).toBe(403);
    expect(((await again.json()) as { error: string }).error).toBe('UNEXPECTED_REQUEST');

    const proofs = {
      '@context': 'urn:standin:simulated-disclosure:v1',
      disclosed: [[{ id: EMAIL, rawvalue: 'a@b.c' }]],
    };
    const stranger = await post(`${pkg.sessionPtr.u}/proofs`, proofs, { authorization: 'other-auth-1234567890' });
    expect(stranger.status).toBe(403);
    expect(await stranger.json()).toEqual({
      status: 403,
      error: 'UNAUTHORIZED',
      description: 'You are not authorized to access the session',
    });
    expect((await getJson(`${r.url}/session/${pkg.token}/status`)).body).toBe('CONNECTED');
  });

  it('fails version negotiation like irmago: malformed headers are 400, no common version cancels', async () => {
    const r = await start();
    const pkg = await startSession(r);
    const missing = await fetch(`${pkg.sessionPtr.u}/`, { headers: { authorization: 'x'.repeat(20) } });
    expect(missing.status).toBe(400);
    expect(((await missing.json()) as { error: string }).error).toBe('MALFORMED_INPUT');
    expect((await getJson(`${r.url}/session/${pkg.token}/status`)).body).toBe('INITIALIZED');

    const old = await fetch(`${pkg.sessionPtr.u}/`, {
      headers: {
        'X-IRMA-MinProtocolVersion': '2.4',
        'X-IRMA-MaxProtocolVersion': '2.7',
        authorization: 'x'.repeat(20),
      },
    });
    expect(old.status).toBe(400);
    expect(((await old.json()) as { error: string }).error).toBe('PROTOCOL_VERSION');
    const result = (await getJson(`${r.url}/session/${pkg.token}/result`)).body as SessionResult;
    expect(result.status).toBe('CANCELLED');
    expect(result.error).toEqual({
      status: 400,
      error: 'PROTOCOL_VERSION',
      description: 'Protocol version negotiation failed',
    });

    const pkg2 = await startSession(r);
    const noAuth = await fetch(`${pkg2.sessionPtr.u}/`, {
      headers: { 'X-IRMA-MinProtocolVersion': '2.8', 'X-IRMA-MaxProtocolVersion': '2.8' },
    });
    expect(noAuth.status).toBe(403);
    expect((await getJson(`${r.url}/session/${pkg2.token}/status`)).body).toBe('CANCELLED');
  });

  it('marks mismatched or missing values MISSING_ATTRIBUTES while the session still ends DONE', async () => {
    const r = await start();
    const pkg = await startSession(r);
    const report = await wallet.disclose(pkg.sessionPtr, { [EMAIL]: 'bob@example.org' });
    expect(report.disclosed).toEqual([[{ id: EMAIL, rawvalue: 'bob@example.org' }], []]);
    expect(report.proofStatus).toBe('MISSING_ATTRIBUTES');
    const result = (await getJson(`${r.url}/session/${pkg.token}/result`)).body as SessionResult;
    expect(result.status).toBe('DONE');
    expect(result.proofStatus).toBe('MISSING_ATTRIBUTES');
    // irmago reports an unsatisfied disjunction as null.
    expect(result.disclosed).toEqual([null, []]);

    const pkg2 = await startSession(r);
    expect((await wallet.disclose(pkg2.sessionPtr, {})).proofStatus).toBe('MISSING_ATTRIBUTES');
    const pkg3 = await startSession(r);
    expect((await wallet.disclose(pkg3.sessionPtr, { [EMAIL]: null })).proofStatus).toBe('MISSING_ATTRIBUTES');
  });

  it('takes explicit sets, including unrequested extras and the empty option only when nothing is disclosed', async () => {
    const r = await start();
    const pkg = await startSession(r);
    const report = await wallet.disclose(pkg.sessionPtr, [
      [{ id: EMAIL, rawvalue: 'alice@example.org' }],
      [{ id: MOBILE, rawvalue: '+31612345678' }],
      [{ id: 'irma-demo.sidn-pbdf.email.domain', rawvalue: 'example.org' }],
    ]);
    expect(report.proofStatus).toBe('VALID');
    const result = (await getJson(`${r.url}/session/${pkg.token}/result`)).body as SessionResult;
    expect(result.disclosed?.map((set) => set?.map((a) => [a.id, a.rawvalue, a.status]))).toEqual([
      [[EMAIL, 'alice@example.org', 'PRESENT']],
      [[MOBILE, '+31612345678', 'PRESENT']],
      [['irma-demo.sidn-pbdf.email.domain', 'example.org', 'EXTRA']],
    ]);
  });

  it('lets the wallet and the requestor cancel, and leaves finished sessions alone', async () => {
    const r = await start();
    const a = await startSession(r);
    await wallet.cancel(a.sessionPtr);
    expect((await getJson(`${r.url}/session/${a.token}/result`)).body).toEqual({
      token: a.token,
      status: 'CANCELLED',
      type: 'disclosing',
    });

    const b = await startSession(r);
    const del = await fetch(`${r.url}/session/${b.token}`, { method: 'DELETE' });
    expect(del.status).toBe(200);
    expect(await del.text()).toBe('');
    expect((await getJson(`${r.url}/session/${b.token}/status`)).body).toBe('CANCELLED');
    await expect(wallet.disclose(b.sessionPtr, { [EMAIL]: 'alice@example.org' })).rejects.toMatchObject({
      code: 'REMOTE',
      status: 403,
      remote: { error: 'UNEXPECTED_REQUEST' },
    });

    const c = await startSession(r);
    await wallet.disclose(c.sessionPtr, { [EMAIL]: 'alice@example.org' });
    expect((await fetch(`${r.url}/session/${c.token}/`, { method: 'DELETE' })).status).toBe(200);
    await wallet.cancel(c.sessionPtr);
    expect((await getJson(`${r.url}/session/${c.token}/status`)).body).toBe('DONE');
  });

  it('supports frontend PIN pairing: the wallet waits until the browser confirms', async () => {
    const r = await start();
    const pkg = await startSession(r);
    const frontend = (path: string, init: RequestInit = {}, auth = pkg.frontendRequest.authorization) =>
      fetch(`${pkg.sessionPtr.u}/frontend/${path}`, {
        ...init,
        headers: { authorization: auth, 'content-type': 'application/json' },
      });

    expect((await frontend('status', {}, 'wrong')).status).toBe(403);
    const options = await frontend('options', {
      method: 'POST',
      body: JSON.stringify({ '@context': 'https://irma.app/ld/request/frontendoptions/v1', pairingMethod: 'pin' }),
    });
    const pin = (await options.json()) as { pairingMethod: string; pairingCode: string };
    expect(pin).toEqual({
      '@context': 'https://irma.app/ld/options/v1',
      pairingMethod: 'pin',
      pairingCode: expect.stringMatching(/^\d{4}$/),
    });

    const connecting = wallet.connect(pkg.sessionPtr, { pairingPollMs: 10 });
    await expect
      .poll(async () => ((await (await frontend('status')).json()) as { status: string }).status)
      .toBe('PAIRING');
    const proofsTooEarly = await post(`${pkg.sessionPtr.u}/proofs`, {}, { authorization: 'x'.repeat(20) });
    expect(((await proofsTooEarly.json()) as { error: string }).error).toBe('PAIRING_REQUIRED');
    expect((await frontend('pairingcompleted', { method: 'POST', body: '{}' })).status).toBe(204);
    const connection = await connecting;
    expect(connection.request.disclose).toHaveLength(2);
    const answer = await wallet.sendDisclosure(connection, [[{ id: EMAIL, rawvalue: 'alice@example.org' }], []]);
    expect(answer).toEqual({ proofStatus: 'VALID' });
    expect(await (await frontend('status')).json()).toEqual({ status: 'DONE' });
  });
});

describe('timeouts (injected clock)', () => {
  it('times out an unanswered session after the request timeout, then forgets it after the result lifetime', async () => {
    const r = await start({ sessionResultLifetime: 300 });
    const pkg = await startSession(r, { ...pkgBody(), timeout: 60 });
    r.clock.advance(59);
    expect((await getJson(`${r.url}/session/${pkg.token}/status`)).body).toBe('INITIALIZED');
    r.clock.advance(1);
    expect((await getJson(`${r.url}/session/${pkg.token}/status`)).body).toBe('TIMEOUT');
    await expect(wallet.connect(pkg.sessionPtr)).rejects.toMatchObject({
      status: 403,
      remote: { error: 'UNEXPECTED_REQUEST' },
    });
    r.clock.advance(299);
    expect((await getJson(`${r.url}/session/${pkg.token}/result`)).body).toMatchObject({ status: 'TIMEOUT' });
    r.clock.advance(1);
    expect(await getJson(`${r.url}/session/${pkg.token}/result`)).toEqual({
      status: 400,
      body: { status: 400, error: 'SESSION_UNKNOWN', description: 'Unknown or expired session' },
      type: 'application/json; charset=UTF-8',
    });
    expect((await fetch(`${r.url}/session/${pkg.token}/result-jwt`)).status).toBe(400);
  });

  it('times out idle sessions after the max session lifetime, counted from the last wallet activity', async () => {
    const r = await start({ maxSessionLifetime: 900 });
    const pkg = await startSession(r);
    r.clock.advance(600);
    await wallet.connect(pkg.sessionPtr);
    r.clock.advance(899);
    expect((await getJson(`${r.url}/session/${pkg.token}/status`)).body).toBe('CONNECTED');
    r.clock.advance(1);
    expect((await getJson(`${r.url}/session/${pkg.token}/status`)).body).toBe('TIMEOUT');
  });
});

describe('a cap on sessions in progress', () => {
  it('refuses a new session beyond maxPendingSessions; one that finishes, is cancelled or times out frees its place', async () => {
    const r = await start({ maxPendingSessions: 2 });
    const first = await startSession(r);
    const second = await startSession(r);
    const refused = await post(`${r.url}/session`, pkgBody());
    expect(refused.status).toBe(500);
    expect(await refused.json()).toMatchObject({ error: 'INTERNAL_ERROR' });
    // Done: its place is free, though its result stays readable.
    await wallet.disclose(first.sessionPtr, { [EMAIL]: 'alice@example.org' });
    const third = await startSession(r);
    expect((await post(`${r.url}/session`, pkgBody())).status).toBe(500);
    // Cancelled.
    expect((await fetch(`${r.url}/session/${second.token}`, { method: 'DELETE' })).status).toBe(200);
    await startSession(r);
    expect((await post(`${r.url}/session`, pkgBody())).status).toBe(500);
    expect((await getJson(`${r.url}/session/${first.token}/result`)).body).toMatchObject({ status: 'DONE' });
    // Timed out (found by the sweep that a refusal runs first).
    r.clock.advance(901);
    await startSession(r);
    expect((await getJson(`${r.url}/session/${third.token}/status`)).body).toBe('TIMEOUT');
  });
});

describe('knobs under /standin', () => {
  it('lists pending sessions without their requestor tokens', async () => {
    const r = await start();
    const pkg = await startSession(r);
    const done = await startSession(r);
    await wallet.cancel(done.sessionPtr);
    const list = (await getJson(`${r.url}/standin/sessions`)).body as { sessions: Array<Record<string, unknown>> };
    expect(list.sessions).toEqual([
      {
        clientToken: pkg.sessionPtr.u.split('/').pop(),
        sessionPtr: pkg.sessionPtr,
        status: 'INITIALIZED',
        createdAt: r.clock.now(),
        disclose: pkgBody().request.disclose,
      },
    ]);
    expect(JSON.stringify(list)).not.toContain(pkg.token);
  });

  it('times a session out now', async () => {
    const r = await start();
    const pkg = await startSession(r);
    const res = await fetch(`${r.url}/standin/sessions/${pkg.token}/timeout`, { method: 'POST' });
    expect(res.status).toBe(204);
    expect((await getJson(`${r.url}/session/${pkg.token}/status`)).body).toBe('TIMEOUT');
    expect((await fetch(`${r.url}/standin/sessions/${pkg.token}/timeout`, { method: 'POST' })).status).toBe(403);
  });

  it('forces INVALID and EXPIRED proof statuses, and a failing /proofs call', async () => {
    const r = await start();
    const a = await startSession(r);
    const knob = await post(`${r.url}/standin/sessions/${a.token}/outcome`, { outcome: 'INVALID' });
    expect(knob.status).toBe(204);
    expect((await wallet.disclose(a.sessionPtr, { [EMAIL]: 'alice@example.org' })).proofStatus).toBe('INVALID');
    expect((await getJson(`${r.url}/session/${a.token}/result`)).body).toEqual({
      token: a.token,
      status: 'DONE',
      type: 'disclosing',
      proofStatus: 'INVALID',
    });

    expect((await post(`${r.url}/standin/next-outcome`, { outcome: 'EXPIRED' })).status).toBe(204);
    const b = await startSession(r);
    expect((await wallet.disclose(b.sessionPtr, { [EMAIL]: 'alice@example.org' })).proofStatus).toBe('EXPIRED');
    // The knob applies once.
    const c = await startSession(r);
    expect((await wallet.disclose(c.sessionPtr, { [EMAIL]: 'alice@example.org' })).proofStatus).toBe('VALID');

    const d = await startSession(r);
    await post(`${r.url}/standin/sessions/${d.sessionPtr.u.split('/').pop()}/outcome`, { outcome: 'ERROR' });
    await expect(wallet.disclose(d.sessionPtr, { [EMAIL]: 'alice@example.org' })).rejects.toMatchObject({
      status: 403,
      remote: { error: 'UNKNOWN_PUBLIC_KEY' },
    });
    expect((await getJson(`${r.url}/session/${d.token}/result`)).body).toMatchObject({
      status: 'CANCELLED',
      error: { status: 403, error: 'UNKNOWN_PUBLIC_KEY', message: 'Missing public key' },
    });

    expect((await post(`${r.url}/standin/next-outcome`, { outcome: 'BOGUS' })).status).toBe(400);
    expect((await post(`${r.url}/standin/sessions/${'x'.repeat(20)}/outcome`, { outcome: null })).status).toBe(400);
  });

  it('can be switched off', async () => {
    const r = await start({ knobs: false });
    expect((await fetch(`${r.url}/standin/sessions`)).status).toBe(404);
    expect((await fetch(`${r.url}/standin/wallet`)).status).toBe(404);
  });
});

describe('the wallet page', () => {
  it('looks again by itself while nothing is pending, and holds still once a session is listed', async () => {
    const r = await start();
    const empty = await (await fetch(`${r.url}/standin/wallet`)).text();
    expect(empty).toContain('<meta http-equiv="refresh" content="2">');
    await startSession(r);
    const listed = await (await fetch(`${r.url}/standin/wallet`)).text();
    expect(listed).toContain(EMAIL);
    // A person may be typing values into the listed session's form: no reload under them.
    expect(listed).not.toContain('http-equiv="refresh"');
  });

  it('lists a pending session and discloses the values a person types', async () => {
    const r = await start();
    const pkg = await startSession(r);
    const page = await fetch(`${r.url}/standin/wallet`);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const html = await page.text();
    expect(html).toContain('name="viewport"');
    expect(html).toContain(EMAIL);
    expect(html).toContain('value="alice@example.org"');
    // What the session is for, as far as its request can tell, and what it discloses in words.
    expect(html).toContain('For a PostGuard key: to decrypt a file, or to sign as its sender.');
    expect(html).toMatch(
      /Discloses: <strong>E-mail address \(demo credential\)<\/strong> alice@example\.org; nothing \(optional\) or <strong>Mobile number \(demo credential\)<\/strong>/,
    );
    const key = /name="key" value="([0-9a-f]+)"/.exec(html)![1]!;
    const ct = pkg.sessionPtr.u.split('/').pop()!;

    // Links are relative (the page may sit behind a proxy); resolve them as a browser does.
    const action = new URL(
      /<form method="post" action="([^"]+\/disclose)">/.exec(html)![1]!,
      `${r.url}/standin/wallet`,
    );
    expect(action.pathname).toBe(`/standin/wallet/${ct}/disclose`);
    const form = new URLSearchParams({
      key,
      'c.0': '0',
      'v.0.0.0': 'alice@example.org',
      'c.1': '1',
      'v.1.1.0': '+31600000000',
    });
    const res = await fetch(action, { method: 'POST', body: form, redirect: 'manual' });
    expect(res.status).toBe(303);
    const back = new URL(res.headers.get('location')!, action);
    expect(back.pathname).toBe('/standin/wallet');
    expect(back.searchParams.get('notice')).toBe('Disclosed: proof status VALID.');
    const result = (await getJson(`${r.url}/session/${pkg.token}/result`)).body as SessionResult;
    expect(result.disclosed?.map((s) => s?.map((a) => a.rawvalue))).toEqual([['alice@example.org'], ['+31600000000']]);
    expect(await (await fetch(`${r.url}/standin/wallet`)).text()).not.toContain(ct);
  });

  it('refuses forms without the page key and cancels on request', async () => {
    const r = await start();
    const pkg = await startSession(r);
    const ct = pkg.sessionPtr.u.split('/').pop()!;
    const forged = await fetch(`${r.url}/standin/wallet/${ct}/cancel`, {
      method: 'POST',
      body: new URLSearchParams({ key: '0'.repeat(32) }),
      redirect: 'manual',
    });
    expect(forged.status).toBe(403);
    expect((await getJson(`${r.url}/session/${pkg.token}/status`)).body).toBe('INITIALIZED');

    const key = /name="key" value="([0-9a-f]+)"/.exec(await (await fetch(`${r.url}/standin/wallet`)).text())![1]!;
    const res = await fetch(`${r.url}/standin/wallet/${ct}/cancel`, {
      method: 'POST',
      body: new URLSearchParams({ key }),
      redirect: 'manual',
    });
    expect(res.status).toBe(303);
    expect((await getJson(`${r.url}/session/${pkg.token}/status`)).body).toBe('CANCELLED');
  });

  it('escapes everything a requestor controls', async () => {
    const r = await start();
    await startSession(r, {
      request: { '@context': DISCLOSURE, disclose: [[[{ type: EMAIL, value: '"><script>alert(1)</script>' }]]] },
    });
    const html = await (await fetch(`${r.url}/standin/wallet?notice=${encodeURIComponent('<img src=x>')}`)).text();
    expect(html).not.toContain('<script>alert');
    expect(html).not.toContain('<img src=x>');
    expect(html).toContain('&quot;&gt;&lt;script&gt;');
  });
});

describe('bad input gets Yivi errors, never a crash', () => {
  it('answers unknown and malformed tokens with 400s', async () => {
    const r = await start();
    const unknown = 'A'.repeat(20);
    for (const path of ['status', 'result', 'result-jwt']) {
      const res = await fetch(`${r.url}/session/${unknown}/${path}`);
      expect(res.status).toBe(400);
      expect(await res.text()).toBe(
        '{"status":400,"error":"SESSION_UNKNOWN","description":"Unknown or expired session"}',
      );
    }
    expect((await fetch(`${r.url}/session/${unknown}`, { method: 'DELETE' })).status).toBe(400);
    expect(await getJson(`${r.url}/session/short/status`)).toEqual({
      status: 400,
      body: {
        status: 400,
        error: 'INVALID_REQUEST',
        description: 'Invalid HTTP request',
        message: 'string did not pass input validation for requestorToken',
      },
      type: 'application/json; charset=UTF-8',
    });
    expect((await getJson(`${r.url}/irma/session/short/status`)).body).toMatchObject({
      error: 'INVALID_REQUEST',
      message: 'string did not pass input validation for clientToken',
    });
    expect((await getJson(`${r.url}/irma/session/${unknown}/status`)).body).toMatchObject({ error: 'SESSION_UNKNOWN' });
    expect(await getJson(`${r.url}/irma/whatever`)).toMatchObject({
      status: 404,
      body: { status: 404, error: 'INVALID_REQUEST' },
    });
    const plain = await fetch(`${r.url}/nothing-here`);
    expect(plain.status).toBe(404);
    expect(await plain.text()).toBe('404 page not found\n');
  });

  it('rejects malformed session requests with INVALID_REQUEST and the reason', async () => {
    const r = await start({ knownAttributes: [EMAIL, MOBILE, 'irma-demo.sidn-pbdf.email.domain'] });
    const cases: Array<[unknown, number, string | RegExp]> = [
      ['{"validity":', 400, /JSON/],
      ['', 400, /JSON/],
      ['[1,2]', 400, /body must be object/],
      [
        { validity: '300', request: { '@context': DISCLOSURE, disclose: [[[EMAIL]]] } },
        400,
        'body/validity must be integer',
      ],
      [{ validity: -1, request: { '@context': DISCLOSURE, disclose: [[[EMAIL]]] } }, 400, /validity must be >= 0/],
      [{ request: { '@context': DISCLOSURE, disclose: 'pbdf.a.b.c' } }, 400, /disclose must be array/],
      [{ request: { '@context': DISCLOSURE, disclose: [] } }, 400, 'Disclosure request had no attributes'],
      [{ request: { '@context': DISCLOSURE } }, 400, 'Disclosure request had no attributes'],
      [{ request: { '@context': DISCLOSURE, disclose: [[[]]] } }, 400, 'Disclosure request had no attributes'],
      [{ request: { '@context': DISCLOSURE, disclose: [[]] } }, 400, 'Empty disjunction'],
      [
        { request: { '@context': DISCLOSURE, disclose: [[['a.b']]] } },
        400,
        'Expected attribute request to consist of 4 or 3 parts, 2 found',
      ],
      [{ request: { '@context': DISCLOSURE, disclose: [[['a..b.c']]] } }, 400, /malformed attribute identifier/],
      [
        { request: { '@context': DISCLOSURE, disclose: [[[{ value: 'x' }]]] } },
        400,
        /must have required property 'type'/,
      ],
      [
        { request: { '@context': DISCLOSURE, disclose: [[['irma-demo.x.y.z']]] } },
        400,
        'Unknown attribute type: irma-demo.x.y.z',
      ],
      [
        { request: { '@context': DISCLOSURE, disclose: [[[EMAIL, MOBILE, 'irma-demo.sidn-pbdf.email.domain']]] } },
        400,
        'Within inner conjunctions, attributes from the same credential type must be adjacent',
      ],
      [
        { request: { '@context': 'https://example.test/other', disclose: [[[EMAIL]]] } },
        400,
        'Invalid requestor request type',
      ],
      [{ '@context': 'https://example.test/other', disclose: [[[EMAIL]]] }, 400, 'Invalid session request type'],
      [{ disclose: [[[EMAIL]]] }, 400, /legacy/],
      [
        { '@context': 'https://irma.app/ld/request/signature/v2', message: 'm', disclose: [[[EMAIL]]] },
        501,
        /disclosure sessions/,
      ],
      [
        { callbackUrl: 'https://x.test', request: { '@context': DISCLOSURE, disclose: [[[EMAIL]]] } },
        501,
        /callbackUrl/,
      ],
      [{ request: { '@context': DISCLOSURE, augmentReturnUrl: true, disclose: [[[EMAIL]]] } }, 400, /augmenting/],
    ];
    for (const [body, status, message] of cases) {
      const res = await post(`${r.url}/session`, body);
      const json = (await res.json()) as { status: number; error: string; message: string };
      expect({ body, status: res.status }).toEqual({ body, status });
      expect(json.status).toBe(status);
      expect(json.error).toBe(status === 501 ? 'UNSUPPORTED' : 'INVALID_REQUEST');
      if (typeof message === 'string') expect(json.message).toBe(message);
      else expect(json.message).toMatch(message);
    }
    const huge = await post(`${r.url}/session`, JSON.stringify({ pad: 'x'.repeat(2 << 20) }));
    expect(huge.status).toBe(400);
    expect(((await huge.json()) as { message: string }).message).toBe('http: request body too large');
    expect((await fetch(`${r.url}/health`)).status).toBe(200);
  });

  it('rejects malformed wallet messages with MALFORMED_INPUT and leaves the session usable', async () => {
    const r = await start();
    const pkg = await startSession(r);
    const connection = await wallet.connect(pkg.sessionPtr);
    const auth = { authorization: connection.authorization };
    const bad: unknown[] = [
      '{"@context":',
      '"just a string"',
      { proofs: [], indices: [] },
      { '@context': 'urn:standin:simulated-disclosure:v1' },
      { '@context': 'urn:standin:simulated-disclosure:v1', disclosed: [[{ id: EMAIL }]] },
      { '@context': 'urn:standin:simulated-disclosure:v1', disclosed: [[{ id: EMAIL, rawvalue: 5 }]] },
      { '@context': 'urn:standin:simulated-disclosure:v1', disclosed: [], issuancetime: 'soon' },
      { '@context': 'urn:standin:simulated-disclosure:v0', disclosed: [] },
    ];
    for (const body of bad) {
      const res = await post(`${pkg.sessionPtr.u}/proofs`, body, auth);
      expect({ body, status: res.status }).toEqual({ body, status: 400 });
      expect(((await res.json()) as { error: string }).error).toBe('MALFORMED_INPUT');
    }
    const noType = await fetch(`${pkg.sessionPtr.u}/proofs`, { method: 'POST', headers: auth, body: 'garbage' });
    expect(noType.status).toBe(400);
    expect((await getJson(`${r.url}/session/${pkg.token}/status`)).body).toBe('CONNECTED');
    const sets = [[{ id: EMAIL, rawvalue: 'alice@example.org' }], []];
    const ok = await wallet.sendDisclosure(connection, sets, { issuancetime: 1_700_000_000 });
    expect(ok.proofStatus).toBe('VALID');
    const result = (await getJson(`${r.url}/session/${pkg.token}/result`)).body as SessionResult;
    expect(result.disclosed?.[0]?.[0]?.issuancetime).toBe(1_699_488_000);
  });

  it('refuses proofs from a wallet that never connected', async () => {
    const r = await start();
    const pkg = await startSession(r);
    const body = { '@context': 'urn:standin:simulated-disclosure:v1', disclosed: [] };
    const res = await post(`${pkg.sessionPtr.u}/proofs`, body, { authorization: 'x'.repeat(20) });
    expect(res.status).toBe(403);
    expect(await res.json()).toEqual({
      status: 403,
      error: 'UNEXPECTED_REQUEST',
      description: 'Unexpected request in this state',
      message: 'Session not yet started or already finished',
    });
  });
});

describe('logging', () => {
  it('never writes session tokens, client authorizations or JWTs to the log', async () => {
    const lines: string[] = [];
    const stream = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const r = await start({ logger: { level: 'trace', stream }, requestorToken: 'requestor-secret-value' });
    const pkg = await startSession(r, pkgBody(), { authorization: 'requestor-secret-value' });
    const connection = await wallet.connect(pkg.sessionPtr);
    await wallet.sendDisclosure(connection, [[{ id: EMAIL, rawvalue: 'alice@example.org' }], []]);
    const jwt = await (await fetch(`${r.url}/session/${pkg.token}/result-jwt`)).text();
    await fetch(`${r.url}/session/${'B'.repeat(20)}/result`);
    await post(`${r.url}/session`, pkgBody(), { authorization: 'wrong-secret' });
    await r.close();
    running = [];

    const log = lines.join('');
    expect(log).toContain('session started');
    expect(log).toContain('[token]');
    const secrets = [
      pkg.token,
      pkg.sessionPtr.u.split('/').pop()!,
      pkg.frontendRequest.authorization,
      connection.authorization,
      'requestor-secret-value',
      'wrong-secret',
      jwt,
      jwt.split('.')[2]!,
      'B'.repeat(20),
    ];
    for (const secret of secrets) expect(log).not.toContain(secret);
  });
});
