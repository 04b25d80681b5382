import { aesGcmOpen, aesGcmSeal } from '#aes';
import { GCM_TAG_BYTES, type AesKey } from './crypto/aes.js';
import type { GgVerifyingKey } from './crypto/gg.js';
import type { Xof } from './crypto/xof.js';
import { ErrorCode, FormatError, invalidPolicy, malformed, tampered } from './errors.js';
import { decodeSignerBlock, encodeSignerBlock, senderBound } from './payload.js';
import type { Policy } from './policy.js';
import {
  SIGNATURE_BYTES,
  SignatureVerifier,
  signSegment,
  verificationResult,
  type Signer,
  type VerificationResult,
} from './signatures.js';

/**
 * STREAM segmentation. The plaintext T = BE32(len P) ‖ P ‖ message (P = the payload signer's
 * policy) is cut into data regions of `segmentSize` bytes; a region is sealed as non-final as
 * soon as it is full, and whatever remains at the end (possibly nothing) is the final segment.
 * Each segment is AES-GCM(region ‖ signature) under the nonce IV[0..7] ‖ BE32(counter) ‖ flag.
 *
 * Both directions accept input in chunks of any size. Hashing and signing (sealer) or
 * verifying (opener) happen strictly in order; AES-GCM runs concurrently, so the caller can
 * keep several segments in flight.
 */

const NONCE_PREFIX_BYTES = 7;
/** Signature and tag that every segment carries beyond its data region. */
export const SEGMENT_OVERHEAD = SIGNATURE_BYTES + GCM_TAG_BYTES;

function segmentNonce(iv: Uint8Array, counter: number, final: boolean): Uint8Array {
  const nonce = new Uint8Array(12);
  nonce.set(iv.subarray(0, NONCE_PREFIX_BYTES));
  new DataView(nonce.buffer).setUint32(NONCE_PREFIX_BYTES, counter);
  nonce[11] = final ? 1 : 0;
  return nonce;
}

/** The counter is a u32 and the reference refuses to wrap it. */
const MAX_COUNTER = 0xffff_ffff;

/** Segments yield promises in order; the caller awaits them in that order. */
export interface Segmenter {
  push(chunk: Uint8Array): Promise<Uint8Array>[];
  finish(): Promise<Uint8Array>[];
}

/** Swallows a rejection that a later `await` of the same promise will report. */
const quiet = <T>(p: Promise<T>): Promise<T> => {
  p.catch(() => undefined);
  return p;
};

export interface SegmentSealContext {
  readonly iv: Uint8Array;
  readonly key: AesKey;
  readonly transcript: Xof;
  readonly signer: Signer;
  /** The public sender, sealed into segment 0's signer block (payload.ts). */
  readonly sender: Policy;
}

export class SegmentSealer implements Segmenter {
  private region: Uint8Array;
  private fill: number;
  /** Where message bytes start in the current region (after the policy prefix in segment 0). */
  private messageStart: number;
  private counter = 0;

  constructor(
    private readonly ctx: SegmentSealContext,
    private readonly segmentSize: number,
  ) {
    const block = encodeSignerBlock(ctx.signer.policy, ctx.sender);
    const prefixLength = block.length;
    if (prefixLength > segmentSize) throw invalidPolicy('the signing policies do not fit in a segment');
    this.region = new Uint8Array(segmentSize + SIGNATURE_BYTES);
    this.region.set(block, 0);
    this.fill = prefixLength;
    this.messageStart = prefixLength;
  }

  push(chunk: Uint8Array): Promise<Uint8Array>[] {
    const out: Promise<Uint8Array>[] = [];
    let offset = 0;
    while (offset < chunk.length) {
      const take = Math.min(this.segmentSize - this.fill, chunk.length - offset);
      this.region.set(chunk.subarray(offset, offset + take), this.fill);
      this.fill += take;
      offset += take;
      if (this.fill === this.segmentSize) out.push(this.seal(false));
    }
    return out;
  }

  finish(): Promise<Uint8Array>[] {
    return [this.seal(true)];
  }

  private seal(final: boolean): Promise<Uint8Array> {
    if (this.counter === MAX_COUNTER && !final) {
      throw new FormatError(ErrorCode.TOO_LARGE, 'stream exceeds the 2^32 segments the format can count');
    }
    const { transcript, signer, key, iv } = this.ctx;
    transcript.update(this.region.subarray(this.messageStart, this.fill));
    const signature = signSegment(signer, transcript, this.counter, final);
    this.region.set(signature, this.fill);
    const plaintext = this.region.subarray(0, this.fill + SIGNATURE_BYTES);
    // WebCrypto copies its input when called, so the region can be refilled right away.
    const sealed = quiet(aesGcmSeal(key, segmentNonce(iv, this.counter, final), plaintext));
    this.counter++;
    this.fill = 0;
    this.messageStart = 0;
    return sealed;
  }
}

/**
 * Opens segment `counter` on its own, for random access (a Range request in the service worker):
 * AES-GCM authenticates it under its position (counter and final flag are in the nonce), so a
 * segment moved, swapped or marked final elsewhere fails. Returns its region (the plaintext
 * without the signature), or throws TAMPERED. The sender's signature is NOT verified: it signs
 * the transcript of every earlier segment, which only SegmentOpener, reading in order, has.
 */
export async function openSegmentAlone(
  key: AesKey,
  iv: Uint8Array,
  counter: number,
  final: boolean,
  sealed: Uint8Array,
): Promise<Uint8Array> {
  if (!Number.isSafeInteger(counter) || counter < 0 || counter > MAX_COUNTER)
    throw malformed(`segment ${counter} cannot exist`);
  const plain =
    sealed.length < SEGMENT_OVERHEAD ? undefined : await aesGcmOpen(key, segmentNonce(iv, counter, final), sealed);
  if (plain === undefined) {
    throw tampered(
      `segment ${counter}${final ? ' (final)' : ''} does not authenticate (the ciphertext was modified or truncated)`,
    );
  }
  return plain.subarray(0, plain.length - SIGNATURE_BYTES);
}

export interface SegmentOpenContext {
  readonly iv: Uint8Array;
  readonly key: AesKey;
  /** SHAKE128 that has absorbed the header bytes. */
  readonly transcript: Xof;
  readonly vk: GgVerifyingKey;
  /** The verified header signer, to decide `private` in the result. */
  readonly publicPolicy: Policy;
}

export class SegmentOpener implements Segmenter {
  private readonly wireSegment: number;
  private readonly buffer: Uint8Array;
  private fill = 0;
  private counter = 0;
  /** Resolves when every segment handed out so far has been verified. */
  private verified: Promise<void> = Promise.resolve();
  private verifier: SignatureVerifier | undefined;
  private bound = false;
  private done: VerificationResult | undefined;

  constructor(
    private readonly ctx: SegmentOpenContext,
    segmentSize: number,
  ) {
    this.wireSegment = segmentSize + SEGMENT_OVERHEAD;
    this.buffer = new Uint8Array(this.wireSegment);
  }

  /** The sender identity, once the final segment has verified. */
  get result(): VerificationResult | undefined {
    return this.done;
  }

  push(chunk: Uint8Array): Promise<Uint8Array>[] {
    const out: Promise<Uint8Array>[] = [];
    let offset = 0;
    while (offset < chunk.length) {
      // Whole segments inside the chunk need no copy.
      if (this.fill === 0 && chunk.length - offset >= this.wireSegment) {
        out.push(this.open(chunk.subarray(offset, offset + this.wireSegment), false));
        offset += this.wireSegment;
        continue;
      }
      const take = Math.min(this.wireSegment - this.fill, chunk.length - offset);
      this.buffer.set(chunk.subarray(offset, offset + take), this.fill);
      this.fill += take;
      offset += take;
      if (this.fill === this.wireSegment) {
        // WebCrypto copies its input when called, so the buffer is free again at once.
        out.push(this.open(this.buffer, false));
        this.fill = 0;
      }
    }
    return out;
  }

  finish(): Promise<Uint8Array>[] {
    return [this.open(this.buffer.subarray(0, this.fill), true)];
  }

  private open(sealed: Uint8Array, final: boolean): Promise<Uint8Array> {
    if (this.done) throw malformed('data after the final segment');
    const counter = this.counter++;
    if (final && sealed.length < SEGMENT_OVERHEAD) {
      // Even an empty final segment carries a signature and a tag: the stream was cut.
      const error = new FormatError(ErrorCode.TRUNCATED, 'ciphertext stream ended before its final segment');
      return quiet(this.verified.then(() => Promise.reject(error)));
    }
    const decrypted = quiet(aesGcmOpen(this.ctx.key, segmentNonce(this.ctx.iv, counter, final), sealed));
    const message = this.verified.then(async () => {
      const plain = await decrypted;
      if (plain === undefined) {
        throw tampered(
          final
            ? 'the final segment does not authenticate (the ciphertext was modified or truncated)'
            : `segment ${counter} does not authenticate (the ciphertext was modified, reordered or truncated)`,
        );
      }
      return this.verify(plain, counter, final);
    });
    this.verified = quiet(message.then(() => undefined));
    return quiet(message);
  }

  private verify(plain: Uint8Array, counter: number, final: boolean): Uint8Array {
    if (plain.length < SIGNATURE_BYTES) throw malformed(`segment ${counter} is shorter than a signature`);
    const dataEnd = plain.length - SIGNATURE_BYTES;
    let start = 0;
    if (counter === 0) {
      const { signer, senderCopy, length } = decodeSignerBlock(plain.subarray(0, dataEnd));
      this.bound = senderBound(senderCopy, this.ctx.publicPolicy);
      this.verifier = new SignatureVerifier(this.ctx.vk, signer);
      start = length;
    }
    const message = plain.subarray(start, dataEnd);
    const { transcript } = this.ctx;
    transcript.update(message);
    this.verifier!.verifySegment(plain.subarray(dataEnd), transcript, counter, final);
    if (final) this.done = verificationResult(this.ctx.publicPolicy, this.verifier!.policy, this.bound);
    return message;
  }
}
