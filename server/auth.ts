import type { FastifyRequest } from 'fastify';
import { PkgError } from './errors.js';

/**
 * The two credentials the key routes take, both as `Authorization: Bearer <credential>`:
 * a session-result JWT, or an API key `PG-<key>` (the prefix decides, as pg-pkg's guard does).
 */
export type Credential = { kind: 'jwt'; jwt: string } | { kind: 'apiKey'; apiKey: string };

export const API_KEY_PREFIX = 'PG-';

// RFC 6750: the scheme is case-insensitive; the credential is one token68 word.
const BEARER = /^bearer +([\w\-.~+/]+=*) *$/i;

/** The bearer credential of a request; UNAUTHENTICATED when there is none. */
export function bearerCredential(request: FastifyRequest): Credential {
  const header = request.headers.authorization;
  const match = typeof header === 'string' ? BEARER.exec(header) : null;
  if (match === null) throw new PkgError('UNAUTHENTICATED');
  const value = match[1]!;
  return value.startsWith(API_KEY_PREFIX) ? { kind: 'apiKey', apiKey: value } : { kind: 'jwt', jwt: value };
}
