import type { KeyIds } from './key-candidates.js';
import { Reader } from './bincode.js';
import { badSignature } from './errors.js';
import { GgBoundVerifier, ggSign, ggSignLater, type GgSigningKey, type GgVerifyingKey } from './crypto/gg.js';
import type { Xof } from './crypto/xof.js';
import { signingIdentityCandidates } from './identity.js';
import { encodePolicy, policiesEqual, policyToJs, readPolicy, type Policy } from './policy.js';

/**
 * What PostGuard signs, with which key, and how a verifier decides who the sender is.
 *
 * One running SHAKE128 transcript starts with the header bytes. The header signature (public
 * key) signs it as is. The payload signatures (private key if given, else public) sign the
 * transcript after it absorbed the message bytes; in streaming mode each segment signs a fork
 * with BE32(counter) ‖ final-flag appended, so counter and flag never enter later transcripts.
 */

/** Bytes of a GG signature, before the signer's policy that follows it on the wire. */
export const SIGNATURE_BYTES = 96;

export interface Signer {
  readonly key: GgSigningKey;
  readonly policy: Policy;
}

/** bincode(SignatureExt { sig, pol }). */
export function encodeSignatureExt(signature: Uint8Array, policy: Policy): Uint8Array {
  const pol = encodePolicy(policy);
  const out = new Uint8Array(SIGNATURE_BYTES + pol.length);
  out.set(signature, 0);
  out.set(pol, SIGNATURE_BYTES);
  return out;
}

/**
 * Splits the header signature field (what follows the header) into the signature and the signer's
 * policy, without verifying anything: the sender a file claims, for tools that only inspect it.
 */
export function decodeSignatureExt(bytes: Uint8Array): { signature: Uint8Array; policy: Policy } {
  const r = new Reader(bytes, 'header signature');
  const signature = r.take(SIGNATURE_BYTES);
  return { signature, policy: readPolicy(r) }; // trailing bytes are ignored, as the reference does
}

/** The per-segment suffix BE32(counter) ‖ flag, where flag 1 marks the final segment. */
export function segmentSuffix(counter: number, final: boolean): Uint8Array {
  const out = new Uint8Array(5);
  new DataView(out.buffer).setUint32(0, counter);
  out[4] = final ? 1 : 0;
  return out;
}

export const signTranscript = (signer: Signer, transcript: Xof): Uint8Array => ggSign(signer.key, transcript);

/**
 * Signs segment `counter` with its transcript hashed elsewhere (segment-hasher.ts): `tail` goes
 * after the fork of the transcript, `finish` takes the fork's digest.
 */
export const startSegmentSignature = (signer: Signer, counter: number, final: boolean) =>
  ggSignLater(signer.key, segmentSuffix(counter, final));

/**
 * A verifier bound to one claimed signer policy, as written in the file. Its identity is the
 * canonical one, or, for a policy written in another spelling, the raw spelling's (a key an older
 * PKG issued for it); once a signature verifies under one, that one is kept.
 */
export class SignatureVerifier {
  private bound: GgBoundVerifier[];

  constructor(
    vk: GgVerifyingKey,
    readonly policy: Policy,
  ) {
    this.bound = signingIdentityCandidates(policy).map((id) => new GgBoundVerifier(vk, id));
  }

  verify(signature: Uint8Array, transcript: Xof, what: string): void {
    for (const candidate of this.bound) {
      if (candidate.verify(signature, transcript)) {
        this.bound = [candidate];
        return;
      }
    }
    throw badSignature(`${what} does not verify`);
  }

  /**
   * The same check with the transcript hashed elsewhere: one tail per candidate identity to
   * append to the fork, and `check` with their digests, in that order (it throws BAD_SIGNATURE).
   */
  segmentCheck(
    signature: Uint8Array,
    counter: number,
    final: boolean,
  ): { tails: Uint8Array[]; check(digests: Uint8Array[]): void } {
    const what = `segment ${counter} signature`;
    const suffix = segmentSuffix(counter, final);
    // Fixed now: an earlier segment's check may narrow the candidates before this one's digests arrive.
    const candidates = this.bound;
    const tails = candidates.map((c) => c.tail(suffix, signature));
    if (tails.some((t) => t === undefined)) throw badSignature(`${what} does not verify`);
    return {
      tails: tails as Uint8Array[],
      check: (digests) => {
        const i = candidates.findIndex((c, at) => c.verifyDigest(signature, digests[at]!));
        if (i < 0) throw badSignature(`${what} does not verify`);
        this.bound = [candidates[i]!];
      },
    };
  }
}

/** Who sealed a file, once it has been opened and every signature verified. */
export interface VerificationResult {
  /**
   * The public sender, from the header signature. The content is signed by this identity only
   * when `contentSigner` is `'public'`; otherwise the header signature alone attests it.
   */
  public: Policy;
  /** The private sender (visible to recipients only), when the payload was signed under another policy. */
  private?: Policy;
  /**
   * Whose key signed the content: the `public` identity, or the `private` one. The format signs
   * the content with one key only, the private one when the sealer gave one, so with `'private'`
   * the public identity is a claim of the signed header that the content signature does not
   * cover (a co-recipient, who holds the file's key, can write new content under someone else's
   * header). Show it as such: docs/security.md.
   */
  contentSigner: 'public' | 'private';
  /**
   * True when the public sender was also sealed inside the encryption (current sealers), so it
   * cannot have been swapped by re-signing the header; false for files from older sealers
   * (pg-wasm 0.5.x, pg-js 1.x), whose public sender anyone with a signing key of the same PKG
   * could have replaced.
   */
  bound: boolean;
  /**
   * Which keys of the PKG's key set opened the file, when the unsealer was given candidates
   * (lib/key-candidates.ts) instead of one key; absent otherwise (pg-wasm's shape).
   */
  keyIds?: KeyIds;
}

/**
 * The sender identity as the reference reports it, plus `contentSigner` and `bound`: `public`
 * from the header signature; `private` only when the payload was signed under a different policy.
 */
export function verificationResult(publicPolicy: Policy, payloadPolicy: Policy, bound: boolean): VerificationResult {
  const samePolicy = policiesEqual(publicPolicy, payloadPolicy);
  const result: VerificationResult = {
    public: policyToJs(publicPolicy),
    contentSigner: samePolicy ? 'public' : 'private',
    bound,
  };
  if (!samePolicy) result.private = policyToJs(payloadPolicy);
  return result;
}
