import { createReadStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { StorageContext } from '../context.js';
import { sendCut } from '../cut.js';
import { parseRangeHeader } from '../range.js';

/**
 * GET /filedownload/{name}: any file in the data directory, streamed, with single-range
 * support (`Range: bytes=a-b | a- | -n`, inclusive ends as in RFC 9110). As in Cryptify there is
 * no finalization check: an upload still in progress is served as far as it got. An armed download
 * fault (stand-in only) cuts a 200 or 206 body short with a reset.
 */

/** Flat file names only: nothing that could leave the data directory. */
export const isSafeName = (name: string): boolean =>
  name.length > 0 &&
  name.length <= 128 &&
  !name.includes('/') &&
  !name.includes('\\') &&
  !name.includes('\0') &&
  name !== '.' &&
  name !== '..';

export async function downloadRoutes(app: FastifyInstance, ctx: StorageContext): Promise<void> {
  app.get<{ Params: { name: string } }>('/filedownload/:name', async (request, reply) => {
    const { name } = request.params;
    if (!isSafeName(name)) return reply.code(404).send();
    const path = join(ctx.dataDir, name);
    let size: number;
    try {
      const handle = await open(path, 'r');
      try {
        const stat = await handle.stat();
        if (!stat.isFile()) return reply.code(404).send();
        size = stat.size;
      } finally {
        await handle.close();
      }
    } catch {
      return reply.code(404).send();
    }
    reply.header('accept-ranges', 'bytes').type('application/octet-stream');
    const rangeHeader = request.headers.range;
    // A HEAD has no body to cut: it must not use up a fault meant for the download that follows.
    const cut = () => (request.method === 'GET' ? ctx.faults.takeDownload() : undefined);
    const holder = (hold: boolean) => (hold ? (socket: Socket) => ctx.faults.hold(socket) : undefined);
    if (rangeHeader === undefined) {
      reply.header('content-length', size);
      const fault = cut();
      if (fault !== undefined) return sendCut(reply, 200, path, 0, size, fault.cutAfterBytes, holder(fault.hold));
      return reply.code(200).send(createReadStream(path, { start: 0, end: Math.max(0, size - 1) }));
    }
    const range = parseRangeHeader(rangeHeader, size);
    if (range === undefined) return reply.code(416).header('content-range', `bytes */${size}`).send();
    const length = range.endInclusive - range.start + 1;
    reply
      .header('content-range', `bytes ${range.start}-${range.endInclusive}/${size}`)
      .header('content-length', length);
    const fault = cut();
    if (fault !== undefined)
      return sendCut(reply, 206, path, range.start, length, fault.cutAfterBytes, holder(fault.hold));
    return reply.code(206).send(createReadStream(path, { start: range.start, end: range.endInclusive }));
  });
}
