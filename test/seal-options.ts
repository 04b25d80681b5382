import type { Policy } from '../lib/index.js';
import { extractSigningKey, generateKemKeys, generateSigningKeys } from '../lib/keys.js';

/**
 * The seal options the input tests break one part at a time (lib/seal-input.test.ts in process,
 * worker/client-input.test.ts through the worker client): two recipients' policies, fresh master
 * keys, alice's signing key, a short plaintext, and getters that throw.
 */

export const EMAIL = 'pbdf.sidn-pbdf.email.email';
export const bob: Policy = { ts: 1_700_000_000, con: [{ t: EMAIL, v: 'bob@example.com' }] };
export const alice: Policy = { ts: 1_700_000_000, con: [{ t: EMAIL, v: 'alice@example.com' }] };
export const kem = generateKemKeys();
const ibs = generateSigningKeys();
export const pubSignKey = { key: extractSigningKey(ibs.sk, alice), policy: alice };
export const plain = new TextEncoder().encode('hello');

/** What {@link throwing}'s getters throw unless told otherwise. */
export const boom = new Error('x');

/** `target` with `key` replaced by a getter that throws `thrown`. */
export function throwing<T extends object>(target: T, key: string, thrown: unknown = boom): T {
  Object.defineProperty(target, key, {
    enumerable: true,
    get() {
      throw thrown;
    },
  });
  return target;
}
