import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Writable } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { connect, fromQr, sendDisclosure } from '../devtools/standin/wallet.js';
import { NO_RATE_LIMIT, startPkg, type RunningPkg } from './testing.js';

/**
 * Status-event streams on real sockets: the per-client and total caps (429 TOO_MANY_STREAMS with
 * Retry-After), one upstream subscription per session shared by its listeners, streams that end with
 * the session, on the PKG's own deadline, or when the last listener leaves, and unknown sessions as a
 * quiet 404. Clients are told apart by X-Forwarded-For from a trusted proxy (this test, on 127.0.0.1).
 */

const EMAIL = 'irma-demo.sidn-pbdf.email.email';
const PROXIED = { ...NO_RATE_LIMIT, trustedProxies: ['127.0.0.1'] };

let pkg: RunningPkg;
const logLines: Array<{ level: number; msg?: string; code?: string }> = [];
/** statusevents requests the stand-in received, and the ones it saw closed. */
let upstreamOpened = 0;
let upstreamClosed = 0;
const open: AbortController[] = [];

const watchUpstream = (req: IncomingMessage, res: ServerResponse): void => {
  if (!req.url?.includes('/statusevents')) return;
  upstreamOpened++;
  res.once('close', () => upstreamClosed++);
};

beforeAll(async () => {
  const logStream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n')) if (line !== '') logLines.push(JSON.parse(line));
      done();
    },
  });
  pkg = await startPkg({
    rateLimit: { settings: PROXIED },
    statusStreams: { perClient: 2, total: 4, maxDurationMs: 60_000 },
    logger: { level: 'info', stream: logStream },
  });
  pkg.yivi.app.server.on('request', watchUpstream);
});

afterAll(async () => {
  await pkg?.close();
});

afterEach(async () => {
  for (const controller of open.splice(0)) controller.abort();
  // Let the PKG see the sockets go and free their slots.
  await until(() => upstreamClosed === upstreamOpened, 'every upstream is closed');
});

async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function startSession(): Promise<{ token: string; sessionPtr: { u: string } }> {
  const response = await fetch(`${pkg.url}/v2/irma/start`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ con: [{ t: EMAIL, v: 'a@example.org' }] }),
  });
  expect(response.status).toBe(200);
  return response.json();
}

/** Opens a stream as `client`; the test's afterEach closes it. */
async function stream(token: string, client: string, base = pkg.url): Promise<Response> {
  const controller = new AbortController();
  open.push(controller);
  return fetch(`${base}/v2/irma/statusevents/${token}`, {
    headers: { 'x-forwarded-for': client },
    signal: controller.signal,
  });
}

async function readAll(response: Response): Promise<string> {
  return new TextDecoder().decode(new Uint8Array(await response.arrayBuffer()));
}

async function expectTooMany(response: Response): Promise<void> {
  expect(response.status).toBe(429);
  expect(response.headers.get('retry-after')).toBe('5');
  expect(response.headers.get('x-ratelimit-after')).toBe('5');
  expect(await response.json()).toEqual({
    error: true,
    code: 'TOO_MANY_STREAMS',
    message: 'too many open status event streams',
  });
}

describe('caps', () => {
  it('a client gets at most perClient streams; another client still gets its own', async () => {
    const { token } = await startSession();
    const a1 = await stream(token, '198.51.100.1');
    const a2 = await stream(token, '198.51.100.1');
    expect([a1.status, a2.status]).toEqual([200, 200]);
    await expectTooMany(await stream(token, '198.51.100.1'));
    // The same client through another port of the proxy is the same client.
    await expectTooMany(await stream(token, '198.51.100.1:40000'));
    expect((await stream(token, '198.51.100.2')).status).toBe(200);
  });

  it('a slot comes back when its stream is closed', async () => {
    const { token } = await startSession();
    await stream(token, '198.51.100.3');
    await stream(token, '198.51.100.3');
    await expectTooMany(await stream(token, '198.51.100.3'));
    open.shift()!.abort();
    // The PKG notices the socket going; until then the client may still be at its cap.
    const deadline = Date.now() + 2000;
    let response = await stream(token, '198.51.100.3');
    while (response.status === 429 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      response = await stream(token, '198.51.100.3');
    }
    expect(response.status).toBe(200);
  });

  it('no more than total streams in all, whoever asks', async () => {
    const { token } = await startSession();
    for (const client of ['198.51.100.10', '198.51.100.10', '198.51.100.11', '198.51.100.12']) {
      expect((await stream(token, client)).status).toBe(200);
    }
    await expectTooMany(await stream(token, '198.51.100.13'));
  });

  it('a refused or failed stream holds no slot: unknown sessions twice over the cap are 404 each time', async () => {
    for (let i = 0; i < 4; i++) {
      const response = await stream('Q'.repeat(20), '198.51.100.20');
      expect(response.status).toBe(404);
      expect(await response.json()).toMatchObject({ code: 'SESSION_UNKNOWN' });
    }
  });
});

describe('one upstream per session', () => {
  it('fans one upstream subscription out to every listener; all get the same events and end with the session', async () => {
    const session = await startSession();
    const before = upstreamOpened;
    const listeners = await Promise.all(
      ['198.51.100.30', '198.51.100.31', '198.51.100.32'].map((c) => stream(session.token, c)),
    );
    expect(listeners.map((r) => r.status)).toEqual([200, 200, 200]);
    const bodies = listeners.map(readAll);
    await new Promise((resolve) => setTimeout(resolve, 60)); // the "open" event
    const wallet = await connect(fromQr(session));
    await sendDisclosure(wallet, [[{ id: EMAIL, rawvalue: 'a@example.org' }]]);
    const texts = await Promise.all(bodies);
    expect(texts[0]).toBe('event: open\n\ndata: "CONNECTED"\n\ndata: "DONE"\n\n');
    expect(texts[1]).toBe(texts[0]);
    expect(texts[2]).toBe(texts[0]);
    expect(upstreamOpened - before).toBe(1);
  });

  it('a listener that leaves does not end the others; the last one to leave closes the upstream', async () => {
    const { token } = await startSession();
    const before = { opened: upstreamOpened, closed: upstreamClosed };
    await stream(token, '198.51.100.40');
    const second = await stream(token, '198.51.100.41');
    const reader = second.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toBe('event: open\n\n');
    expect(upstreamOpened - before.opened).toBe(1);
    open[0]!.abort();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(upstreamClosed - before.closed).toBe(0);
    open[1]!.abort();
    await until(() => upstreamClosed - before.closed === 1, 'the upstream is closed');
  });

  it('a stream ends when its session times out', async () => {
    const { token } = await startSession();
    const body = readAll(await stream(token, '198.51.100.50'));
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect((await fetch(`${pkg.yivi.url}/standin/sessions/${token}/timeout`, { method: 'POST' })).status).toBe(204);
    expect(await body).toBe('event: open\n\ndata: "TIMEOUT"\n\n');
  });

  it('an unknown session is 404 SESSION_UNKNOWN on both token routes, with no log line of its own', async () => {
    logLines.length = 0;
    for (const route of ['statusevents', 'jwt']) {
      const response = await fetch(`${pkg.url}/v2/irma/${route}/${'Z'.repeat(20)}`);
      expect(response.status).toBe(404);
      expect(await response.json()).toEqual({ error: true, code: 'SESSION_UNKNOWN', message: 'session not found' });
    }
    // Fastify's access lines (info) only: nothing at warn or above, nothing naming the error.
    expect(logLines.filter((l) => l.level >= 40)).toEqual([]);
    expect(logLines.filter((l) => l.code !== undefined)).toEqual([]);
  });
});

describe('against an identity server that does not end its streams', () => {
  let upstream: Server;
  let url: string;
  let hanging: PkgUnderTest;
  const responses = new Set<ServerResponse>();
  let closedByPkg = 0;

  interface PkgUnderTest {
    url: string;
    close(): Promise<void>;
  }

  beforeAll(async () => {
    // Sends a final status for tokens starting with D, nothing at all for the others, and never ends.
    upstream = createServer((req, res) => {
      responses.add(res);
      res.once('close', () => {
        responses.delete(res);
        closedByPkg++;
      });
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      if (req.url?.includes('/session/S')) return void res.flushHeaders(); // silent until the session ends
      res.write('event: open\n\n');
      if (req.url?.includes('/session/D')) res.write('data: "CONNECTED"\n\ndata: "DONE"\n\n');
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const address = upstream.address();
    url = `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}`;
    const started = await startPkg({ yivi: pkg.yivi, identityServer: { url }, statusStreams: { maxDurationMs: 300 } });
    hanging = started;
  });

  afterAll(async () => {
    await hanging?.close();
    for (const res of responses) res.destroy();
    await new Promise((resolve) => upstream.close(resolve));
  });

  it('a final status in the events ends the stream and the upstream, whatever the upstream does', async () => {
    const closedBefore = closedByPkg;
    const response = await fetch(`${hanging.url}/v2/irma/statusevents/${'D'.repeat(20)}`);
    expect(await readAll(response)).toBe('event: open\n\ndata: "CONNECTED"\n\ndata: "DONE"\n\n');
    await until(() => closedByPkg === closedBefore + 1, 'the PKG closed the upstream');
  });

  it('a listener joining a silent upstream gets its headers at once, not with the next event', async () => {
    const first = await fetch(`${hanging.url}/v2/irma/statusevents/${'S'.repeat(20)}`);
    const started = Date.now();
    const second = await fetch(`${hanging.url}/v2/irma/statusevents/${'S'.repeat(20)}`);
    // Well before the stream's end (the 300 ms deadline), which would bring the headers anyway.
    expect(Date.now() - started).toBeLessThan(200);
    expect([first.status, second.status]).toEqual([200, 200]);
    expect(second.headers.get('content-type')).toBe('text/event-stream');
    await Promise.all([readAll(first), readAll(second)]);
  });

  it("the PKG's deadline ends a stream whose session never ends, upstream included", async () => {
    const closedBefore = closedByPkg;
    const started = Date.now();
    const response = await fetch(`${hanging.url}/v2/irma/statusevents/${'E'.repeat(20)}`);
    expect(await readAll(response)).toBe('event: open\n\n');
    expect(Date.now() - started).toBeLessThan(2000);
    await until(() => closedByPkg === closedBefore + 1, 'the PKG closed the upstream');
  });
});
