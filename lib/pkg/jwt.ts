/**
 * Reading a session-result JWT's claims WITHOUT verifying it. The client only uses them to know
 * the session's status while polling and how long a JWT may be cached; the PKG verifies every
 * JWT it is shown, so a forged one gains nothing.
 */

/** Every status an identity session can have, in the order a session goes through them. */
export const SESSION_STATUSES = ['INITIALIZED', 'PAIRING', 'CONNECTED', 'DONE', 'CANCELLED', 'TIMEOUT'] as const;
/**
 * An identity session's status: INITIALIZED (waiting for a scan), PAIRING, CONNECTED (the app has
 * it), then one of the final DONE, CANCELLED or TIMEOUT.
 */
export type SessionStatus = (typeof SESSION_STATUSES)[number];

export const isSessionStatus = (value: unknown): value is SessionStatus =>
  typeof value === 'string' && (SESSION_STATUSES as readonly string[]).includes(value);

/** Whether a session with this status has ended (DONE, CANCELLED or TIMEOUT). */
export const isFinalStatus = (status: SessionStatus): boolean =>
  status === 'DONE' || status === 'CANCELLED' || status === 'TIMEOUT';

/**
 * Every proof status a finished Yivi session can report (irmago's `ProofStatus`); only VALID proves
 * what was asked. The PKG checks session results against this list and the stand-in reports from it.
 */
export const PROOF_STATUSES = [
  'VALID',
  'INVALID',
  'INVALID_TIMESTAMP',
  'UNMATCHED_REQUEST',
  'MISSING_ATTRIBUTES',
  'EXPIRED',
] as const;
/** A Yivi proof status: VALID, or why the disclosure proves nothing (INVALID, EXPIRED, …). */
export type ProofStatus = (typeof PROOF_STATUSES)[number];

export interface SessionClaims {
  status: SessionStatus;
  proofStatus?: string;
  /** Unix seconds. */
  exp?: number;
}

function base64UrlDecode(segment: string): Uint8Array | undefined {
  if (!/^[\w-]*$/.test(segment)) return undefined;
  const padded = segment.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (segment.length % 4)) % 4);
  try {
    return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
  } catch {
    return undefined;
  }
}

/** The claims that matter to the client, or undefined if `jwt` is not a compact JWS with them. */
export function readSessionClaims(jwt: string): SessionClaims | undefined {
  const parts = jwt.trim().split('.');
  if (parts.length !== 3) return undefined;
  const payload = base64UrlDecode(parts[1]!);
  if (payload === undefined) return undefined;
  let claims: unknown;
  try {
    claims = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(payload));
  } catch {
    return undefined;
  }
  if (typeof claims !== 'object' || claims === null) return undefined;
  const { status, proofStatus, exp } = claims as Record<string, unknown>;
  if (!isSessionStatus(status)) return undefined;
  const out: SessionClaims = { status };
  if (typeof proofStatus === 'string') out.proofStatus = proofStatus;
  if (typeof exp === 'number' && Number.isSafeInteger(exp)) out.exp = exp;
  return out;
}
