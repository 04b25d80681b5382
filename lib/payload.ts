import { Reader, Writer } from './bincode.js';
import { AuthenticationError, ErrorCode, malformed } from './errors.js';
import { policiesEqual, readPolicy, writePolicy, type Policy } from './policy.js';
import { SIGNATURE_BYTES } from './signatures.js';

/**
 * What goes inside the AEAD, in one place: the in-memory payload and segment 0's signer block,
 * each with the copy of the public signing policy that current sealers (pg-core 0.6.4, upstream
 * #338/#347/#351) append. The header's signature and policy sit outside the AEAD, so without the
 * copy anyone holding a signing key of the same PKG could re-sign the same header bytes as
 * themselves; with it, the sender is bound to the encrypted content.
 *
 *   memory:    bincode(MessageAndSignature) ‖ bincode(public policy)
 *              = LE64(len m) ‖ m ‖ sig(96) ‖ bincode(payload signer policy) ‖ bincode(public policy)
 *   segment 0: BE32(L) ‖ bincode(payload signer policy) ‖ bincode(public policy) ‖ data…, L covering both
 *
 * 0.5.10 readers decode the policy they expect and ignore the trailing copy, so they still open
 * what we write. The stream placement is inferred (upstream's compatibility gate opens current
 * containers with the 0.5.10 reader, and no other place leaves the signed message intact).
 */

export function encodeMemoryPayload(
  message: Uint8Array,
  signature: Uint8Array,
  signer: Policy,
  sender: Policy,
): Uint8Array {
  const w = new Writer(8 + message.length + SIGNATURE_BYTES + 256);
  w.u64(message.length).bytes(message).bytes(signature);
  writePolicy(w, signer);
  writePolicy(w, sender);
  return w.finish();
}

export interface MemoryPayload {
  message: Uint8Array;
  signature: Uint8Array;
  signer: Policy;
  /** The public policy's copy, when a current sealer wrote one. */
  senderCopy: Policy | undefined;
}

export function decodeMemoryPayload(inner: Uint8Array): MemoryPayload {
  const r = new Reader(inner, 'payload');
  const message = r.take(r.length('message length'));
  const signature = r.take(SIGNATURE_BYTES);
  const signer = readPolicy(r);
  const senderCopy = r.remaining > 0 ? readPolicy(r) : undefined;
  return { message, signature, signer, senderCopy };
}

/** Segment 0's signer block: BE32(L) ‖ bincode(signer) ‖ bincode(sender), L covering both policies. */
export function encodeSignerBlock(signer: Policy, sender: Policy): Uint8Array {
  const policies = new Writer();
  writePolicy(policies, signer);
  writePolicy(policies, sender);
  const body = policies.finish();
  const block = new Uint8Array(4 + body.length);
  new DataView(block.buffer).setUint32(0, body.length);
  block.set(body, 4);
  return block;
}

export function decodeSignerBlock(data: Uint8Array): {
  signer: Policy;
  senderCopy: Policy | undefined;
  length: number;
} {
  if (data.length < 4) throw malformed('segment 0 is too short for the signer policy length');
  const length = new DataView(data.buffer, data.byteOffset, 4).getUint32(0);
  if (length > data.length - 4) throw malformed('the signer policy does not fit in segment 0');
  const r = new Reader(data.subarray(4, 4 + length), 'signer policy');
  const signer = readPolicy(r);
  const senderCopy = r.remaining > 0 ? readPolicy(r) : undefined;
  return { signer, senderCopy, length: 4 + length };
}

/**
 * Whether the header's sender is bound by the copy inside the encryption: true when the copy
 * equals it, false when there is no copy (an older sealer). A copy that differs means the header
 * was re-signed by someone else: SENDER_MISMATCH.
 */
export function senderBound(copy: Policy | undefined, headerSender: Policy): boolean {
  if (copy === undefined) return false;
  if (!policiesEqual(copy, headerSender)) {
    throw new AuthenticationError(
      ErrorCode.SENDER_MISMATCH,
      'the sender named in the header is not the one sealed inside the encryption (the header was re-signed)',
    );
  }
  return true;
}
