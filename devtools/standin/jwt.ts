import { CompactSign } from 'jose';
import type { KeyObject } from 'node:crypto';
import type { SessionResult } from './protocol.js';

/**
 * The session-result JWT exactly as irmago's ResultJwt builds it: header {"alg":"RS256","typ":"JWT"}
 * (no kid); the standard claims exp, iat, iss, sub (in golang-jwt's field order, no aud/nbf/jti)
 * followed by every field of the /result object. A new JWT is minted per call: iat is now, and
 * exp = iat + the request's validity.
 */

export const DEFAULT_JWT_ISSUER = 'irmaserver';

export interface ResultClaims extends SessionResult {
  exp: number;
  iat: number;
  iss?: string;
  sub: string;
}

export function resultClaims(result: SessionResult, issuer: string, validity: number, now: number): ResultClaims {
  const iat = Math.floor(now);
  const claims: Record<string, unknown> = { exp: iat + validity, iat };
  // irmago leaves iss out when the issuer is configured empty.
  if (issuer !== '') claims.iss = issuer;
  claims.sub = `${result.type}_result`;
  Object.assign(claims, result);
  return claims as unknown as ResultClaims;
}

export async function signResultJwt(claims: ResultClaims, key: KeyObject): Promise<string> {
  const payload = new TextEncoder().encode(JSON.stringify(claims));
  return new CompactSign(payload).setProtectedHeader({ alg: 'RS256', typ: 'JWT' }).sign(key);
}
