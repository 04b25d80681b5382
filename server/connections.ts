import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyServerFactory } from 'fastify';
import { PKG_ERRORS, type PkgErrorCode } from './errors.js';
import { addressKey } from './ratelimit/key.js';

/**
 * What a connection may cost the PKG. Node's defaults let a client that trickles one header byte
 * at a time hold a socket for a minute or more (and checks only every 30 s), and set no cap on
 * sockets; these do.
 */
export interface ConnectionLimits {
  /** Time to send the request line and all headers. 10 s. */
  headersTimeoutMs: number;
  /** Time to send the whole request. 30 s. */
  requestTimeoutMs: number;
  /** How long an idle keep-alive socket stays open. 5 s. */
  keepAliveTimeoutMs: number;
  /** Most sockets open at once; beyond it new connections are closed at once. 10,000. */
  maxConnections: number;
  /**
   * Most sockets open at once from one client address (IPv6 per /56, as the rate limiter keys
   * clients); beyond it that address's new connections are closed at once. Without it one address
   * could hold every socket of `maxConnections` with half-open requests until the headers deadline.
   * 64 (or `maxConnections`, if lower).
   */
  maxConnectionsPerAddress: number;
}

export const DEFAULT_CONNECTION_LIMITS: Readonly<ConnectionLimits> = Object.freeze({
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  maxConnections: 10_000,
  maxConnectionsPerAddress: 64,
});

/**
 * Counts the open sockets of each client address and closes a new one at once when its address
 * already holds `cap`. Peers for which `exempt` says yes (our own reverse proxies, which carry many
 * clients' requests) are not counted.
 */
function capPerAddress(server: Server, cap: number, exempt: (ip: string) => boolean): void {
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    // No address: the socket is already gone. A link-local peer's zone is not part of its address.
    const ip = socket.remoteAddress?.split('%', 1)[0];
    if (ip === undefined || exempt(ip)) return;
    const key = addressKey(ip) ?? ip;
    const count = (open.get(key) ?? 0) + 1;
    open.set(key, count);
    socket.once('close', () => {
      const left = (open.get(key) ?? 1) - 1;
      if (left > 0) open.set(key, left);
      else open.delete(key);
    });
    if (count > cap) socket.destroy();
  });
}

export interface ServerFactoryOptions {
  /** Peers the per-address cap does not apply to (default: none). */
  exemptFromAddressCap?: (ip: string) => boolean;
}

/** A Fastify server factory: Node's HTTP server with the limits, checked often enough to matter. */
export function limitedServerFactory(
  limits: ConnectionLimits,
  options: ServerFactoryOptions = {},
): FastifyServerFactory {
  return (handler) => {
    const server: Server = createServer(
      {
        headersTimeout: limits.headersTimeoutMs,
        requestTimeout: limits.requestTimeoutMs,
        keepAliveTimeout: limits.keepAliveTimeoutMs,
        // Node looks for expired headers/requests this often (default 30 s).
        connectionsCheckingInterval: Math.max(100, Math.min(1000, Math.floor(limits.headersTimeoutMs / 4))),
      },
      (req: IncomingMessage, res: ServerResponse) => handler(req, res),
    );
    server.maxConnections = limits.maxConnections;
    if (limits.maxConnectionsPerAddress < limits.maxConnections)
      capPerAddress(server, limits.maxConnectionsPerAddress, options.exemptFromAddressCap ?? (() => false));
    return server;
  };
}

/** Node-level failures (before Fastify sees a request) answered with the JSON envelope. */
const CLIENT_ERRORS: Record<string, PkgErrorCode> = {
  HPE_HEADER_OVERFLOW: 'HEADERS_TOO_LARGE',
  ERR_HTTP_REQUEST_TIMEOUT: 'REQUEST_TIMEOUT',
};

export function clientErrorHandler(error: NodeJS.ErrnoException, socket: Socket): void {
  const code = CLIENT_ERRORS[error.code ?? ''] ?? 'BAD_REQUEST';
  if (!socket.writable || error.code === 'ECONNRESET') {
    socket.destroy();
    return;
  }
  const { status } = PKG_ERRORS[code];
  const body = JSON.stringify({ error: true, code, message: PKG_ERRORS[code].message });
  socket.end(
    `HTTP/1.1 ${status} ${reasonPhrase(status)}\r\ncontent-type: application/json; charset=utf-8\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

const reasonPhrase = (status: number): string =>
  ({ 400: 'Bad Request', 408: 'Request Timeout', 431: 'Request Header Fields Too Large' })[status] ?? 'Error';
