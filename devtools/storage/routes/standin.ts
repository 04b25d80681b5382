import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { StorageContext } from '../context.js';
import { receivePage } from '../receive-page.js';
import { isSafeName } from './download.js';

/**
 * Stand-in-only routes under /standin, for tests and development: the outbox of notification
 * mails that would have been sent, the state of an upload, and fault injection for chunk PUTs
 * and downloads.
 */

const faultSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    /** How many chunk requests fail; leave out and set `always` for all of them. */
    times: { type: 'integer', minimum: 1 },
    always: { type: 'boolean' },
    /** Status to answer (default 500); or `reset` to drop the connection, or `hang` to never answer. */
    status: { type: 'integer', minimum: 400, maximum: 599 },
    reset: { type: 'boolean' },
    hang: { type: 'boolean' },
    /** Fail after the chunk was committed: the client never hears that it was stored. */
    afterCommit: { type: 'boolean' },
    /** Only chunks starting at this offset or later fail. */
    fromOffset: { type: 'integer', minimum: 0 },
  },
} as const;

interface FaultBody {
  times?: number;
  always?: boolean;
  status?: number;
  reset?: boolean;
  hang?: boolean;
  afterCommit?: boolean;
  fromOffset?: number;
}

const downloadFaultSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['cutAfterBytes'],
  properties: {
    /** Body bytes each cut response sends before its connection is reset (at least 1: see cut.ts). */
    cutAfterBytes: { type: 'integer', minimum: 1 },
    /** How many responses are cut (default 1). */
    times: { type: 'integer', minimum: 1 },
    /** Hold the connection after the bytes until DELETE /standin/faults, instead of resetting it at once. */
    hold: { type: 'boolean' },
    /** How many downloads pass untouched first (default 0). */
    skip: { type: 'integer', minimum: 0 },
  },
} as const;

interface DownloadFaultBody {
  cutAfterBytes: number;
  times?: number;
  hold?: boolean;
  skip?: number;
}

export async function standinRoutes(app: FastifyInstance, ctx: StorageContext): Promise<void> {
  app.get('/outbox', async () => ({ mails: ctx.outbox.list() }));

  // Where pg-dev's mails lead when no app's receive page was given (receive-page.ts).
  app.get<{ Querystring: { uuid?: string; recipient?: string } }>('/receive', async (request, reply) => {
    const { uuid, recipient } = request.query;
    const html = receivePage({
      uuid: typeof uuid === 'string' ? uuid : undefined,
      recipient: typeof recipient === 'string' ? recipient : undefined,
      storageUrl: `${request.protocol}://${request.host}`,
      pkgUrl: ctx.settings.pkgUrl,
    });
    return reply.type('text/html; charset=utf-8').send(html);
  });
  app.delete('/outbox', async (_request, reply) => {
    ctx.outbox.clear();
    return reply.code(204).send();
  });

  app.get<{ Params: { uuid: string } }>('/uploads/:uuid', async (request, reply) => {
    const { uuid } = request.params;
    const session = ctx.store.get(uuid);
    const size = isSafeName(uuid)
      ? await stat(join(ctx.dataDir, uuid)).then(
          (s) => s.size,
          () => null,
        )
      : null;
    if (session === undefined && size === null) return reply.code(404).send({ error: 'unknown upload' });
    return {
      session: session === undefined ? null : { uploaded: session.uploaded, finalized: session.finalized },
      fileBytes: size,
    };
  });

  app.get('/faults', async () => {
    const { chunk, download, triggered, downloadsCut } = ctx.faults.describe();
    return {
      triggered,
      downloadsCut,
      chunk:
        chunk === null ? null : { ...chunk, remaining: Number.isFinite(chunk.remaining) ? chunk.remaining : 'always' },
      download,
    };
  });
  app.put<{ Body: FaultBody }>('/faults/chunk', { schema: { body: faultSchema } }, async (request, reply) => {
    const { times, always, status, reset, hang, afterCommit, fromOffset } = request.body;
    if ((times === undefined) === (always !== true)) {
      return reply.code(400).send({ error: 'give exactly one of times and always: true' });
    }
    if ([status !== undefined, reset === true, hang === true].filter(Boolean).length > 1)
      return reply.code(400).send({ error: 'give at most one of status, reset and hang' });
    // A hung chunk is held before it is read, so it cannot also have been committed.
    if (hang === true && afterCommit === true)
      return reply.code(400).send({ error: 'hang happens before the chunk is read: not with afterCommit' });
    ctx.faults.setChunkFault({
      remaining: always === true ? Infinity : times!,
      response: reset === true ? 'reset' : hang === true ? 'hang' : (status ?? 500),
      afterCommit: afterCommit === true,
      fromOffset: fromOffset ?? 0,
    });
    return reply.code(204).send();
  });
  // POST as the e2e tests call it; PUT as the chunk fault is armed.
  app.route<{ Body: DownloadFaultBody }>({
    method: ['POST', 'PUT'],
    url: '/faults/download',
    schema: { body: downloadFaultSchema },
    handler: async (request, reply) => {
      const { times, cutAfterBytes, hold, skip } = request.body;
      ctx.faults.setDownloadFault({ remaining: times ?? 1, cutAfterBytes, hold: hold === true, skip: skip ?? 0 });
      return reply.code(204).send();
    },
  });
  app.delete('/faults', async (_request, reply) => {
    ctx.faults.clear();
    return reply.code(204).send();
  });
}
