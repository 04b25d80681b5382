import { createReadStream } from 'node:fs';
import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyReply } from 'fastify';

/**
 * A download dropped part-way, for tests of resuming: the response's headers (CORS included, so a
 * browser sees the same response it would otherwise) and the first bytes of its body, then a TCP
 * reset. Each piece is handed to the kernel before the next is written and before the reset, so the
 * client receives exactly the bytes promised and then the reset, never less.
 */

/** Resolves once `chunk` has been handed to the socket; rejects if the client went away first. */
function written(res: ServerResponse, chunk: Uint8Array): Promise<void> {
  if (res.destroyed) return Promise.reject(new Error('the client went away'));
  return new Promise((resolve, reject) => {
    const gone = () => reject(new Error('the client went away'));
    res.once('close', gone);
    res.write(chunk, (error) => {
      res.off('close', gone);
      if (error) reject(error);
      else resolve();
    });
  });
}

/**
 * Answers `status` with the file's bytes `start … start + length − 1` as the body, cut after
 * `cutAfterBytes` (at least 1) of them. A body no longer than that is sent whole.
 *
 * Not after 0 bytes: a reset that follows the headers alone reaches a client with them, and Node's
 * client (at least) then reports a clean end of the connection rather than a reset.
 *
 * `hold`: the connection is kept open after those bytes until `hold(socket)` resolves (the fault
 * released, or the client left), then dropped.
 */
export async function sendCut(
  reply: FastifyReply,
  status: number,
  path: string,
  start: number,
  length: number,
  cutAfterBytes: number,
  hold?: (socket: Socket) => Promise<void>,
): Promise<FastifyReply> {
  const res = reply.raw;
  const headers = Object.entries(reply.getHeaders()).filter(
    (entry): entry is [string, string | number | string[]] => entry[1] !== undefined,
  );
  reply.hijack();
  res.writeHead(status, Object.fromEntries(headers));
  const sent = Math.min(cutAfterBytes, length);
  const file = createReadStream(path, { start, end: start + sent - 1 });
  try {
    for await (const chunk of file) await written(res, chunk as Buffer);
  } catch {
    // The client left (or the file went): there is nobody left to cut off.
    res.destroy();
    return reply;
  } finally {
    file.destroy();
  }
  if (sent === length) res.end();
  else {
    if (hold !== undefined && res.socket !== null) await hold(res.socket);
    if (!(res.socket?.destroyed ?? true)) res.socket?.resetAndDestroy();
  }
  return reply;
}
