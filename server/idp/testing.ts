import type { KeyObject } from 'node:crypto';
import { CompactSign } from 'jose';

/**
 * Helpers for tests that forge Yivi session result JWTs: the claims of a finished, valid
 * disclosure session and their signing with a test key. Test-only (a file named testing.ts is
 * left out of the build and of every package).
 */

/** What an e-mail attribute's disclosure looks like in a result JWT, with its translated value. */
export function emailDisclosed(id: string, email = 'a@example.org'): unknown[][] {
  return [
    [
      {
        rawvalue: email,
        value: { '': email, en: email, nl: email },
        id,
        status: 'PRESENT',
        issuancetime: 0,
      },
    ],
  ];
}

/**
 * The claims of a DONE, VALID disclosing session issued at `now` (expiring 300 s later), with
 * `disclosed` when given (no such claim when undefined), then `extra` added or overriding.
 */
export function disclosingClaims(
  now: number,
  disclosed?: unknown,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    exp: now + 300,
    iat: now,
    iss: 'irmaserver',
    sub: 'disclosing_result',
    token: 'AAAAAAAAAAAAAAAAAAAA',
    status: 'DONE',
    type: 'disclosing',
    proofStatus: 'VALID',
    ...(disclosed === undefined ? {} : { disclosed }),
    ...extra,
  };
}

/** A compact JWS of `payload` as it is (not JSON-encoded), signed with `key` under `header`. */
export function signPayload(
  payload: string,
  key: KeyObject,
  header: Record<string, unknown> = { alg: 'RS256', typ: 'JWT' },
): Promise<string> {
  return new CompactSign(new TextEncoder().encode(payload)).setProtectedHeader(header as { alg: string }).sign(key);
}

/** A compact JWS of `claims` in JSON, signed with `key` (RS256 unless `header` says otherwise). */
export function signClaims(claims: unknown, key: KeyObject, header?: Record<string, unknown>): Promise<string> {
  return signPayload(JSON.stringify(claims), key, header);
}
