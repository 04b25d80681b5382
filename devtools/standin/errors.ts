import type { FastifyReply } from 'fastify';
import type { RemoteError } from './protocol.js';

/**
 * Yivi's error catalogue (the subset a disclosure-only server can produce), with the exact
 * type names, HTTP statuses and descriptions irmago sends.
 */
export const YIVI_ERRORS = {
  SESSION_UNKNOWN: { status: 400, description: 'Unknown or expired session' },
  INVALID_REQUEST: { status: 400, description: 'Invalid HTTP request' },
  MALFORMED_INPUT: { status: 400, description: 'Input could not be parsed' },
  PROTOCOL_VERSION: { status: 400, description: 'Protocol version negotiation failed' },
  /** Requestor side: unknown pre-shared token. */
  UNAUTHORIZED: { status: 403, description: 'You are not authorized to issue or verify this attribute' },
  UNEXPECTED_REQUEST: { status: 403, description: 'Unexpected request in this state' },
  PAIRING_REQUIRED: { status: 403, description: 'Pairing is required first' },
  UNKNOWN_PUBLIC_KEY: { status: 403, description: 'Attributes were not valid against a known public key' },
  EXCEPTION: { status: 500, description: 'Encountered unexpected problem' },
  INTERNAL_ERROR: { status: 500, description: 'Internal server error' },
  UNSUPPORTED: { status: 501, description: 'Unsupported by this server' },
} as const;

export type YiviErrorType = keyof typeof YIVI_ERRORS | 'CLIENT_UNAUTHORIZED';

/** Client/frontend side uses the same type name with another description. */
const CLIENT_UNAUTHORIZED = { status: 403, description: 'You are not authorized to access the session' };

export class YiviError extends Error {
  readonly type: string;
  readonly status: number;
  readonly description: string | undefined;
  readonly detail: string;

  constructor(type: YiviErrorType, detail = '') {
    const entry = type === 'CLIENT_UNAUTHORIZED' ? CLIENT_UNAUTHORIZED : YIVI_ERRORS[type];
    super(detail === '' ? entry.description : `${entry.description}: ${detail}`);
    this.name = 'YiviError';
    this.type = type === 'CLIENT_UNAUTHORIZED' ? 'UNAUTHORIZED' : type;
    this.status = entry.status;
    this.description = entry.description;
    this.detail = detail;
  }

  /** The body irmago writes: empty fields are left out, as Go's omitempty does. */
  toJSON(): RemoteError {
    const body: RemoteError = { status: this.status, error: this.type };
    if (this.description !== undefined) body.description = this.description;
    if (this.detail !== '') body.message = this.detail;
    return body;
  }
}

/** The content type of irmago's JSON (Go's WriteJson; note the charset spelling). */
export const YIVI_JSON = 'application/json; charset=UTF-8';

export function sendYiviError(reply: FastifyReply, error: YiviError | RemoteError): FastifyReply {
  const body = error instanceof YiviError ? error.toJSON() : error;
  return reply.code(body.status).header('content-type', YIVI_JSON).send(JSON.stringify(body));
}
