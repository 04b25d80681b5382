import { get } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NO_RATE_LIMIT, startPkg, type RunningPkg } from './testing.js';

/**
 * Slow clients against the PKG on a real socket: a client that trickles its headers is cut at the
 * headers deadline (default 10 s; 1 s here); a thousand of them do not starve a real request;
 * the socket cap refuses connections beyond it, and the per-address cap keeps one address from
 * taking them all; headers over Node's 16 KiB limit get the JSON envelope with 431, not a bare
 * socket reset. Other addresses are other loopback addresses (127.0.0.2, ...), as local addresses.
 */

let pkg: RunningPkg;
let port: number;

beforeAll(async () => {
  pkg = await startPkg({
    // All from one address, so that address may hold them all here.
    connections: {
      headersTimeoutMs: 1000,
      requestTimeoutMs: 2000,
      keepAliveTimeoutMs: 500,
      maxConnections: 1200,
      maxConnectionsPerAddress: 1200,
    },
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

/** A socket to `port` from `localAddress`, once connected; errors after that are ignored. */
function openFrom(port: number, localAddress: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1', localAddress }, () => {
      socket.off('error', reject);
      socket.on('error', () => undefined);
      resolve(socket);
    });
    socket.once('error', reject);
  });
}

/** GET /health on a fresh connection from `localAddress`: the status, or the error's code. */
function healthFrom(port: number, localAddress: string): Promise<number | string> {
  return new Promise((resolve) => {
    const request = get(
      { host: '127.0.0.1', port, path: '/health', localAddress, agent: false, timeout: 3000 },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    request.on('timeout', () => request.destroy(new Error('timeout')));
    request.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
  });
}

/** Resolves once `count` of the sockets have closed; rejects after `ms`. */
function whenClosed(sockets: readonly Socket[], count: number, ms: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let closed = 0;
    const timer = setTimeout(() => reject(new Error(`only ${closed} of ${count} sockets closed in ${ms} ms`)), ms);
    const one = () => {
      if (++closed === count) {
        clearTimeout(timer);
        resolve();
      }
    };
    for (const s of sockets) {
      if (s.destroyed) one();
      else s.once('close', one);
    }
  });
}

const portOf = (running: RunningPkg) => Number(new URL(running.url).port);

describe('the per-address cap', () => {
  it('200 half-open sockets from one address under a cap of 200: the address keeps 64, others get /health', async () => {
    const capped = await startPkg({ connections: { maxConnections: 200 } });
    const cappedPort = portOf(capped);
    const held: Socket[] = [];
    try {
      for (let i = 0; i < 200; i++) {
        const s = await openFrom(cappedPort, '127.0.0.1');
        // Half-open: half send nothing, half a partial request line.
        if (i % 2 === 1) s.write('GET /hea');
        held.push(s);
      }
      // The 136 beyond the default cap of 64 are closed at once, long before the headers deadline (10 s).
      const started = Date.now();
      await whenClosed(held, 136, 3000);
      expect(Date.now() - started).toBeLessThan(3000);
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(held.filter((s) => !s.destroyed)).toHaveLength(64);
      // That address gets no more; another one is served.
      expect(await healthFrom(cappedPort, '127.0.0.2')).toBe(200);
      expect(await healthFrom(cappedPort, '127.0.0.1')).not.toBe(200);
      // Sockets that close are no longer counted.
      held.forEach((s) => s.destroy());
      await whenClosed(held, 200, 3000);
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(await healthFrom(cappedPort, '127.0.0.1')).toBe(200);
    } finally {
      held.forEach((s) => s.destroy());
      await capped.close();
    }
  });

  it('the global cap still counts every address', async () => {
    const capped = await startPkg({ connections: { maxConnections: 4, maxConnectionsPerAddress: 2 } });
    const cappedPort = portOf(capped);
    const held: Socket[] = [];
    try {
      for (const address of ['127.0.0.1', '127.0.0.1', '127.0.0.2', '127.0.0.2'])
        held.push(await openFrom(cappedPort, address));
      // A third address is under its own cap, but the PKG is full.
      const extra = await openFrom(cappedPort, '127.0.0.3');
      await whenClosed([extra], 1, 3000);
      // Over its own cap as well: closed.
      const third = await openFrom(cappedPort, '127.0.0.1');
      await whenClosed([third], 1, 3000);
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(held.filter((s) => !s.destroyed)).toHaveLength(4);
    } finally {
      held.forEach((s) => s.destroy());
      await capped.close();
    }
  });

  it('our reverse proxies (--trusted-proxies) are not capped per address', async () => {
    const behindProxy = await startPkg({
      connections: { maxConnections: 100, maxConnectionsPerAddress: 4 },
      rateLimit: { settings: { ...NO_RATE_LIMIT, trustedProxies: ['127.0.0.1'] } },
    });
    const proxyPort = portOf(behindProxy);
    const held: Socket[] = [];
    try {
      for (let i = 0; i < 10; i++) held.push(await openFrom(proxyPort, '127.0.0.1'));
      for (let i = 0; i < 10; i++) held.push(await openFrom(proxyPort, '127.0.0.2'));
      // The proxy keeps all ten and is served; the other address is cut to four.
      await whenClosed(held.slice(10), 6, 3000);
      expect(await healthFrom(proxyPort, '127.0.0.1')).toBe(200);
      expect(held.slice(0, 10).filter((s) => !s.destroyed)).toHaveLength(10);
      expect(held.slice(10).filter((s) => !s.destroyed)).toHaveLength(4);
    } finally {
      held.forEach((s) => s.destroy());
      await behindProxy.close();
    }
  });
});
