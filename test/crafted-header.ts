import { sha3_256 } from '@noble/hashes/sha3.js';
import { fromBase64, toBase64 } from '../lib/base64.js';
import { ggKeygen } from '../lib/crypto/gg.js';
import { inlineSegmentHasher } from '../lib/crypto/segment-hasher.js';
import { encodeFrame, splitFrame, MAX_SIGNATURE_BYTES } from '../lib/frame.js';
import { MAX_SEGMENT_SIZE } from '../lib/header.js';
import { rawPolicyDigest } from '../lib/identity.js';
import { seal, type Policy, type SealOptions } from '../lib/index.js';
import { pumpSegments } from '../lib/pump.js';
import { prepareSeal } from '../lib/seal.js';
import { SegmentSealer } from '../lib/segments.js';
import { encodeSignatureExt } from '../lib/signatures.js';
import { collector, chunkedSource } from './streams.js';

/**
 * Ciphertexts a stranger can make to hang a reader that canonicalises the header's (unauthenticated)
 * signer policy in more than linear time: the sender's e-mail is "a", a run of spaces that fills
 * the header signature to just under its 1 MiB cap, and "a". Nothing trims it (its ends are not
 * whitespace) and it is lower case, so it is its own canonical spelling and a PKG's key for it
 * signs it; the key is derived here without canonicalising, so making the file costs what sealing
 * costs whatever the trim does. The benign twin has as many letters in place of the spaces.
 */

export const EMAIL = 'pbdf.sidn-pbdf.email.email';

/** The value's length: the header signature (96 bytes, then the policy in bincode) stays under 1 MiB. */
export const CRAFTED_VALUE_LENGTH = MAX_SIGNATURE_BYTES - 1024;

export const craftedEmail = (length = CRAFTED_VALUE_LENGTH): string => `a${' '.repeat(length - 2)}a`;
export const benignEmail = (length = CRAFTED_VALUE_LENGTH): string => 'a'.repeat(length);

/** The signing key for `policy` as written (sk: the PKG's base64 IBS secret key). */
export const rawSigningKey = (sk: string, policy: Policy): string =>
  toBase64(ggKeygen(fromBase64(sk, 'sk', 32), sha3_256(rawPolicyDigest(policy))));

export interface SealedPair {
  signer: Policy;
  /** The signer's key (base64), e.g. for a proof of possession. */
  key: string;
  memory: Uint8Array;
  stream: Uint8Array;
}

/**
 * An in-memory and a streaming ciphertext for `recipient` (under the id `recipientId`), signed by
 * `email` under the given master keys.
 */
export async function sealedBy(
  keys: { mpk: string; sk: string },
  email: string,
  recipient: Policy,
  plain: Uint8Array,
  recipientId = 'bob',
): Promise<SealedPair> {
  const signer: Policy = { ts: recipient.ts, con: [{ t: EMAIL, v: email }] };
  const key = rawSigningKey(keys.sk, signer);
  const options: SealOptions = { policy: { [recipientId]: recipient }, pubSignKey: { key, policy: signer } };
  const memory = await seal(keys.mpk, options, plain);
  // Segment 0 opens with the signer and the sender's copy, 2 MiB here: sealStream's 256 KiB
  // segments cannot hold them, so the stream is sealed as a key holder may, in 4 MiB segments.
  const mode = { type: 'Streaming', segmentSize: MAX_SEGMENT_SIZE, sizeHint: [0n, undefined] } as const;
  const ctx = await prepareSeal(keys.mpk, options, mode);
  const out = collector();
  const hasher = inlineSegmentHasher(ctx.transcript);
  const sealer = new SegmentSealer({ ...ctx, hasher }, MAX_SEGMENT_SIZE);
  await pumpSegments(chunkedSource(plain).getReader(), out.writable.getWriter(), ctx.frame, sealer);
  return { signer, key, memory, stream: out.bytes() };
}

/**
 * `ciphertext` with its header signature replaced by one that names `policy` (signature bytes
 * zero): what a reader meets when it must decide about a policy before checking any signature.
 */
export function withSignerPolicy(ciphertext: Uint8Array, policy: Policy): Uint8Array {
  const { header, payload } = splitFrame(ciphertext);
  const frame = encodeFrame(header, encodeSignatureExt(new Uint8Array(96), policy));
  const out = new Uint8Array(frame.length + payload.length);
  out.set(frame, 0);
  out.set(payload, frame.length);
  return out;
}
