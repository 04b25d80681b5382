import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { PublishedKeyEntry } from '../keyset.js';

/**
 * GET /v2/parameters (the KEM master public key) and GET /v2/sign/parameters (the IBS verifying key):
 * `{"formatVersion": 0, "publicKey": "<base64>", "keys": [...]}`: `publicKey` is the primary of the key
 * set, as pg-pkg answers (what pg-js and pg-wasm read), and `keys` the whole set, secrets left out
 * (server/keyset.ts: id, publicKey, status, notBefore, notAfter), so the ETag changes with the set. Computed once, with a strong ETag, Last-Modified
 * (the key file's modification time) and `Cache-Control: public, no-cache`, so caches keep the key
 * and revalidate it cheaply. Conditional requests (server/README.md, Routes; with RFC 9110's precedence):
 * If-None-Match naming our tag (strong comparison; `*` is not a match, as in pg-pkg) → 304; without
 * If-None-Match, an If-Modified-Since at or after Last-Modified → 304.
 */

export interface ParametersOptions {
  mpk: string;
  vk: string;
  /** The key sets as published; absent: a body without `keys` (pg-pkg's). */
  ibeKeys?: PublishedKeyEntry[];
  ibsKeys?: PublishedKeyEntry[];
  mpkModified: Date;
  vkModified: Date;
}

export interface PublishedKey {
  body: string;
  etag: string;
  lastModified: string;
  /** Last-Modified in whole seconds, for If-Modified-Since. */
  modifiedSeconds: number;
}

export function publishKey(publicKey: string, modified: Date, keys?: PublishedKeyEntry[]): PublishedKey {
  const body = JSON.stringify(
    keys === undefined ? { formatVersion: 0, publicKey } : { formatVersion: 0, publicKey, keys },
  );
  const digest = createHash('sha256').update(body).digest('base64url').slice(0, 22);
  const modifiedSeconds = Math.floor(modified.getTime() / 1000);
  return {
    body,
    etag: `"${digest}"`,
    lastModified: new Date(modifiedSeconds * 1000).toUTCString(),
    modifiedSeconds,
  };
}

/** Whether the client's cached copy is current. */
export function notModified(
  key: PublishedKey,
  ifNoneMatch: string | undefined,
  ifModifiedSince: string | undefined,
): boolean {
  if (ifNoneMatch !== undefined) {
    // Strong comparison: a weak tag W/"…" never matches, and neither does "*".
    return ifNoneMatch.split(',').some((tag) => tag.trim() === key.etag);
  }
  if (ifModifiedSince !== undefined) {
    const since = Date.parse(ifModifiedSince);
    return !Number.isNaN(since) && key.modifiedSeconds <= Math.floor(since / 1000);
  }
  return false;
}

const parametersSchema = {
  response: {
    200: {
      type: 'object',
      required: ['formatVersion', 'publicKey'],
      additionalProperties: false,
      properties: {
        formatVersion: { type: 'integer' },
        publicKey: { type: 'string' },
        keys: {
          type: 'array',
          items: {
            type: 'object',
            required: ['id', 'publicKey', 'status', 'notBefore', 'notAfter'],
            additionalProperties: false,
            properties: {
              id: { type: 'string' },
              publicKey: { type: 'string' },
              status: { type: 'string', enum: ['primary', 'decrypt-only', 'retired'] },
              notBefore: { type: ['integer', 'null'] },
              notAfter: { type: ['integer', 'null'] },
            },
          },
        },
      },
    },
  },
} as const;

function serve(key: PublishedKey) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    reply
      .header('etag', key.etag)
      .header('last-modified', key.lastModified)
      .header('cache-control', 'public, no-cache');
    if (notModified(key, request.headers['if-none-match'], request.headers['if-modified-since'])) {
      return reply.code(304).send();
    }
    return reply.type('application/json; charset=utf-8').send(key.body);
  };
}

export async function parametersRoutes(app: FastifyInstance, options: ParametersOptions): Promise<void> {
  const route = { schema: parametersSchema, exposeHeadRoute: true };
  app.get('/v2/parameters', route, serve(publishKey(options.mpk, options.mpkModified, options.ibeKeys)));
  app.get('/v2/sign/parameters', route, serve(publishKey(options.vk, options.vkModified, options.ibsKeys)));
}
