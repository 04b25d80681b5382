import { aesGcmOpen, aesGcmSealPieces } from '#aes';
import { GCM_TAG_BYTES, type AesKey } from './crypto/aes.js';
import type { GgVerifyingKey } from './crypto/gg.js';
import type { Forked, SegmentHasher } from './crypto/segment-hasher.js';
import { ErrorCode, FormatError, invalidPolicy, malformed, tampered } from './errors.js';
import { decodeSignerBlock, encodeSignerBlock, senderBound } from './payload.js';
import type { Policy } from './policy.js';
import {
  SIGNATURE_BYTES,
  SignatureVerifier,
  startSegmentSignature,
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
 * Both directions accept input in chunks of any size. The transcript absorbs segments strictly
 * in order (segment-hasher.ts, possibly on another thread); AES-GCM, signing and verifying run
 * beside it, so the caller keeps several segments in flight.
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

/** One segment's output: its bytes in one piece, or in several to be written in order. */
export type SegmentOutput = Uint8Array | readonly Uint8Array[];

/** Segments yield promises in order; the caller awaits them in that order. */
export interface Segmenter {
  push(chunk: Uint8Array): Promise<SegmentOutput>[];
  finish(): Promise<SegmentOutput>[];
}

/** Swallows a rejection that a later `await` of the same promise will report. */
const quiet = <T>(p: Promise<T>): Promise<T> => {
  p.catch(() => undefined);
  return p;
};

export interface SegmentSealContext {
  readonly iv: Uint8Array;
  readonly key: AesKey;
  /** The transcript after the header bytes, continued over the segments. */
  readonly hasher: SegmentHasher;
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
  /** Regions back from the hashing thread and already encrypted, ready for reuse. */
  private readonly spares: Uint8Array[] = [];

  constructor(
    private readonly ctx: SegmentSealContext,
    private readonly segmentSize: number,
  ) {
    const block = encodeSignerBlock(ctx.signer.policy, ctx.sender);
    const prefixLength = block.length;
    if (prefixLength > segmentSize) throw invalidPolicy('the signing policies do not fit in a segment');
    this.region = this.freshRegion();
    this.region.set(block, 0);
    this.fill = prefixLength;
    this.messageStart = prefixLength;
  }

  push(chunk: Uint8Array): Promise<SegmentOutput>[] {
    const out: Promise<SegmentOutput>[] = [];
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

  finish(): Promise<SegmentOutput>[] {
    return [this.seal(true)];
  }

  private freshRegion(): Uint8Array {
    return new Uint8Array(this.segmentSize + SIGNATURE_BYTES);
  }

  private seal(final: boolean): Promise<SegmentOutput> {
    if (this.counter === MAX_COUNTER && !final) {
      throw new FormatError(ErrorCode.TOO_LARGE, 'stream exceeds the 2^32 segments the format can count');
    }
    const { hasher, signer, key, iv } = this.ctx;
    const { fill, counter } = this;
    const signature = startSegmentSignature(signer, counter, final);
    const encrypt = ({ buffer, digests }: Forked) => {
      buffer.set(signature.finish(digests[0]!), fill);
      const sealed = aesGcmSealPieces(
        key,
        segmentNonce(iv, counter, final),
        buffer.subarray(0, fill + SIGNATURE_BYTES),
      );
      // AES-GCM has read its input: a buffer back from the hashing thread can be the next region.
      if (buffer !== this.region && buffer.length === this.region.length) this.spares.push(buffer);
      return sealed;
    };
    const forked = hasher.absorbAndFork(this.region, this.messageStart, fill, [signature.tail]);
    const sealed = forked instanceof Promise ? forked.then(encrypt) : encrypt(forked);
    this.counter++;
    this.fill = 0;
    this.messageStart = 0;
    // Answered at once, the region was encrypted already (AES-GCM reads its input when called) and
    // is free again; one on the hashing thread, or waiting for its digest, is not: take another.
    if (forked instanceof Promise && !final) {
      this.region = this.spares.pop() ?? this.freshRegion();
    }
    return quiet(sealed);
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
  /** The transcript after the header bytes, continued over the segments. */
  readonly hasher: SegmentHasher;
  readonly vk: GgVerifyingKey;
  /** The verified header signer, to decide `private` in the result. */
  readonly publicPolicy: Policy;
}

/**
 * Opening bytes already authenticated in full by an earlier pass over the very same bytes (an
 * immutable Blob read twice by the service worker): each segment is still decrypted and its tag
 * checked at its position, but no transcript is hashed and no signature checked; the earlier
 * pass's verdict is the result.
 */
export interface SegmentReopenContext {
  readonly iv: Uint8Array;
  readonly key: AesKey;
  readonly verified: VerificationResult;
  /** The segment the bytes given start with (a reading that resumes after plaintext it kept); 0 by default. */
  readonly firstSegment?: number;
}

export class SegmentOpener implements Segmenter {
  private readonly wireSegment: number;
  private readonly buffer: Uint8Array;
  private fill = 0;
  private counter = 0;
  /** Resolves when every segment handed out so far has gone to the transcript (in order). */
  private absorbed: Promise<void> = Promise.resolve();
  /** Resolves when every segment handed out so far has been verified. */
  private verified: Promise<void> = Promise.resolve();
  private verifier: SignatureVerifier | undefined;
  private bound = false;
  private done: VerificationResult | undefined;
  private prefix: number | undefined;

  constructor(
    private readonly ctx: SegmentOpenContext | SegmentReopenContext,
    segmentSize: number,
  ) {
    this.wireSegment = segmentSize + SEGMENT_OVERHEAD;
    this.buffer = new Uint8Array(this.wireSegment);
    if ('verified' in ctx) this.counter = ctx.firstSegment ?? 0;
  }

  /** The sender identity, once the final segment has verified. */
  get result(): VerificationResult | undefined {
    return this.done;
  }

  /**
   * Segment 0's signer block length (BE32 and policies), once segment 0 has decrypted: with the
   * ciphertext's size it gives the message's exact length (segment-map.ts messageBytes).
   */
  get prefixBytes(): number | undefined {
    return this.prefix;
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
    const ctx = this.ctx;
    const decrypted = quiet(aesGcmOpen(ctx.key, segmentNonce(ctx.iv, counter, final), sealed));
    if ('verified' in ctx) return this.reopen(decrypted, counter, final, ctx.verified);
    // The transcript takes each segment once it is decrypted and the one before has gone in, without
    // waiting for that one's verdict: the hashing of one overlaps the decryption of the next.
    const forked = this.absorbed.then(async () => {
      const plain = await decrypted;
      if (plain === undefined) {
        throw tampered(
          final
            ? 'the final segment does not authenticate (the ciphertext was modified or truncated)'
            : `segment ${counter} does not authenticate (the ciphertext was modified, reordered or truncated)`,
        );
      }
      return this.absorb(ctx, plain, counter, final);
    });
    this.absorbed = quiet(forked.then(() => undefined));
    const message = this.verified.then(async () => {
      const { hashed, start, end, check } = await forked;
      const { buffer, digests } = await hashed;
      check(digests);
      if (final) this.done = verificationResult(ctx.publicPolicy, this.verifier!.policy, this.bound);
      return buffer.subarray(start, end);
    });
    this.verified = quiet(message.then(() => undefined));
    return quiet(message);
  }

  /** A segment of bytes authenticated before: its tag checked, its message bytes handed on in order. */
  private reopen(
    decrypted: Promise<Uint8Array | undefined>,
    counter: number,
    final: boolean,
    verified: VerificationResult,
  ): Promise<Uint8Array> {
    const message = this.verified.then(async () => {
      const plain = await decrypted;
      if (plain === undefined || plain.length < SIGNATURE_BYTES) {
        throw tampered(`segment ${counter} does not authenticate on the second reading (the bytes changed)`);
      }
      const end = plain.length - SIGNATURE_BYTES;
      let start = 0;
      if (counter === 0) {
        start = decodeSignerBlock(plain.subarray(0, end)).length;
        this.prefix = start;
      }
      if (final) this.done = verified;
      return plain.subarray(start, end);
    });
    this.verified = quiet(message.then(() => undefined));
    return quiet(message);
  }

  /** Hands a decrypted segment's message bytes to the transcript, with the tails its signature needs. */
  private absorb(ctx: SegmentOpenContext, plain: Uint8Array, counter: number, final: boolean) {
    if (plain.length < SIGNATURE_BYTES) throw malformed(`segment ${counter} is shorter than a signature`);
    const end = plain.length - SIGNATURE_BYTES;
    let start = 0;
    if (counter === 0) {
      const { signer, senderCopy, length } = decodeSignerBlock(plain.subarray(0, end));
      this.bound = senderBound(senderCopy, ctx.publicPolicy);
      this.verifier = new SignatureVerifier(ctx.vk, signer);
      start = length;
      this.prefix = length;
    }
    // A copy: the segment's buffer may move to the hashing thread.
    const signature = plain.slice(end);
    const { tails, check } = this.verifier!.segmentCheck(signature, counter, final);
    const hashed = quiet(Promise.resolve(ctx.hasher.absorbAndFork(plain, start, end, tails)));
    return { hashed, start, end, check };
  }
}
