import { createServer, type RequestListener } from 'node:http';
import { createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';

/**
 * Loopback servers that misbehave on purpose, for the tests of every wait's way out: an HTTP
 * server whose handler decides (silence, a body cut short, a drip), and a TCP server that answers
 * each request with an HTTP header cut in the middle (or with what `raw` writes instead).
 */

/** What a request line asked: its method and path, from the first bytes of a request. */
export interface RequestLine {
  method: string;
  path: string;
}

export interface HostileServers {
  /** `http://127.0.0.1:port` of the HTTP server. */
  httpBase: string;
  /** `http://127.0.0.1:port` of the server that cuts its header. */
  cutBase: string;
  close(): Promise<void>;
}

/** The start of an answer and half a header name, then silence. */
export const CUT_HEADER = 'HTTP/1.1 200 OK\r\nContent-Le';

/**
 * Starts both servers. `raw(line)` may give the bytes a request is answered with on the cutting
 * server (a whole answer to let some requests through); by default every request gets
 * {@link CUT_HEADER}.
 */
export async function startHostileServers(
  handler: RequestListener,
  raw: (line: RequestLine) => string = () => CUT_HEADER,
): Promise<HostileServers> {
  const http = createServer(handler);
  const sockets = new Set<Socket>();
  const tcp = createTcpServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('data', (data) => {
      const line = /^([A-Z]+) (\S+) HTTP/.exec(data.toString('latin1'));
      if (line !== null) socket.write(raw({ method: line[1]!, path: line[2]! })); // else a request body's bytes
    });
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
  return {
    httpBase: `http://127.0.0.1:${(http.address() as AddressInfo).port}`,
    cutBase: `http://127.0.0.1:${(tcp.address() as AddressInfo).port}`,
    async close() {
      http.closeAllConnections();
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => http.close(resolve));
      await new Promise((resolve) => tcp.close(resolve));
    },
  };
}
