import { AuthenticationError, ErrorCode, InputError, isPostGuardError } from './errors.js';

/**
 * Opening a file when the PKG has several master keys (a key set, server/README.md "Rotating the
 * master keys"). A v3 header names no key, so a reader is given every candidate the PKG offers and
 * tries them in turn: a user key that is not the file's fails decapsulation's authentication at
 * once (WRONG_KEY), a verifying key that is not the file's fails the header signature
 * (BAD_SIGNATURE); both are a few group operations, never a read of the payload.
 */

/** One key of a PKG's key set: its id, as the PKG names it, and the key. */
export interface KeyCandidate {
  /** The key's id in the PKG's key set, as the PKG names it (ours: 16 hex characters of SHA-256 over the public key). */
  readonly id: string;
  /** The key, base64: a user secret key for unsealing, or a verifying key for the header. */
  readonly key: string;
  /**
   * A verifying key's status in the key set. A header that verifies only under a `retired` key is
   * refused with NO_MATCHING_KEY (and not as BAD_SIGNATURE), so the reader learns why.
   */
  readonly status?: 'primary' | 'decrypt-only' | 'retired';
}

/** Which of the candidates a file turned out to be under (on `VerificationResult.keyIds`). */
export interface KeyIds {
  /** The id of the PKG key whose user key opened the recipient's capsule: the key the file was sealed under. */
  userKey?: string;
  /** The id of the PKG verifying key the header signature verified under. */
  verifyingKey?: string;
}

/** A list of candidates, checked at the boundary: a non-empty array of `{ id, key }`. */
export function isCandidateList(value: unknown): value is readonly KeyCandidate[] {
  if (!Array.isArray(value)) return false;
  if (value.length === 0) throw new InputError(ErrorCode.INVALID_INPUT, 'the list of candidate keys is empty');
  for (const c of value as unknown[]) {
    const { id, key } = (typeof c === 'object' && c !== null ? c : {}) as Record<string, unknown>;
    if (typeof id !== 'string' || typeof key !== 'string')
      throw new InputError(ErrorCode.INVALID_INPUT, 'a candidate key is { id, key } with two strings');
  }
  return true;
}

/**
 * The first candidate that `attempt` accepts, in order. A candidate refused with `refusal` (the
 * code a wrong key of this kind gives: WRONG_KEY, BAD_SIGNATURE) makes way for the next; any other
 * error is the file's and ends the search. When every candidate was refused, that refusal, as one
 * key would have given it (a key for another identity is still the likeliest reason).
 */
export async function firstMatching<T>(
  candidates: readonly KeyCandidate[],
  refusal: ErrorCode,
  attempt: (key: string) => T | Promise<T>,
): Promise<{ id: string; value: T }> {
  let refused: unknown;
  for (const candidate of candidates) {
    try {
      return { id: candidate.id, value: await attempt(candidate.key) };
    } catch (error) {
      if (!isPostGuardError(error) || error.code !== refusal) throw error;
      refused = error;
    }
  }
  if (candidates.length === 1) throw refused;
  throw new AuthenticationError(
    refusal,
    `none of the ${candidates.length} keys of the PKG's key set opens this file (${(refused as Error).message})`,
    { cause: refused },
  );
}
