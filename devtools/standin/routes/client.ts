import type { FastifyInstance, FastifyRequest } from 'fastify';
import { YiviError, YIVI_JSON, sendYiviError } from '../errors.js';
import {
  CLIENT_PROTOCOL_VERSION,
  LD_CONTEXT,
  MAX_VERSION_HEADER,
  MIN_VERSION_HEADER,
  SESSION_STATUSES,
  SIMULATED_DISCLOSURE_CONTEXT,
} from '../protocol.js';
import type { ClientSessionRequest, SimulatedDisclosure } from '../protocol.js';
import { walletRequest } from '../request.js';
import { parseVersionHeader } from '../sessions.js';
import type { Session, SessionStore } from '../sessions.js';
import type { StandinSettings } from '../settings.js';
import type { SseStreams } from '../sse.js';
import { passesTokenCheck } from '../tokens.js';
import { jsonBodyParser, tokenParamsSchema } from './schemas.js';

/**
 * The wallet ("client") and browser ("frontend") side of a session, under /irma/session/{clientToken},
 * as irmago's irmaserver serves it. Only the /proofs body differs from Yivi: the stand-in takes a
 * simulated disclosure (urn:standin:simulated-disclosure:v1) instead of Idemix proofs.
 */

export interface ClientRoutesOptions {
  store: SessionStore;
  streams: SseStreams;
  settings: StandinSettings;
}

declare module 'fastify' {
  interface FastifyRequest {
    clientSession: Session;
  }
}

type TokenRequest = FastifyRequest<{ Params: { token: string } }>;

const simulatedDisclosureSchema = {
  type: 'object',
  required: ['@context', 'disclosed'],
  properties: {
    '@context': { type: 'string' },
    disclosed: {
      type: 'array',
      items: {
        type: 'array',
        items: {
          type: 'object',
          required: ['id', 'rawvalue'],
          properties: { id: { type: 'string', maxLength: 512 }, rawvalue: { type: ['string', 'null'] } },
        },
      },
    },
    issuancetime: { type: 'integer', minimum: 0, maximum: 8_640_000_000_000 },
  },
} as const;

const frontendOptionsSchema = {
  type: 'object',
  properties: {
    '@context': { type: 'string' },
    pairingMethod: { type: 'string', enum: ['', 'none', 'pin'] },
  },
} as const;

const sessionOptionsSchema = {
  type: 'object',
  required: ['pairingMethod'],
  properties: {
    '@context': { type: 'string' },
    pairingMethod: { type: 'string' },
    pairingCode: { type: 'string' },
  },
} as const;

const statusString = { type: 'string', enum: [...SESSION_STATUSES] } as const;

export async function clientRoutes(app: FastifyInstance, opts: ClientRoutesOptions): Promise<void> {
  const { store, streams, settings } = opts;

  // irmago reads wallet bodies whatever their Content-Type; unparsable ones are MALFORMED_INPUT.
  app.addContentTypeParser('*', { parseAs: 'string' }, jsonBodyParser('MALFORMED_INPUT'));
  app.addContentTypeParser('application/json', { parseAs: 'string' }, jsonBodyParser('MALFORMED_INPUT'));
  app.decorateRequest('clientSession', undefined as unknown as Session);

  // irmago's session middleware: token format (400 INVALID_REQUEST), then lookup (400 SESSION_UNKNOWN).
  app.addHook('onRequest', async (request: TokenRequest, reply) => {
    const token = request.params.token;
    if (!passesTokenCheck(token)) {
      const message = 'string did not pass input validation for clientToken';
      return sendYiviError(reply, new YiviError('INVALID_REQUEST', message));
    }
    const session = store.byClientToken(token);
    if (session === undefined) return sendYiviError(reply, new YiviError('SESSION_UNKNOWN'));
    request.clientSession = session;
  });

  const params = tokenParamsSchema;

  app.get('/session/:token', { schema: { params } }, async (request, reply) => {
    const min = parseVersionHeader(request.headers[MIN_VERSION_HEADER.toLowerCase()] as string | undefined);
    const max = parseVersionHeader(request.headers[MAX_VERSION_HEADER.toLowerCase()] as string | undefined);
    if (min === undefined || max === undefined) {
      throw new YiviError('MALFORMED_INPUT', 'Invalid protocol version number: not of form x.y');
    }
    const session = request.clientSession;
    store.connect(session, min, max, request.headers.authorization ?? '');
    const answer: ClientSessionRequest = {
      '@context': LD_CONTEXT.clientSessionRequest,
      protocolVersion: CLIENT_PROTOCOL_VERSION,
      options: session.options,
    };
    if (session.options.pairingMethod === 'none') answer.request = clientRequest(session);
    return reply.header('content-type', YIVI_JSON).send(answer);
  });

  app.get('/session/:token/request', { schema: { params } }, async (request, reply) => {
    const session = request.clientSession;
    store.assertConnectedClient(session, request.headers.authorization ?? '');
    return reply.header('content-type', YIVI_JSON).send(clientRequest(session));
  });

  app.post(
    '/session/:token/proofs',
    {
      schema: {
        params,
        body: simulatedDisclosureSchema,
        response: {
          200: { type: 'object', required: ['proofStatus'], properties: { proofStatus: { type: 'string' } } },
        },
      },
      config: { badInput: 'MALFORMED_INPUT' },
      // irmago's pairing middleware: state and client Authorization are checked before the body is read.
      preValidation: async (request) => {
        store.assertConnectedClient(request.clientSession, request.headers.authorization ?? '');
      },
    },
    async (request, reply) => {
      const session = request.clientSession;
      const body = request.body as SimulatedDisclosure;
      if (body['@context'] !== SIMULATED_DISCLOSURE_CONTEXT) {
        throw new YiviError(
          'MALFORMED_INPUT',
          `the stand-in verifies no Idemix proofs; send a body with "@context": "${SIMULATED_DISCLOSURE_CONTEXT}"`,
        );
      }
      const proofStatus = store.submitDisclosure(session, body);
      request.log.info({ proofStatus }, 'disclosure received');
      return reply.header('content-type', YIVI_JSON).send({ proofStatus });
    },
  );

  app.delete('/session/:token', { schema: { params } }, async (request, reply) => {
    store.cancel(request.clientSession);
    return reply.code(200).send();
  });

  // A bare JSON string, quoted here because Fastify sends string payloads as they are.
  app.get('/session/:token/status', { schema: { params } }, async (request, reply) =>
    reply.header('content-type', YIVI_JSON).send(JSON.stringify(request.clientSession.status)),
  );

  app.get('/session/:token/statusevents', { schema: { params }, exposeHeadRoute: false }, async (request, reply) => {
    streams.subscribe(reply, request.clientSession, 'status', new YiviError('SESSION_UNKNOWN'));
    return reply;
  });

  // Frontend protocol 1.1: every call carries the frontendRequest.authorization from the session package.
  app.register(async (frontend) => {
    frontend.addHook('onRequest', async (request, reply) => {
      if (request.headers.authorization !== request.clientSession.frontendAuth) {
        return sendYiviError(reply, new YiviError('CLIENT_UNAUTHORIZED'));
      }
    });

    frontend.get(
      '/session/:token/frontend/status',
      {
        schema: {
          params,
          response: { 200: { type: 'object', required: ['status'], properties: { status: statusString } } },
        },
      },
      async (request, reply) => reply.header('content-type', YIVI_JSON).send({ status: request.clientSession.status }),
    );

    frontend.get(
      '/session/:token/frontend/statusevents',
      { schema: { params }, exposeHeadRoute: false },
      async (request, reply) => {
        streams.subscribe(reply, request.clientSession, 'frontend', new YiviError('SESSION_UNKNOWN'));
        return reply;
      },
    );

    frontend.post(
      '/session/:token/frontend/options',
      {
        schema: { params, body: frontendOptionsSchema, response: { 200: sessionOptionsSchema } },
        config: { badInput: 'MALFORMED_INPUT' },
      },
      async (request, reply) => {
        const body = request.body as { pairingMethod?: '' | 'none' | 'pin' };
        const options = store.setPairing(request.clientSession, body.pairingMethod ?? '');
        return reply.header('content-type', YIVI_JSON).send(options);
      },
    );

    frontend.post('/session/:token/frontend/pairingcompleted', { schema: { params } }, async (request, reply) => {
      store.pairingCompleted(request.clientSession);
      return reply.code(204).send();
    });
  });

  function clientRequest(session: Session) {
    return walletRequest(session.request, session.nonce, CLIENT_PROTOCOL_VERSION, settings.devMode);
  }
}
