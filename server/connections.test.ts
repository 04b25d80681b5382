import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPkg, type RunningPkg } from './testing.js';

/**
 * Slow clients against the PKG on a real socket: a client that trickles its headers is cut at the
 * headers deadline (default 10 s; 1 s here); a thousand of them do not starve a real request;
 * the socket cap refuses connections beyond it; headers over Node's 16 KiB limit get the JSON
 * envelope with 431, not a bare socket reset.
 */

let pkg: RunningPkg;
let port: number;

beforeAll(async () => {
  pkg = await startPkg({
    connections: { headersTimeoutMs: 1000, requestTimeoutMs: 2000, keepAliveTimeoutMs: 500, maxConnections: 1200 },
  });
  port = Number(new URL(pkg.url).port);
});
afterAll(() => pkg?.close());

function open(): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve(socket));
    socket.once('error', reject);
  });
}

const closed = (socket: Socket): Promise<number> => {
  const started = Date.now();
  return new Promise((resolve) => socket.once('close', () => resolve(Date.now() - started)));
};

/** Sends a header byte every `everyMs` until the socket closes. */
function trickle(socket: Socket, everyMs: number): () => void {
  socket.write('GET /health HTTP/1.1\r\nHost: x\r\n');
  socket.on('error', () => undefined);
  const timer = setInterval(() => {
    if (!socket.destroyed) socket.write('X');
  }, everyMs);
  return () => clearInterval(timer);
}

describe('slow clients', () => {
  it('a client that trickles its headers is dropped at the headers deadline, with 408 and the envelope', async () => {
    const socket = await open();
    let answer = '';
    socket.on('data', (chunk) => (answer += chunk.toString()));
    const stop = trickle(socket, 200);
    const after = await closed(socket);
    stop();
    expect(after).toBeLessThan(3000);
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toEqual({
      error: true,
      code: 'REQUEST_TIMEOUT',
      message: 'request timeout',
    });
  });

  it('1,000 trickling sockets do not starve real requests', async () => {
    const sockets = await Promise.all(Array.from({ length: 1000 }, open));
    const stops = sockets.map((s) => trickle(s, 300));
    try {
      const started = Date.now();
      for (let i = 0; i < 5; i++) expect((await fetch(`${pkg.url}/health`)).status).toBe(200);
      expect(Date.now() - started).toBeLessThan(2000);
    } finally {
      stops.forEach((stop) => stop());
      sockets.forEach((s) => s.destroy());
    }
  });

  it('headers over the limit: 431 with the JSON envelope', async () => {
    const response = await fetch(`${pkg.url}/health`, { headers: { 'x-padding': 'a'.repeat(20_000) } });
    expect(response.status).toBe(431);
    expect(await response.json()).toEqual({
      error: true,
      code: 'HEADERS_TOO_LARGE',
      message: 'request headers too large',
    });
  });
});

describe('the socket cap', () => {
  it('connections beyond maxConnections are closed at once; the PKG serves again when they go', async () => {
    const small = await startPkg({ connections: { maxConnections: 3 } });
    const smallPort = Number(new URL(small.url).port);
    const held: Socket[] = [];
    try {
      for (let i = 0; i < 3; i++)
        held.push(
          await new Promise<Socket>((resolve) => {
            const s = connect(smallPort, '127.0.0.1', () => resolve(s));
          }),
        );
      const extra = connect(smallPort, '127.0.0.1');
      extra.on('error', () => undefined);
      await new Promise<void>((resolve) => extra.once('close', () => resolve()));
      held.forEach((s) => s.destroy());
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect((await fetch(`${small.url}/health`)).status).toBe(200);
    } finally {
      held.forEach((s) => s.destroy());
      await small.close();
    }
  });
});
