import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { StorageContext } from '../context.js';
import { isSafeName } from './download.js';

/**
 * Stand-in-only routes under /standin, for tests and development: the outbox of notification
 * mails that would have been sent, the state of an upload, and fault injection for chunk PUTs.
 */

const faultSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    /** How many chunk requests fail; leave out and set `always` for all of them. */
    times: { type: 'integer', minimum: 1 },
    always: { type: 'boolean' },
    /** Status to answer (default 500); leave out and set `reset` to drop the connection instead. */
    status: { type: 'integer', minimum: 400, maximum: 599 },
    reset: { type: 'boolean' },
    /** Fail after the chunk was committed: the client never hears that it was stored. */
    afterCommit: { type: 'boolean' },
  },
} as const;

interface FaultBody {
  times?: number;
  always?: boolean;
  status?: number;
  reset?: boolean;
  afterCommit?: boolean;
}

export async function standinRoutes(app: FastifyInstance, ctx: StorageContext): Promise<void> {
  app.get('/outbox', async () => ({ mails: ctx.outbox.list() }));
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
    const { chunk, triggered } = ctx.faults.describe();
    return {
      triggered,
      chunk:
        chunk === null ? null : { ...chunk, remaining: Number.isFinite(chunk.remaining) ? chunk.remaining : 'always' },
    };
  });
  app.put<{ Body: FaultBody }>('/faults/chunk', { schema: { body: faultSchema } }, async (request, reply) => {
    const { times, always, status, reset, afterCommit } = request.body;
    if ((times === undefined) === (always !== true)) {
      return reply.code(400).send({ error: 'give exactly one of times and always: true' });
    }
    if (status !== undefined && reset === true)
      return reply.code(400).send({ error: 'give status or reset, not both' });
    ctx.faults.setChunkFault({
      remaining: always === true ? Infinity : times!,
      response: reset === true ? 'reset' : (status ?? 500),
      afterCommit: afterCommit === true,
    });
    return reply.code(204).send();
  });
  app.delete('/faults', async (_request, reply) => {
    ctx.faults.setChunkFault(undefined);
    return reply.code(204).send();
  });
}
