import { Readable } from 'node:stream';
import type { ReadableStream as NodeWebReadableStream } from 'node:stream/web';
import type { FastifyInstance } from 'fastify';
import type { IdentityServerClient } from '../idp/client.js';
import { disclosureRequest, startBodySchema, type StartBody } from '../idp/request.js';
import { checkSessionToken } from '../idp/token.js';

/**
 * The identity session, relayed to the identity server (Yivi requestor API):
 *   POST start                 → POST {idp}/session; answers {sessionPtr: {u, irmaqr}, token}
 *   GET  jwt/{token}           → GET {idp}/session/{token}/result-jwt; the JWT text, unchanged
 *   GET  statusevents/{token}  → GET {idp}/session/{token}/statusevents; the SSE bytes, unchanged
 * Tokens are checked (20 alphanumerics) before any upstream call. No key material passes here.
 */

export interface SessionRoutesOptions {
  idp: IdentityServerClient;
}

const tokenParams = {
  type: 'object',
  required: ['token'],
  additionalProperties: false,
  properties: { token: { type: 'string', maxLength: 64 } },
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

export async function sessionRoutes(app: FastifyInstance, { idp }: SessionRoutesOptions): Promise<void> {
  // Open relays, so that closing the server ends them instead of waiting for their sessions to end.
  const relays = new Set<AbortController>();
  app.addHook('preClose', async () => {
    for (const relay of relays) relay.abort();
  });

  app.post<{ Body: StartBody }>(
    '/start',
    { schema: { body: startBodySchema, response: { 200: sessionPackageSchema } } },
    async (request) => {
      const session = await idp.startSession(disclosureRequest(request.body));
      request.log.info('identity session started');
      return session;
    },
  );

  app.get<{ Params: { token: string } }>(
    '/jwt/:token',
    { schema: { params: tokenParams } },
    async (request, reply) => {
      const jwt = await idp.resultJwt(checkSessionToken(request.params.token));
      return reply.type('text/plain; charset=utf-8').send(jwt);
    },
  );

  app.get<{ Params: { token: string } }>(
    '/statusevents/:token',
    { schema: { params: tokenParams }, exposeHeadRoute: false },
    async (request, reply) => {
      const token = checkSessionToken(request.params.token);
      // The client going away (or the response ending) ends the upstream request too.
      const upstream = new AbortController();
      relays.add(upstream);
      reply.raw.once('close', () => {
        upstream.abort();
        relays.delete(upstream);
      });
      const body = await idp.statusEvents(token, upstream.signal);
      const events = Readable.fromWeb(body as unknown as NodeWebReadableStream<Uint8Array>);
      // An upstream that breaks off mid-stream just ends the relay; nothing to report to anyone.
      events.on('error', () => undefined);
      return reply
        .header('content-type', 'text/event-stream')
        .header('cache-control', 'no-cache')
        .header('x-accel-buffering', 'no')
        .send(events);
    },
  );
}
