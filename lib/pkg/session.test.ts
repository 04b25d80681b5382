import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPkg, type RunningPkg } from '../../server/testing.js';
import {
  cancel as walletCancel,
  chooseDisclosure,
  connect,
  disclose,
  fromQr,
  sendDisclosure,
  status as walletStatus,
} from '../../devtools/standin/wallet.js';
import { PkgClient, type PkgClientOptions } from './client.js';
import { readSessionClaims, type SessionStatus } from './jwt.js';
import type { IdentitySession } from './session.js';
import { memoryStore } from './store.js';

/**
 * Identity sessions against the real PKG (server/app.ts) in front of the real stand-in Yivi server,
 * over loopback HTTP. Node has no EventSource, so "events" here is the fetch-based reader; the
 * browser's EventSource is covered by worker/test/pkg.spec.ts.
 */

const EMAIL = 'irma-demo.sidn-pbdf.email.email';
const ALICE = 'alice@example.org';

let pkg: RunningPkg;
let noSse: RunningPkg;

beforeAll(async () => {
  [pkg, noSse] = await Promise.all([startPkg(), startPkg({ standin: { sse: false } })]);
});

afterAll(async () => {
  await Promise.all([pkg?.close(), noSse?.close()]);
});

const client = (target: RunningPkg, options: Partial<PkgClientOptions> = {}) =>
  new PkgClient({ url: target.url, store: memoryStore(), pollIntervalMs: 50, ...options });

/** Records every status a session reports. */
function record(session: IdentitySession): SessionStatus[] {
  const seen: SessionStatus[] = [session.status];
  session.onStatus((s) => seen.push(s));
  return seen;
}

/** The status the identity server itself reports for the session (requestor API). */
async function serverStatus(target: RunningPkg, token: string): Promise<string> {
  return (await (await fetch(`${target.yivi.url}/session/${token}/status`)).json()) as string;
}

const untilStatus = async (session: IdentitySession, wanted: SessionStatus): Promise<void> => {
  if (session.status === wanted) return;
  await new Promise<void>((resolve) => {
    const off = session.onStatus((s) => {
      if (s === wanted) {
        off();
        resolve();
      }
    });
  });
};

describe.each([
  ['status events (fetch-based reader)', () => client(pkg)],
  ['polling only', () => client(pkg, { EventSource: null })],
  ['events refused (SSE off at the identity server), polling takes over', () => client(noSse)],
])('a session with %s', (_name, make) => {
  it('follows the wallet through CONNECTED to DONE and yields a VALID session JWT', async () => {
    const pg = make();
    const session = await pg.startSession({ con: [{ t: EMAIL, v: ALICE }] });
    const seen = record(session);
    expect(session.qrText).toMatch(/^https:\/\/open\.yivi\.app\/-\/session#/);
    const connection = await connect(fromQr(session.qrText));
    await untilStatus(session, 'CONNECTED');
    expect(session.status).toBe('CONNECTED');
    const { disclose: request } = connection.request;
    expect(JSON.stringify(request)).toContain(ALICE);
    await sendDisclosure(connection, chooseDisclosure(request, { [EMAIL]: ALICE }));
    const jwt = await session.result();
    expect(readSessionClaims(jwt)).toMatchObject({ status: 'DONE', proofStatus: 'VALID' });
    expect(seen[0]).toBe('INITIALIZED');
    expect(seen.at(-1)).toBe('DONE');
    expect(seen).toContain('CONNECTED');
  });

  it('sees a wallet that finished before the status stream was open', async () => {
    const session = await make().startSession({ con: [{ t: EMAIL, v: ALICE }] });
    await disclose(session.qrText, { [EMAIL]: ALICE });
    expect(readSessionClaims(await session.result())).toMatchObject({ status: 'DONE', proofStatus: 'VALID' });
  });

  it('reports a refusal in the Yivi app as SESSION_CANCELLED', async () => {
    const session = await make().startSession({ con: [{ t: EMAIL }] });
    await walletCancel(session.qrText);
    await expect(session.result()).rejects.toMatchObject({ name: 'PkgClientError', code: 'SESSION_CANCELLED' });
    expect(session.status).toBe('CANCELLED');
  });
});

describe('session endings', () => {
  it('cancel() ends the session at the identity server too', async () => {
    const session = await client(pkg).startSession({ con: [{ t: EMAIL }] });
    const result = session.result();
    await session.cancel();
    await expect(result).rejects.toMatchObject({ code: 'SESSION_CANCELLED' });
    expect(await serverStatus(pkg, session.token)).toBe('CANCELLED');
    expect(await walletStatus(fromQr(session.qrText))).toBe('CANCELLED');
  });

  it('an AbortSignal rejects with ABORTED and cancels the session at the identity server', async () => {
    const controller = new AbortController();
    const session = await client(pkg).startSession({ con: [{ t: EMAIL }] }, { signal: controller.signal });
    controller.abort();
    await expect(session.result()).rejects.toMatchObject({ code: 'ABORTED' });
    await expect.poll(() => serverStatus(pkg, session.token)).toBe('CANCELLED');
  });

  it('an already aborted signal stops startSession before anything is sent', async () => {
    let calls = 0;
    const pg = client(pkg, { fetch: (...args) => (calls++, fetch(...args)) });
    await expect(pg.startSession({ con: [{ t: EMAIL }] }, { signal: AbortSignal.abort() })).rejects.toMatchObject({
      code: 'ABORTED',
    });
    expect(calls).toBe(0);
  });

  it.each([
    ['events', {}],
    ['polling', { EventSource: null }],
  ] as const)('a timeout at the identity server is SESSION_TIMEOUT (%s)', async (_name, options) => {
    const session = await client(pkg, options).startSession({ con: [{ t: EMAIL }] });
    await fetch(`${pkg.yivi.url}/standin/sessions/${session.token}/timeout`, { method: 'POST' });
    await expect(session.result()).rejects.toMatchObject({ code: 'SESSION_TIMEOUT' });
  });

  it('a disclosure that does not verify is NOT_VALID', async () => {
    const session = await client(pkg).startSession({ con: [{ t: EMAIL }] });
    await fetch(`${pkg.yivi.url}/standin/sessions/${session.token}/outcome`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ outcome: 'INVALID' }),
    });
    await disclose(session.qrText, { [EMAIL]: ALICE });
    await expect(session.result()).rejects.toMatchObject({ code: 'NOT_VALID' });
  });

  it('a request the identity server cannot satisfy fails at start with the PKG error', async () => {
    // An empty conjunction list makes no disclosure request at all: the PKG refuses the body.
    await expect(client(pkg).startSession({ con: [[]] as never })).rejects.toMatchObject({
      code: 'PKG_REJECTED',
      status: 400,
    });
  });

  it('refuses bad requests before sending anything', async () => {
    let calls = 0;
    const pg = client(pkg, { fetch: (...args) => (calls++, fetch(...args)) });
    await expect(pg.startSession({ con: [] })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(pg.startSession({ con: [{ t: EMAIL }], validity: 86_401 })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await expect(pg.startSession({ con: [{ t: EMAIL }], validity: 1.5 })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    expect(calls).toBe(0);
  });

  it('gives up with PKG_UNAVAILABLE when the PKG disappears while polling', async () => {
    const target = await startPkg();
    const session = await client(target, { EventSource: null, maxPollFailures: 2, timeoutMs: 500 }).startSession({
      con: [{ t: EMAIL }],
    });
    await target.close();
    await expect(session.result()).rejects.toMatchObject({ code: 'PKG_UNAVAILABLE' });
  });
});
