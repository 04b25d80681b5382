import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyServerFactory } from 'fastify';
import { PKG_ERRORS, type PkgErrorCode } from './errors.js';

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
}

export const DEFAULT_CONNECTION_LIMITS: Readonly<ConnectionLimits> = Object.freeze({
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  maxConnections: 10_000,
});

/** A Fastify server factory: Node's HTTP server with the limits, checked often enough to matter. */
export function limitedServerFactory(limits: ConnectionLimits): FastifyServerFactory {
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
