import { utf8 } from './bincode.js';
import { CAPSULE_BYTES, IV_BYTES, type Mode } from './header.js';
import type { Policy } from './policy.js';
import { SIGNATURE_BYTES } from './signatures.js';
import { GCM_TAG_BYTES } from './crypto/aes.js';
import { PREAMBLE_BYTES } from './frame.js';
import { SEGMENT_OVERHEAD } from './segments.js';

/**
 * Size arithmetic of the container, as small pure functions: what a sealer will write, computed
 * before anything is encapsulated or written, so an output that no reader would open (a header
 * over the 1 MiB cap, a header signature over ours) is refused up front. Each function mirrors one
 * encoder (bincode, fixint, little-endian): header.ts encodeHeader, policy.ts writePolicy,
 * signatures.ts encodeSignatureExt. size.test.ts checks them against the encoders.
 */

/** bincode(Policy): ts (8), attribute count (8), per attribute type (8 + bytes) and Option<value> (1 [+ 8 + bytes]). */
export function policySize(policy: Policy): number {
  let size = 16;
  for (const { t, v } of policy.con) size += 8 + utf8(t).length + 1 + (v === undefined ? 0 : 8 + utf8(v).length);
  return size;
}

/** bincode(Header) for these (hidden) recipient policies and this mode. */
export function headerSize(recipients: ReadonlyArray<readonly [string, Policy]>, mode: Mode): number {
  let size = 8; // recipient count
  for (const [id, policy] of recipients) size += 8 + utf8(id).length + policySize(policy) + CAPSULE_BYTES;
  size += 4 + IV_BYTES; // algorithm tag, IV
  size += mode.type === 'InMemory' ? 4 + 4 : 4 + 4 + 8 + 1 + (mode.sizeHint[1] === undefined ? 0 : 8);
  return size;
}

/** bincode(SignatureExt): the 96-byte signature, then the signer's policy. */
export const signatureExtSize = (signerPolicy: Policy): number => SIGNATURE_BYTES + policySize(signerPolicy);

/** Preamble, header, signature length and header signature. */
export const framingSize = (
  recipients: ReadonlyArray<readonly [string, Policy]>,
  mode: Mode,
  publicSigner: Policy,
): number => PREAMBLE_BYTES + headerSize(recipients, mode) + 4 + signatureExtSize(publicSigner);

/** AES-GCM over LE64 length ‖ message ‖ signature ‖ payload signer ‖ sender copy (payload.ts). */
export const memoryPayloadSize = (messageBytes: number, signer: Policy, sender: Policy): number =>
  8 + messageBytes + SIGNATURE_BYTES + policySize(signer) + policySize(sender) + GCM_TAG_BYTES;

/**
 * The segments of a stream (segments.ts): the regions hold the signer block (BE32 and both
 * policies) then the message; every full region is a segment, and what is left (possibly nothing)
 * the final one; each carries a signature and a tag.
 */
export function streamPayloadSize(messageBytes: number, segmentSize: number, signer: Policy, sender: Policy): number {
  const regions = 4 + policySize(signer) + policySize(sender) + messageBytes;
  const segments = Math.floor(regions / segmentSize) + 1;
  return regions + segments * SEGMENT_OVERHEAD;
}
