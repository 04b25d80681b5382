import type { FastifyInstance } from 'fastify';
import type { IdentityServerClient } from '../idp/client.js';
import { disclosureRequest, startBodySchema, type StartBody } from '../idp/request.js';
import type { StatusStreams } from '../idp/status-streams.js';
import { checkSessionToken } from '../idp/token.js';
import { SENSITIVE, type ClientKeyOf } from '../ratelimit/index.js';

/**
 * The identity session, relayed to the identity server (Yivi requestor API):
 *   POST start                 → POST {idp}/session; answers {sessionPtr: {u, irmaqr}, token}
 *   GET  jwt/{token}           → GET {idp}/session/{token}/result-jwt; the JWT text, unchanged
 *   GET  statusevents/{token}  → GET {idp}/session/{token}/statusevents; the SSE bytes, unchanged,
 *                                one upstream per session shared by its listeners, capped (idp/status-streams.ts)
 * Tokens are checked (20 alphanumerics) before any upstream call. No key material passes here.
 */

export interface SessionRoutesOptions {
  idp: IdentityServerClient;
  streams: StatusStreams;
  /** The client a stream counts against (the rate limiter's key). */
  clientKeyOf: ClientKeyOf;
  /** Refuse sessions that ask for demo-scheme attributes (--refuse-demo-schemes). */
  refuseDemoSchemes: boolean;
}

// No maxLength: a token of the wrong length is SESSION_TOKEN (checkSessionToken), not a schema error.
// The router bounds the segment (maxParamLength); longer ones are answered by the not-found handler.
const tokenParams = {
  type: 'object',
  required: ['token'],
  additionalProperties: false,
  properties: { token: { type: 'string' } },
} as const;

const sessionPackageSchema = {
  type: 'object',
  required: ['sessionPtr', 'token'],
  additionalProperties: false,
  properties: {
    sessionPtr: {
      type: 'object',
      required: ['u', 'irmaqr'],
      additionalProperties: false,
      properties: { u: { type: 'string' }, irmaqr: { type: 'string', enum: ['disclosing', 'signing', 'issuing'] } },
    },
    token: { type: 'string' },
  },
} as const;

export async function sessionRoutes(
  app: FastifyInstance,
  { idp, streams, clientKeyOf, refuseDemoSchemes }: SessionRoutesOptions,
): Promise<void> {
  app.post<{ Body: StartBody }>(
    '/start',
    { config: SENSITIVE, schema: { body: startBodySchema, response: { 200: sessionPackageSchema } } },
    async (request) => {
      const session = await idp.startSession(disclosureRequest(request.body, { refuseDemoSchemes }));
      request.log.info('identity session started');
      return session;
    },
  );

  app.get<{ Params: { token: string } }>('/jwt/:token', { schema: { params: tokenParams } }, async (request, reply) => {
    const jwt = await idp.resultJwt(checkSessionToken(request.params.token));
    return reply.type('text/plain; charset=utf-8').send(jwt);
  });

  app.get<{ Params: { token: string } }>(
    '/statusevents/:token',
    { schema: { params: tokenParams }, exposeHeadRoute: false },
    async (request, reply) => {
      const token = checkSessionToken(request.params.token);
      // The client going away ends its stream, and the upstream with the session's last listener.
      const gone = new AbortController();
      reply.raw.once('close', () => gone.abort());
      // Without a peer address (a socket already gone) the client is nobody in particular.
      const events = await streams.subscribe(token, clientKeyOf(request) ?? 'unknown', gone.signal);
      // Fastify sets the headers and pipes; Node would send them with the first event, which for a
      // listener that joins a shared upstream may be minutes away. EventSource waits for the headers.
      reply.raw.once('pipe', () => reply.raw.flushHeaders());
      return reply
        .header('content-type', 'text/event-stream')
        .header('cache-control', 'no-cache')
        .header('x-accel-buffering', 'no')
        .send(events);
    },
  );
}
