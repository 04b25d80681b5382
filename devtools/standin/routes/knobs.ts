import type { FastifyInstance, FastifyRequest } from 'fastify';
import { YiviError } from '../errors.js';
import { marshalConDisCon } from '../request.js';
import type { ForcedOutcome, Session, SessionStore } from '../sessions.js';
import type { StandinSettings } from '../settings.js';
import { sessionUrl } from '../settings.js';
import { isFinalStatus } from '../protocol.js';
import { tokenParamsSchema } from './schemas.js';

/**
 * The stand-in's own controls, under /standin so they can never clash with Yivi's routes:
 *
 *   GET  /standin/sessions                     pending sessions: client token, pointer, request
 *   POST /standin/sessions/{token}/timeout     that session times out now (requestor or client token)
 *   POST /standin/sessions/{token}/outcome     {"outcome": "INVALID"|"EXPIRED"|"ERROR"|null} for its next /proofs
 *   POST /standin/next-outcome                 the same for the next /proofs of any session
 *
 * Requestor tokens are never listed: they are the requestor's secret for results.
 */

export interface KnobRoutesOptions {
  store: SessionStore;
  settings: StandinSettings;
}

const outcomeBodySchema = {
  type: 'object',
  required: ['outcome'],
  properties: { outcome: { type: ['string', 'null'], enum: ['INVALID', 'EXPIRED', 'ERROR', null] } },
} as const;

export interface PendingSessionView {
  clientToken: string;
  sessionPtr: { u: string; irmaqr: 'disclosing' };
  status: string;
  createdAt: number;
  disclose: ReturnType<typeof marshalConDisCon>;
  labels?: Record<string, unknown>;
}

export function pendingView(settings: StandinSettings, request: FastifyRequest, session: Session): PendingSessionView {
  const view: PendingSessionView = {
    clientToken: session.clientToken,
    sessionPtr: { u: sessionUrl(settings, request, session.clientToken), irmaqr: 'disclosing' },
    status: session.status,
    createdAt: session.createdAt,
    disclose: marshalConDisCon(session.request.disclose),
  };
  if (session.request.labels !== undefined) view.labels = session.request.labels;
  return view;
}

export async function knobRoutes(app: FastifyInstance, opts: KnobRoutesOptions): Promise<void> {
  const { store, settings } = opts;
  const params = tokenParamsSchema;

  const sessionFor = (token: string): Session => {
    const session = store.byAnyToken(token);
    if (session === undefined) throw new YiviError('SESSION_UNKNOWN');
    return session;
  };

  app.get('/sessions', async (request) => ({
    sessions: store.pending().map((s) => pendingView(settings, request, s)),
  }));

  app.post<{ Params: { token: string } }>(
    '/sessions/:token/timeout',
    { schema: { params } },
    async (request, reply) => {
      const session = sessionFor(request.params.token);
      if (isFinalStatus(session.status)) throw new YiviError('UNEXPECTED_REQUEST', 'session already finished');
      store.timeOut(session);
      return reply.code(204).send();
    },
  );

  app.post<{ Params: { token: string }; Body: { outcome: ForcedOutcome | null } }>(
    '/sessions/:token/outcome',
    { schema: { params, body: outcomeBodySchema } },
    async (request, reply) => {
      const session = sessionFor(request.params.token);
      session.forced = request.body.outcome ?? undefined;
      return reply.code(204).send();
    },
  );

  app.post<{ Body: { outcome: ForcedOutcome | null } }>(
    '/next-outcome',
    { schema: { body: outcomeBodySchema } },
    async (request, reply) => {
      store.forceNextOutcome(request.body.outcome ?? undefined);
      return reply.code(204).send();
    },
  );
}
