import { createShake128 } from '#shake';
import { utf8 } from './bincode.js';
import { ggSign, ggVerify } from './crypto/gg.js';
import { signingIdentityCandidates } from './identity.js';
import { signingKeyFromBase64, verifyingKeyFromBase64 } from './keys.js';
import { normalizePolicy } from './policy.js';
import type { SigningKeyInput } from './seal.js';

/**
 * Proof of possession of a signing key (pg-core 0.6.5, upstream #368): a sender proves to a
 * service (e.g. the storage it uploads to) that it holds the key for its identity by signing the
 * service's fresh challenge. The signature is made as a header signature is (GG over a fresh
 * SHAKE128 transcript, 96 bytes), over a domain-separated message, so a challenge proof can never
 * pass for a header signature nor the other way round, and the context (e.g. the upload id) is
 * length-framed, so ("ab", "c") never verifies as ("a", "bc").
 */

const DOMAIN = utf8('postguard/challenge/v1');

const be64 = (n: number): Uint8Array => {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, BigInt(n), false);
  return out;
};

function transcript(context: string, challenge: Uint8Array) {
  const ctx = utf8(context);
  return createShake128()
    .update(DOMAIN)
    .update(be64(ctx.length))
    .update(ctx)
    .update(be64(challenge.length))
    .update(challenge);
}

/**
 * Signs `challenge` for `context` with a signing key as the PKG issues it (the base64 key, or the
 * `{ key, policy }` pair). Returns the 96-byte signature.
 */
export function signChallenge(
  signingKey: string | SigningKeyInput,
  context: string,
  challenge: Uint8Array,
): Uint8Array {
  const encoded = typeof signingKey === 'string' ? signingKey : signingKey?.key;
  return ggSign(signingKeyFromBase64(encoded, 'signingKey'), transcript(context, challenge));
}

/**
 * True when `signature` proves possession of the key for `policy`'s identity (derived canonically,
 * then from the spelling as given) over `context` and `challenge`. Never throws: a malformed key,
 * policy or signature, or a policy with no attributes, is simply false.
 */
export function verifyChallenge(
  vk: string,
  policy: unknown,
  context: string,
  challenge: Uint8Array,
  signature: Uint8Array,
): boolean {
  try {
    const signer = normalizePolicy(policy, 'policy');
    if (signer.con.length === 0 || typeof context !== 'string' || !(challenge instanceof Uint8Array)) return false;
    const key = verifyingKeyFromBase64(vk, 'vk');
    const message = transcript(context, challenge);
    return signingIdentityCandidates(signer).some((id) => ggVerify(key, id, signature, message.clone()));
  } catch {
    return false;
  }
}
