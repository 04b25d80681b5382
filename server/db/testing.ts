import { randomBytes } from 'node:crypto';
import { createServer, connect, type Server, type Socket } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import pg from 'pg';
import { migrate } from './migrate.js';

/**
 * Helpers for tests against the real PostgreSQL and Redis on loopback: a private schema per run, a TCP
 * proxy a test can take down and bring back to simulate an outage of the service behind it, a port where
 * nothing listens, and a logger that records what the stores report.
 */

export const TEST_DATABASE_URL = process.env['TEST_DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';

export interface TestSchema {
  /** Connection string whose connections use only this schema (search_path via `options`). */
  url: string;
  schema: string;
  drop(): Promise<void>;
}

/**
 * Creates a uniquely named schema, so concurrent runs never collide, migrated by `pg-pkg migrate`'s
 * code (the business tables and the migrations table); `{ migrated: false }` leaves it empty.
 */
export async function createTestSchema(
  baseUrl = TEST_DATABASE_URL,
  options: { migrated?: boolean } = {},
): Promise<TestSchema> {
  const schema = `pgpkg_test_${randomBytes(6).toString('hex')}`;
  const admin = async (sql: string) => {
    const client = new pg.Client({ connectionString: baseUrl });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  await admin(`CREATE SCHEMA ${schema}`);
  const url = withSearchPath(baseUrl, schema);
  if (options.migrated !== false) await migrate(url);
  return { url, schema, drop: () => admin(`DROP SCHEMA ${schema} CASCADE`) };
}

/** The same connection string, with every connection's search_path set to `schema`. */
export function withSearchPath(databaseUrl: string, schema: string): string {
  const url = new URL(databaseUrl);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return url.toString();
}

/** The same connection string aimed at another loopback port (e.g. a TcpProxy). */
export function withPort(databaseUrl: string, port: number): string {
  const url = new URL(databaseUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return url.toString();
}

export interface TcpProxy {
  readonly port: number;
  /** Keeps connections open but drops everything sent either way from now on (a hung peer). */
  stall(): void;
  /** Cuts every open connection and refuses new ones (the port stops listening). */
  down(): Promise<void>;
  /** Listens again on the same port and forwards (no longer stalled). */
  up(): Promise<void>;
  close(): Promise<void>;
}

/** A loopback TCP proxy to `targetPort`, on a free port of its own. */
export async function startTcpProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  const track = (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
  };
  let server: Server | undefined;
  let port = 0;
  let stalled = false;
  const forward = (from: Socket, to: Socket) =>
    from.on('data', (chunk: Buffer) => {
      if (!stalled) to.write(chunk);
    });

  const listen = () =>
    new Promise<void>((resolve, reject) => {
      stalled = false;
      const next = createServer((client) => {
        const upstream = connect(targetPort, targetHost);
        track(client);
        track(upstream);
        forward(client, upstream);
        forward(upstream, client);
        client.on('close', () => upstream.destroy());
        upstream.on('close', () => client.destroy());
      });
      next.once('error', reject);
      next.listen(port, '127.0.0.1', () => {
        const address = next.address();
        if (typeof address === 'object' && address !== null) port = address.port;
        server = next;
        resolve();
      });
    });

  const down = () =>
    new Promise<void>((resolve) => {
      for (const socket of sockets) socket.destroy();
      if (server === undefined) return resolve();
      server.close(() => resolve());
      server = undefined;
    });

  await listen();
  return {
    get port() {
      return port;
    },
    stall: () => {
      stalled = true;
    },
    down,
    up: listen,
    close: down,
  };
}

/** A loopback port with nothing listening on it (bound once, then released). */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (typeof address !== 'object' || address === null) throw new Error('no port');
  return address.port;
}

/** A logger for the stores' `logger` option that keeps [level, message] pairs. */
export function recordingLogger() {
  const lines: Array<['warn' | 'info', string]> = [];
  const logger = {
    warn: (message: string) => lines.push(['warn', message]),
    info: (message: string) => lines.push(['info', message]),
  } as unknown as Pick<FastifyBaseLogger, 'warn' | 'info'>;
  return { lines, logger };
}
