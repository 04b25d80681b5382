import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { YiviError, YIVI_JSON, sendYiviError } from '../errors.js';
import { resultClaims, signResultJwt } from '../jwt.js';
import type { JwtKey } from '../key.js';
import type { SessionPackage } from '../protocol.js';
import { parseSessionRequest, pinsAValue, sessionRequestBodySchema } from '../request.js';
import type { Session, SessionStore } from '../sessions.js';
import type { StandinSettings } from '../settings.js';
import { sessionUrl } from '../settings.js';
import type { SseStreams } from '../sse.js';
import { passesTokenCheck } from '../tokens.js';
import { jsonBodyParser, resultSchema, tokenParamsSchema } from './schemas.js';

/**
 * The requestor API (what a backend such as the PKG calls), as irmago's requestorserver serves it:
 * POST /session, GET /session/{token}/{status,statusevents,result,result-jwt}, DELETE /session/{token},
 * GET /publickey and GET /health.
 */

export interface RequestorRoutesOptions {
  store: SessionStore;
  streams: SseStreams;
  key: JwtKey;
  settings: StandinSettings;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The session a requestor-token route names; undefined when unknown or expired. */
    requestorSession: Session | undefined;
  }
}

/** Equal-time comparison of a presented token with the configured one. */
function sameToken(presented: string, expected: string): boolean {
  const a = createHash('sha256').update(presented).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

/**
 * irmago's authenticator chain, reduced to the two modes a stand-in needs. Only headers matter:
 * - no token configured ("no_auth"): JSON with no Authorization header;
 * - token configured: JSON with `Authorization: <token>`; a wrong token is 403 UNAUTHORIZED.
 * Anything no authenticator takes is 400 INVALID_REQUEST (bad Content-Type, or unauthenticated).
 */
export function authenticate(settings: StandinSettings, request: FastifyRequest): YiviError | undefined {
  const contentType = request.headers['content-type'] ?? '';
  const authorization = request.headers.authorization ?? '';
  const json = contentType.startsWith('application/json');
  if (settings.requestorToken === undefined) {
    if (authorization === '' && json) return undefined;
  } else if (authorization !== '' && json) {
    return sameToken(authorization, settings.requestorToken) ? undefined : new YiviError('UNAUTHORIZED');
  }
  if (!contentType.startsWith('application/json') && !contentType.startsWith('text/plain')) {
    return new YiviError('INVALID_REQUEST', `Unsupported Content-Type: ${contentType}`);
  }
  return new YiviError('INVALID_REQUEST', 'request could not be authenticated');
}

export async function requestorRoutes(app: FastifyInstance, opts: RequestorRoutesOptions): Promise<void> {
  const { store, streams, key, settings } = opts;

  app.addContentTypeParser('application/json', { parseAs: 'string' }, jsonBodyParser('INVALID_REQUEST'));
  app.decorateRequest('requestorSession', undefined);

  app.get('/health', async (_request, reply) => reply.type('text/plain').send('OK'));

  app.get('/publickey', async (_request, reply) => reply.type('text/plain; charset=utf-8').send(key.publicKeyPem));

  app.post(
    '/session',
    {
      schema: {
        body: sessionRequestBodySchema,
        // The serializer writes properties in schema order, which is irmago's field order.
        response: {
          200: {
            type: 'object',
            required: ['sessionPtr', 'token', 'frontendRequest'],
            properties: {
              sessionPtr: {
                type: 'object',
                required: ['u', 'irmaqr'],
                properties: { u: { type: 'string' }, irmaqr: { type: 'string' } },
              },
              token: { type: 'string' },
              frontendRequest: {
                type: 'object',
                // Only `authorization` is required: the serializer writes required fields first, and
                // irmago puts the optional pairingHint right after it.
                required: ['authorization'],
                properties: {
                  authorization: { type: 'string' },
                  pairingHint: { type: 'boolean' },
                  minProtocolVersion: { type: 'string' },
                  maxProtocolVersion: { type: 'string' },
                },
              },
            },
          },
        },
      },
      // Authentication looks at headers only, so it runs before the body is parsed, as in irmago.
      onRequest: async (request, reply) => {
        const failure = authenticate(settings, request);
        if (failure !== undefined) return sendYiviError(reply, failure);
      },
    },
    async (request, reply) => {
      const normalized = parseSessionRequest(request.body, { knownAttributes: settings.knownAttributes });
      const session = store.create(normalized);
      const pkg: SessionPackage = {
        sessionPtr: { u: sessionUrl(settings, request, session.clientToken), irmaqr: 'disclosing' },
        token: session.requestorToken,
        frontendRequest: {
          authorization: session.frontendAuth,
          minProtocolVersion: '1.0',
          maxProtocolVersion: '1.1',
        },
      };
      if (settings.pairingHint && pinsAValue(normalized.disclose)) pkg.frontendRequest.pairingHint = true;
      request.log.info({ disjunctions: normalized.disclose.length }, 'session started');
      return reply.header('content-type', YIVI_JSON).send(pkg);
    },
  );

  // Routes under one requestor token: check its format, then look the session up (applying timeouts).
  app.register(async (tokenScope) => {
    tokenScope.addHook('onRequest', async (request: FastifyRequest<{ Params: { token: string } }>, reply) => {
      if (!passesTokenCheck(request.params.token)) {
        return sendYiviError(
          reply,
          new YiviError('INVALID_REQUEST', 'string did not pass input validation for requestorToken'),
        );
      }
      request.requestorSession = store.byRequestorToken(request.params.token);
    });

    const params = tokenParamsSchema;
    const known = (request: FastifyRequest): Session => {
      if (request.requestorSession === undefined) throw new YiviError('SESSION_UNKNOWN');
      return request.requestorSession;
    };

    // A bare JSON string; Fastify sends string payloads as they are, so it is quoted here.
    tokenScope.get('/session/:token/status', { schema: { params } }, async (request, reply) =>
      reply.header('content-type', YIVI_JSON).send(JSON.stringify(known(request).status)),
    );

    tokenScope.get(
      '/session/:token/statusevents',
      { schema: { params }, exposeHeadRoute: false },
      async (request, reply) => {
        // irmago answers an unknown session here with a bare 501 UNSUPPORTED.
        streams.subscribe(reply, request.requestorSession, 'status', new YiviError('UNSUPPORTED'));
        return reply;
      },
    );

    tokenScope.get(
      '/session/:token/result',
      { schema: { params, response: { 200: resultSchema } } },
      async (request, reply) => reply.header('content-type', YIVI_JSON).send(known(request).result),
    );

    tokenScope.get('/session/:token/result-jwt', { schema: { params } }, async (request, reply) => {
      const session = known(request);
      const claims = resultClaims(session.result, settings.jwtIssuer, session.request.validity, settings.clock.now());
      return reply.type('text/plain').send(await signResultJwt(claims, key.privateKey));
    });

    tokenScope.delete('/session/:token', { schema: { params } }, async (request, reply: FastifyReply) => {
      store.cancel(known(request));
      return reply.code(200).send();
    });
  });
}
