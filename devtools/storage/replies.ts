import type { FastifyReply } from 'fastify';

/**
 * Cryptify's error bodies, as its handlers produce them: plain text for 400/401/422/500/503,
 * JSON for the session-not-found 404 and for 413.
 */

export const GENERIC_INTERNAL_ERROR = 'an internal error occurred';
export const TOKEN_MISMATCH = 'Cryptify Token header does not match';
export const INCORRECT_RANGE = 'Incorrect Content-Range header';
export const DATA_NOT_COMPLETE = 'Data not complete';
export const REPLAY_DIFFERS = 'Idempotent retry: body differs from the original chunk';

export type SessionNotFoundReason = 'invalid_uuid' | 'expired_or_unknown' | 'file_missing';

export function sendText(reply: FastifyReply, status: number, text = ''): FastifyReply {
  return reply.code(status).type('text/plain; charset=utf-8').send(text);
}

export function sendSessionNotFound(reply: FastifyReply, uuid: string, reason: SessionNotFoundReason): FastifyReply {
  return reply.code(404).type('application/json').send({ error: 'upload_session_not_found', uuid, reason });
}

export interface TooLarge {
  error: string;
  limit: 'per_upload' | 'rolling_window';
  /** Per upload: the bytes before this chunk. Rolling window: the sender's usage, left out in strict mode. */
  used_bytes?: number;
  limit_bytes: number;
  /** RFC 3339, only for the rolling window, only when known, and not in strict mode. */
  resets_at?: string;
}

export function sendTooLarge(reply: FastifyReply, body: TooLarge): FastifyReply {
  return reply.code(413).type('application/json').send(body);
}
