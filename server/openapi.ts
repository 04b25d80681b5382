import type { FastifyInstance, FastifySchema } from 'fastify';
import { generatePkgKeys } from 'postguard-ts/keys';
import { buildApp } from './app.js';
import type { ApiKeyStore } from './db.js';
import { memoryBucketStore } from './ratelimit/index.js';

/**
 * The PKG's HTTP contract as an OpenAPI 3.1 document, generated from the JSON Schemas on its Fastify
 * routes (the schemas Fastify validates requests and serialises answers with, so the document cannot
 * say other than the server does). A generator of our own rather than @fastify/swagger: ours is some
 * sixty lines over Fastify's `onRoute` hook and needs no plugin in the server (which would also have
 * to be registered before every route, in production, for a document only the repository needs); our
 * route schemas are already JSON Schema, which OpenAPI 3.1 takes as it is.
 * docs/openapi.json is this document (checked current by server/openapi.test.ts; written by
 * `npx tsx scripts/openapi.ts`, which refuses a breaking change to /v2: server/openapi-diff.ts).
 */

export const DEPRECATED_PREFIX = '/v2/irma/';

type JsonObject = Record<string, unknown>;

interface CapturedRoute {
  method: string;
  url: string;
  schema: FastifySchema | undefined;
}

/** Routes as the app registers them (OPTIONS preflights and HEAD twins left out). */
async function captureRoutes(app: FastifyInstance): Promise<CapturedRoute[]> {
  const routes: CapturedRoute[] = [];
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) {
      if (method === 'OPTIONS' || method === 'HEAD') continue;
      routes.push({ method: method.toLowerCase(), url: route.url, schema: route.schema });
    }
  });
  await app.ready();
  return routes;
}

/** An API-key store that is never asked: the document needs the routes, not answers. */
const NO_STORE: ApiKeyStore = {
  resolve: () => Promise.reject(new Error('not for answers')),
  lookup: () => Promise.reject(new Error('not for answers')),
  ping: () => Promise.resolve(),
  audit: () => undefined,
  settled: () => Promise.resolve(),
  close: () => Promise.resolve(),
};

const ERROR_ENVELOPE = {
  type: 'object',
  required: ['error', 'code', 'message'],
  additionalProperties: false,
  properties: {
    error: { const: true },
    code: { type: 'string', description: 'Stable error code (server/README.md, Errors).' },
    message: { type: 'string' },
  },
};

// Answers that are not JSON, by the route's last segment.
const TEXT_ANSWERS: Record<string, string> = {
  jwt: 'text/plain',
  statusevents: 'text/event-stream',
  health: 'text/plain',
  metrics: 'text/plain',
};

const BEARER_ROUTE = /\/(?:key|sign\/key|api-key\/validate)(?:\/|$)/;

function operation(route: CapturedRoute): JsonObject {
  const schema = (route.schema ?? {}) as Record<string, unknown>;
  const op: JsonObject = {};
  if (route.url.startsWith(DEPRECATED_PREFIX)) op['deprecated'] = true;
  const params = schema['params'] as { properties?: Record<string, unknown> } | undefined;
  if (params?.properties !== undefined) {
    op['parameters'] = Object.entries(params.properties).map(([name, s]) => ({
      name,
      in: 'path',
      required: true,
      schema: s,
    }));
  }
  if (BEARER_ROUTE.test(route.url)) op['security'] = [{ bearer: [] }];
  if (schema['body'] !== undefined) {
    op['requestBody'] = { required: true, content: { 'application/json': { schema: schema['body'] } } };
  }
  const responses: JsonObject = {};
  const declared = (schema['response'] ?? {}) as Record<string, unknown>;
  const last =
    route.url
      .split('/')
      .filter((s) => s !== '' && !s.startsWith(':'))
      .at(-1) ?? '';
  const type = TEXT_ANSWERS[last] ?? 'application/json';
  for (const [status, body] of Object.entries(declared)) {
    responses[status] = { description: 'OK', content: { [type]: { schema: body } } };
  }
  if (responses['200'] === undefined) responses['200'] = { description: 'OK', content: { [type]: {} } };
  responses['default'] = {
    description: 'An error: the envelope, with the status the code has',
    content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelope' } } },
  };
  op['responses'] = responses;
  return op;
}

/** The OpenAPI 3.1 document of the PKG's routes, as a PKG with a database serves them. */
export async function openApiDocument(): Promise<JsonObject> {
  const app = buildApp({
    keys: generatePkgKeys(),
    identityServer: { url: 'http://127.0.0.1:9' },
    apiKeys: NO_STORE,
    rateLimit: {
      settings: {
        perSecond: 1,
        burst: 1,
        sensitivePerSecond: 1,
        sensitiveBurst: 1,
        disabled: true,
        trustForwardedFor: false,
      },
      store: memoryBucketStore(),
    },
    allowedOrigins: ['*'],
    processMetrics: false,
  });
  try {
    const routes = await captureRoutes(app);
    const paths: Record<string, JsonObject> = {};
    for (const route of [...routes].sort((a, b) => a.url.localeCompare(b.url) || a.method.localeCompare(b.method))) {
      const path = route.url.replace(/:(\w+)/g, '{$1}');
      (paths[path] ??= {})[route.method] = operation(route);
    }
    const document = {
      openapi: '3.1.0',
      info: {
        title: 'PostGuard PKG (postguard-ts)',
        version: '2',
        description:
          'Generated from the route schemas of @postguard-ts/pkg (server/openapi.ts). /v2/irma/* is the deprecated ' +
          'name of /v2/request/*, answered with Deprecation and Sunset headers.',
      },
      paths,
      components: {
        schemas: { ErrorEnvelope: ERROR_ENVELOPE },
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', description: 'A session result JWT, or an API key PG-…' },
        },
      },
    };
    // Plain data: route schemas are shared objects (both parameters routes have one), the document not.
    return JSON.parse(JSON.stringify(document)) as JsonObject;
  } finally {
    await app.close();
  }
}
