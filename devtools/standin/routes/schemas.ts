import type { FastifyRequest } from 'fastify';
import { PROOF_STATUSES } from 'postguard-ts/pkg';
import { YiviError } from '../errors.js';
import { SESSION_STATUSES } from '../protocol.js';

/**
 * Schemas and parsers shared by the route plugins. Response schemas double as the field order of
 * irmago's JSON (the serializer writes properties in schema order) and keep internal fields out.
 */

/** A JSON body parser whose failures are Yivi errors of the given type instead of Fastify's. */
export function jsonBodyParser(type: 'INVALID_REQUEST' | 'MALFORMED_INPUT') {
  return (_request: FastifyRequest, body: string | Buffer, done: (err: Error | null, body?: unknown) => void) => {
    try {
      done(null, JSON.parse(body.toString()));
    } catch (e) {
      done(new YiviError(type, (e as Error).message));
    }
  };
}

export const tokenParamsSchema = {
  type: 'object',
  required: ['token'],
  properties: { token: { type: 'string', maxLength: 100 } },
} as const;

const disclosedAttributeSchema = {
  type: 'object',
  required: ['rawvalue', 'value', 'id', 'status', 'issuancetime'],
  properties: {
    rawvalue: { type: ['string', 'null'] },
    value: { type: ['object', 'null'], additionalProperties: { type: 'string' } },
    id: { type: 'string' },
    status: { type: 'string', enum: ['PRESENT', 'EXTRA', 'NULL'] },
    issuancetime: { type: 'integer' },
  },
} as const;

export const remoteErrorSchema = {
  type: 'object',
  required: ['status', 'error'],
  properties: {
    status: { type: 'integer' },
    error: { type: 'string' },
    description: { type: 'string' },
    message: { type: 'string' },
  },
} as const;

export const resultSchema = {
  type: 'object',
  required: ['token', 'status', 'type'],
  properties: {
    token: { type: 'string' },
    status: { type: 'string', enum: [...SESSION_STATUSES] },
    type: { type: 'string' },
    proofStatus: { type: 'string', enum: [...PROOF_STATUSES] },
    disclosed: {
      type: 'array',
      items: { type: ['array', 'null'], items: disclosedAttributeSchema },
    },
    error: remoteErrorSchema,
  },
} as const;
