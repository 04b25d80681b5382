import { loadShake128, segmentHasher } from '#shake';
import type { SegmentHasher } from './crypto/segment-hasher.js';
import { loadGgAcceleration } from './crypto/gg.js';
import { loadPairingAcceleration, multiDecaps, parseMkemCiphertext } from './crypto/cgwkv.js';
import { aesGcmOpen, importAesKey } from '#aes';
import { AES_KEY_BYTES, GCM_TAG_BYTES, type AesKey } from './crypto/aes.js';
import type { GgVerifyingKey } from './crypto/gg.js';
import type { Xof } from './crypto/xof.js';
import {
  AuthenticationError,
  ErrorCode,
  FormatError,
  InputError,
  PostGuardError,
  isPostGuardError,
  malformed,
  tampered,
} from './errors.js';
import { firstMatching, isCandidateList, type KeyCandidate, type KeyIds } from './key-candidates.js';
import { readFrame, splitFrame } from './frame.js';
import { checkedSegmentSize, decodeHeader, type Header } from './header.js';
import { StreamReader } from './io.js';
import { userSecretKeyFromBase64, verifyingKeyFromBase64, type PreparedUserSecretKey } from './keys.js';
import { policyToJs, type Policy } from './policy.js';
import { decodeMemoryPayload, senderBound } from './payload.js';
import { pullSegments } from './pull.js';
import { INLINE_IN_FLIGHT } from './crypto/segment-hasher.js';
import { messageBytes, segmentLayout, wireSpan } from './segment-map.js';
import { SegmentOpener } from './segments.js';
import {
  SIGNATURE_BYTES,
  SignatureVerifier,
  decodeSignatureExt,
  verificationResult,
  type VerificationResult,
} from './signatures.js';

/**
 * Opening ciphertexts. Both unsealers verify the header signature before they exist, so
 * `inspect_header()` and `public_identity()` only ever show authenticated data. Unlike
 * pg-wasm's, these objects are not consumed by a failed `unseal`: a wrong recipient id or key
 * can be retried.
 */

interface VerifiedHeader {
  readonly header: Header;
  /** The header signer's policy (the sender's public identity). */
  readonly publicPolicy: Policy;
  readonly vk: GgVerifyingKey;
  /** SHAKE128 that has absorbed the header bytes; clone before use. */
  readonly transcript: Xof;
  readonly headerBytes: Uint8Array;
  /** The id of the verifying key that verified the header, when a key set's candidates were given. */
  readonly verifyingKeyId?: string;
}

/**
 * A verifying key, or the candidates of a PKG's key set (lib/key-candidates.ts): the header
 * verifies under the first current one it can, else BAD_SIGNATURE; under a retired one only,
 * NO_MATCHING_KEY.
 */
export type VerifyingKeys = string | readonly KeyCandidate[];

/** A user secret key, or one per key of a PKG's key set: the first that opens the capsule is used. */
export type UserKeys = string | PreparedUserSecretKey | readonly KeyCandidate[];

async function verifyHeader(headerBytes: Uint8Array, signatureBytes: Uint8Array, vk: unknown): Promise<VerifiedHeader> {
  const candidates = isCandidateList(vk) ? vk : undefined;
  const single = candidates === undefined ? verifyingKeyFromBase64(vk) : undefined;
  const { signature, policy } = decodeSignatureExt(signatureBytes);
  const [createShake] = await Promise.all([loadShake128(), loadGgAcceleration(), loadPairingAcceleration()]);
  const transcript = createShake().update(headerBytes);
  // Decoded only once its signature verified: a changed header is BAD_SIGNATURE, whatever it decodes to.
  const verified = () => ({ header: decodeHeader(headerBytes), publicPolicy: policy, transcript, headerBytes });
  const verifyUnder = (key: GgVerifyingKey | string) => {
    const verifyingKey = typeof key === 'string' ? verifyingKeyFromBase64(key) : key;
    new SignatureVerifier(verifyingKey, policy).verify(signature, transcript, 'header signature');
    return verifyingKey;
  };
  if (single !== undefined) {
    const vk = verifyUnder(single);
    return { ...verified(), vk };
  }
  const current = candidates!.filter((c) => c.status !== 'retired');
  let badSignature: unknown;
  try {
    if (current.length > 0) {
      const found = await firstMatching(current, ErrorCode.BAD_SIGNATURE, verifyUnder);
      return { ...verified(), vk: found.value, verifyingKeyId: found.id };
    }
    badSignature = new AuthenticationError(ErrorCode.BAD_SIGNATURE, 'the PKG has no current verifying key');
  } catch (error) {
    if (!isPostGuardError(error) || error.code !== ErrorCode.BAD_SIGNATURE) throw error;
    badSignature = error;
  }
  // No current key verifies: a header signed under a retired one is refused as such, else a bad signature.
  for (const old of candidates!.filter((c) => c.status === 'retired')) {
    try {
      verifyUnder(old.key);
    } catch {
      continue;
    }
    throw new AuthenticationError(
      ErrorCode.NO_MATCHING_KEY,
      `the file was sealed under the PKG's master key ${old.id}, which the PKG has retired`,
    );
  }
  throw badSignature;
}

/**
 * Recipient lookup and key decapsulation: the payload's AES key for this recipient, and the id of
 * the candidate user key that opened it when candidates were given.
 */
async function openCapsule(
  header: Header,
  recipientId: unknown,
  usk: unknown,
): Promise<{ key: AesKey; userKeyId?: string }> {
  if (typeof recipientId !== 'string') throw new InputError(ErrorCode.INVALID_INPUT, 'recipient id must be a string');
  const entry = header.recipients.get(recipientId);
  if (!entry) throw new InputError(ErrorCode.UNKNOWN_RECIPIENT, `recipient unknown: ${recipientId}`);
  const candidates = isCandidateList(usk) ? usk : undefined;
  const single = candidates === undefined ? userSecretKeyFromBase64(usk) : undefined;
  let capsule: ReturnType<typeof parseMkemCiphertext>;
  try {
    capsule = parseMkemCiphertext(entry.capsule);
  } catch (cause) {
    throw new FormatError(ErrorCode.MALFORMED, `the key capsule for ${recipientId} is not valid`, { cause });
  }
  const aesKey = async (ss: Uint8Array) => importAesKey(ss.subarray(0, AES_KEY_BYTES));
  if (single !== undefined) return { key: await aesKey(await multiDecaps(single, capsule)) };
  const found = await firstMatching(candidates!, ErrorCode.WRONG_KEY, (key) =>
    multiDecaps(userSecretKeyFromBase64(key, 'usk'), capsule),
  );
  return { key: await aesKey(found.value), userKeyId: found.id };
}

/**
 * Which of a key set's candidate user keys opens `recipientId`'s capsule (one decapsulation each,
 * nothing of the payload read), for a reader that hands one key on (the service worker's download).
 * NO_MATCHING_KEY when none does.
 */
export async function userKeyFor(
  header: Header,
  recipientId: string,
  candidates: readonly KeyCandidate[],
): Promise<KeyCandidate> {
  const { userKeyId } = await openCapsule(header, recipientId, candidates);
  return candidates.find((c) => c.id === userKeyId)!;
}

/** A result with the ids of the keys that opened it, where candidates were given (else as it was). */
function withKeyIds(result: VerificationResult, verifyingKeyId: string | undefined, userKeyId: string | undefined) {
  if (verifyingKeyId === undefined && userKeyId === undefined) return result;
  const keyIds: KeyIds = {};
  if (userKeyId !== undefined) keyIds.userKey = userKeyId;
  if (verifyingKeyId !== undefined) keyIds.verifyingKey = verifyingKeyId;
  return { ...result, keyIds };
}

/** What both unsealers show once the header is authenticated. */
abstract class VerifiedHeaderView {
  protected constructor(protected readonly verified: VerifiedHeader) {}

  /** Recipient id → that recipient's hidden policy (use it to request the key). */
  inspect_header(): Map<string, Policy> {
    return new Map([...this.verified.header.recipients].map(([id, r]) => [id, policyToJs(r.policy)]));
  }

  /** camelCase alias of `inspect_header`: recipient id → hidden policy. */
  inspectHeader(): Map<string, Policy> {
    return this.inspect_header();
  }

  /**
   * The sender the header claims. Its signature verifies against the PKG's key, but before
   * `unseal` it is a claim: anyone holding a signing key of the same PKG can re-sign the header
   * bytes as themselves. `unseal`'s result settles it (`bound`, or SENDER_MISMATCH).
   */
  public_identity(): Policy {
    return policyToJs(this.verified.publicPolicy);
  }

  /** camelCase alias of `public_identity`: the claimed sender. */
  publicIdentity(): Policy {
    return this.public_identity();
  }

  /** The id of the candidate verifying key the header verified under, when a key set's were given (`VerifyingKeys`). */
  get verifyingKeyId(): string | undefined {
    return this.verified.verifyingKeyId;
  }
}

/** Smallest in-memory payload: length (8) + signature + empty policy (16) + tag. */
const MIN_MEMORY_PAYLOAD = 8 + SIGNATURE_BYTES + 16 + GCM_TAG_BYTES;

/**
 * Opens an in-memory ciphertext (one made by `seal`). `Unsealer.new` authenticates the header;
 * then `inspect_header` lists the recipients, whose hidden policies say which key to request from
 * the PKG, and `unseal` decrypts for one of them. Reusable: unseal as often as you like. For files
 * made by `sealStream`, or too large to hold, use {@link StreamUnsealer}.
 */
export class Unsealer extends VerifiedHeaderView {
  private constructor(
    verified: VerifiedHeader,
    private readonly payload: Uint8Array,
  ) {
    super(verified);
  }

  /** Parses and authenticates the header of an in-memory ciphertext. */
  static async new(input: Uint8Array, vk: VerifyingKeys): Promise<Unsealer> {
    if (!(input instanceof Uint8Array))
      throw new InputError(ErrorCode.INVALID_INPUT, 'ciphertext must be a Uint8Array');
    const frame = splitFrame(input);
    const verified = await verifyHeader(frame.header, frame.signature, vk);
    if (verified.header.mode.type !== 'InMemory') {
      throw new FormatError(ErrorCode.WRONG_MODE, 'this is a streaming ciphertext: use StreamUnsealer');
    }
    return new Unsealer(verified, frame.payload);
  }

  /**
   * Decrypts for `recipientId` with that recipient's user secret key and verifies the sender's
   * signature over the message: the plaintext and who signed it (show it with `senderReport`).
   */
  async unseal(recipientId: string, usk: UserKeys): Promise<[Uint8Array, VerificationResult]> {
    const { header, transcript, vk, publicPolicy, verifyingKeyId } = this.verified;
    const { key, userKeyId } = await openCapsule(header, recipientId, usk);
    const inner = await aesGcmOpen(key, header.iv, this.payload);
    if (inner === undefined) {
      if (this.payload.length < MIN_MEMORY_PAYLOAD) {
        throw new FormatError(ErrorCode.TRUNCATED, 'the payload is shorter than any valid payload');
      }
      throw tampered('the payload does not authenticate (the ciphertext was modified or truncated)');
    }
    const { message, signature, signer: payloadPolicy, senderCopy } = decodeMemoryPayload(inner);
    const bound = senderBound(senderCopy, publicPolicy);
    new SignatureVerifier(vk, payloadPolicy).verify(signature, transcript.clone().update(message), 'message signature');
    const result = verificationResult(publicPolicy, payloadPolicy, bound);
    return [message.slice(), withKeyIds(result, verifyingKeyId, userKeyId)];
  }
}

/** What random access into a streaming ciphertext needs: its key, opened for one recipient. */
export interface SegmentAccess {
  key: AesKey;
  iv: Uint8Array;
  segmentSize: number;
  /** The header signer (its signature verified): the sender the file claims. */
  publicPolicy: Policy;
}

/**
 * Verifies a streaming ciphertext's header and opens its key for `recipientId`, without reading
 * any segment: for lib/segments.ts openSegmentAlone (the service worker's Range requests). What
 * that gives is weaker than `StreamUnsealer.unseal`: segments authenticate one by one under the
 * file's key, but the sender's signatures over the payload are not checked.
 */
export async function openSegmentAccess(
  headerBytes: Uint8Array,
  signatureBytes: Uint8Array,
  vk: VerifyingKeys,
  recipientId: string,
  usk: UserKeys,
): Promise<SegmentAccess> {
  const { header, publicPolicy } = await verifyHeader(headerBytes, signatureBytes, vk);
  if (header.mode.type !== 'Streaming')
    throw new FormatError(ErrorCode.WRONG_MODE, 'this is an in-memory ciphertext: it has no segments to seek in');
  const segmentSize = checkedSegmentSize(header.mode);
  const { key } = await openCapsule(header, recipientId, usk);
  return { key, iv: header.iv, segmentSize, publicPolicy };
}

/** What `StreamUnsealer.new` may be told about its source. */
export interface StreamUnsealerOptions {
  /**
   * The ciphertext's length in bytes, when the source knows it (a Blob's size, a Content-Length).
   * With it, `open` gives the plaintext's exact size, and a source that delivers more or fewer
   * bytes than this fails the stream.
   */
  size?: number;
  /**
   * @internal At least this many segments in flight ahead of the reader (the default: what the
   * hasher asks for, four inline). The service worker asks for more in WebKit (worker/sw-whole.ts).
   */
  segmentsInFlight?: number;
}

/**
 * The plaintext of a streaming ciphertext, as `StreamUnsealer.open` gives it. Reading `readable`
 * pulls the ciphertext from the source as it goes; it errors (typed) on any failure, so only a
 * `readable` that closed is complete: until then, what it gave is provisional.
 */
export interface PlaintextStream {
  /** The plaintext, each chunk released once its segment authenticated. */
  readonly readable: ReadableStream<Uint8Array>;
  /**
   * The plaintext's exact length in bytes, when the ciphertext's size was given to `new`
   * (segment 0 is opened first to learn it); undefined otherwise.
   */
  readonly size: number | undefined;
  /**
   * Who signed the content: resolves once `readable` has closed (its final segment verified);
   * rejects with the stream's error.
   */
  readonly result: Promise<VerificationResult>;
}

/**
 * Opens a streaming ciphertext (one made by `sealStream`) from a `ReadableStream`, with memory that
 * stays flat at any size. `StreamUnsealer.new` reads and authenticates the header; `inspect_header`
 * lists the recipients; `open` gives the plaintext as a stream that reads the source as it is read,
 * and `unseal` pipes that into a `WritableStream`; either, once: the source is read a single time.
 * For in-memory ciphertexts use {@link Unsealer}.
 */
export class StreamUnsealer extends VerifiedHeaderView {
  /** Set before the first await of `open`: one reader at a time, since the source is read once. */
  private claimed = false;
  /** The payload has been read from: no retry is possible any more. */
  private consumed = false;
  /** The reading `open` started: its key, and its opener (segment 0's signer block length). */
  private reading: { key: AesKey; opener: SegmentOpener } | undefined;
  /** That reading's verdict, once it verified the whole file (a later reading may then resume). */
  private verdict: VerificationResult | undefined;

  private constructor(
    verified: VerifiedHeader,
    private readonly segmentSize: number,
    private readonly reader: StreamReader,
    private readonly framingBytes: number,
    private readonly ciphertextBytes: number | undefined,
    private readonly minInFlight: number,
  ) {
    super(verified);
  }

  /**
   * Reads and authenticates the header from the start of `readable`, which stays locked
   * until the plaintext has been read.
   */
  static async new(
    readable: ReadableStream<Uint8Array>,
    vk: VerifyingKeys,
    options?: StreamUnsealerOptions,
  ): Promise<StreamUnsealer> {
    const size = options?.size;
    if (size !== undefined && !(Number.isSafeInteger(size) && size >= 0))
      throw new InputError(ErrorCode.INVALID_INPUT, "size must be the ciphertext's length in bytes");
    const inFlight = options?.segmentsInFlight ?? 0;
    if (!(Number.isSafeInteger(inFlight) && inFlight >= 0 && inFlight <= 64))
      throw new InputError(ErrorCode.INVALID_INPUT, 'segmentsInFlight must be a whole number from 0 to 64');
    const reader = new StreamReader(readable);
    try {
      const { header, signature, framingBytes } = await readFrame(
        async (_, length) => (await reader.readUpTo(length)).bytes,
      );
      const verified = await verifyHeader(header, signature, vk);
      if (verified.header.mode.type !== 'Streaming') {
        throw new FormatError(ErrorCode.WRONG_MODE, 'this is an in-memory ciphertext: use Unsealer');
      }
      const segmentSize = checkedSegmentSize(verified.header.mode);
      if (size !== undefined && segmentLayout(size, framingBytes, segmentSize) === undefined)
        throw new FormatError(
          ErrorCode.TRUNCATED,
          `a ciphertext of ${size} bytes does not end with a whole final segment: it was cut`,
        );
      return new StreamUnsealer(verified, segmentSize, reader, framingBytes, size, inFlight);
    } catch (e) {
      await reader.cancel(e);
      throw e;
    }
  }

  /**
   * Opens the plaintext for `recipientId` with that recipient's user secret key. Nothing of the
   * payload is read until the stream is (except segment 0 when the size was given, to learn the
   * plaintext's length). A wrong id or key rejects here and leaves the source for another try.
   */
  async open(recipientId: string, usk: UserKeys): Promise<PlaintextStream> {
    return (await this.openStream(recipientId, usk)).opened;
  }

  /**
   * @internal The header's bytes as read: a later reading of the same source must find these
   * (the service worker's reading that takes over from a page's crypto worker, worker/sw-offload.ts).
   */
  get headerBytes(): Uint8Array {
    return this.verified.headerBytes;
  }

  /**
   * @internal `open`, for the very bytes that `earlier` (an unsealer over an earlier reading of
   * the same source) authenticated in full, its verdict being `result`: each segment is decrypted
   * and its tag checked at its position, but nothing is hashed and no signature checked. The
   * header must be byte for byte the earlier one (else TAMPERED), so the key and every segment's
   * position are the ones authenticated. Only for a source that cannot change between the two
   * readings (the service worker's Blob read twice; worker/README.md, "Verify first").
   */
  async reopen(
    recipientId: string,
    usk: UserKeys,
    earlier: { unsealer: StreamUnsealer; result: VerificationResult },
  ): Promise<PlaintextStream> {
    const before = earlier.unsealer.verified.headerBytes;
    const now = this.verified.headerBytes;
    if (before.length !== now.length || before.some((b, i) => b !== now[i]))
      throw tampered('the ciphertext changed between its two readings');
    return (await this.openStream(recipientId, usk, earlier.result)).opened;
  }

  /** `open`, and whether the stream failed by itself (as against being cancelled by its reader). */
  private async openStream(
    recipientId: string,
    usk: UserKeys,
    verified?: VerificationResult,
  ): Promise<{ opened: PlaintextStream; failure(): { error: unknown } | undefined }> {
    if (this.claimed) {
      throw new PostGuardError(
        ErrorCode.INVALID_STATE,
        this.consumed ? 'this stream was already unsealed' : 'this stream is being unsealed by another call',
      );
    }
    this.claimed = true;
    const { header, transcript, vk, publicPolicy, headerBytes, verifyingKeyId } = this.verified;
    let key: AesKey;
    let userKeyId: string | undefined;
    try {
      ({ key, userKeyId } = await openCapsule(header, recipientId, usk));
    } catch (error) {
      this.claimed = false; // a wrong id or key: the source is untouched, another call may retry
      throw error;
    }
    this.consumed = true;
    const hasher = verified === undefined ? segmentHasher(transcript.clone(), headerBytes) : undefined;
    const opener = new SegmentOpener(
      hasher === undefined
        ? { iv: header.iv, key, verified: verified! }
        : { iv: header.iv, key, hasher, vk, publicPolicy },
      this.segmentSize,
    );
    this.reading = { key, opener };
    const layout = this.layout();
    const stream = this.plaintext(this.reader, opener, {
      // As many segments as the hasher asks of an opener: on a hashing thread, enough queued there
      // to keep it busy through a pause of this thread or of the source (with four it sat idle
      // between replies; Node's thread takes 6 MiB of them, segment-hasher-node.ts says why);
      // inline (a service worker) and on the second reading, the default four, which is also what
      // a service worker holds ahead of its reader; or more where the caller asks (`segmentsInFlight`).
      depth: this.depth(hasher?.inFlight(this.segmentSize, 'open')),
      finished: () => hasher?.close(),
      keyIds: { verifyingKeyId, userKeyId },
    });
    if (layout !== undefined) {
      // Segment 0 first: its signer block's length makes the plaintext's size exact.
      await stream.pulled.prime();
      const prefix = opener.prefixBytes;
      stream.size = prefix === undefined ? undefined : messageBytes(layout, prefix);
      if (stream.size === undefined) {
        const error = malformed('the signer policy does not fit in segment 0');
        await stream.pulled.readable.cancel(error);
        throw error;
      }
    }
    return stream.opened();
  }

  /**
   * @internal For a second reading of the very bytes this unsealer authenticated in full (a Blob
   * read twice by the service worker, which kept the first `skip` bytes of plaintext from the first
   * reading): where in the ciphertext the rest starts. `skip` must end a segment's plaintext.
   */
  resumeOffset(skip: number): number {
    return this.resumePoint(skip).offset;
  }

  /**
   * @internal The plaintext after its first `skip` bytes, read from `readable`, which holds the
   * ciphertext from `resumeOffset(skip)` on (a slice of the same Blob). As `reopen`: only for bytes
   * that cannot change between the two readings, and only once this unsealer's own reading
   * verified the whole file (its verdict is the result); each segment is decrypted and its tag
   * checked at its position (a segment from elsewhere fails), nothing hashed.
   */
  resume(readable: ReadableStream<Uint8Array>, skip: number): PlaintextStream {
    const { segment, size, verdict, key } = this.resumePoint(skip);
    const reader = new StreamReader(readable);
    const opener = new SegmentOpener(
      { iv: this.verified.header.iv, key, verified: verdict, firstSegment: segment },
      this.segmentSize,
    );
    const stream = this.plaintext(reader, opener, { depth: this.depth(), keyIds: {} });
    stream.size = size;
    return stream.opened().opened;
  }

  /** Segments a reading keeps in flight: what its hasher asks for (four inline), or the caller's `segmentsInFlight` if more. */
  private depth(asked = INLINE_IN_FLIGHT): number {
    return Math.max(this.minInFlight, asked);
  }

  private resumePoint(skip: number) {
    const verdict = this.verdict;
    const prefix = this.reading?.opener.prefixBytes;
    const layout = this.layout();
    const total = layout === undefined || prefix === undefined ? undefined : messageBytes(layout, prefix);
    const segment = prefix === undefined ? NaN : (skip + prefix) / this.segmentSize;
    if (
      verdict === undefined ||
      layout === undefined ||
      total === undefined ||
      !Number.isSafeInteger(segment) ||
      segment < 1 ||
      segment >= layout.count ||
      skip >= total
    ) {
      throw new PostGuardError(
        ErrorCode.INVALID_STATE,
        'a reading resumes only inside a file of known size that an earlier reading verified, at a segment boundary',
      );
    }
    return { segment, offset: wireSpan(layout, segment).offset, size: total - skip, verdict, key: this.reading!.key };
  }

  /** Where each segment lies in the ciphertext, when its size is known. */
  private layout() {
    return this.ciphertextBytes === undefined
      ? undefined
      : segmentLayout(this.ciphertextBytes, this.framingBytes, this.segmentSize);
  }

  /** The plaintext pipeline over `reader` (the source from the opener's first segment on). */
  private plaintext(
    reader: StreamReader,
    opener: SegmentOpener,
    options: { depth: number; finished?: () => void; keyIds: { verifyingKeyId?: string; userKeyId?: string } },
  ) {
    let failure: { error: unknown } | undefined;
    let delivered = 0;
    let settle!: { resolve(r: VerificationResult): void; reject(e: unknown): void };
    const result = new Promise<VerificationResult>((resolve, reject) => (settle = { resolve, reject }));
    result.catch(() => undefined);
    const stream = {
      /** The plaintext's exact length, once known (checked as it is delivered). */
      size: undefined as number | undefined,
      pulled: pullSegments(reader.chunkSource(), opener, {
        depth: options.depth,
        cancelSource: (reason) => {
          settle.reject(reason);
          return reader.cancel(reason);
        },
        ...(options.finished !== undefined ? { finished: options.finished } : {}),
        check: (output) => {
          delivered += output.length;
          if (stream.size !== undefined && delivered > stream.size) throw sourceMismatch(this.ciphertextBytes!);
        },
        complete: () => {
          if (!opener.result) throw malformed('the stream ended without a final segment');
          if (stream.size !== undefined && delivered !== stream.size) throw sourceMismatch(this.ciphertextBytes!);
          const verdict = withKeyIds(opener.result, options.keyIds.verifyingKeyId, options.keyIds.userKeyId);
          if (opener === this.reading?.opener) this.verdict = verdict;
          settle.resolve(verdict);
        },
        failed: (error) => {
          failure = { error };
          settle.reject(error);
        },
      }),
      opened: () => ({
        opened: { readable: stream.pulled.readable, size: stream.size, result } as PlaintextStream,
        failure: () => failure,
      }),
    };
    return stream;
  }

  /**
   * Decrypts the rest of the stream into `writable`: `open(…)` piped into it. Plaintext is written
   * segment by segment after each one authenticates, and `writable` is closed only after the final
   * segment did: if anything fails, `writable` is aborted with the error (so a download or file
   * sink is marked failed) and the promise rejects. Until it resolves, output is provisional.
   */
  async unseal(recipientId: string, usk: UserKeys, writable: WritableStream<Uint8Array>): Promise<VerificationResult> {
    let stream: Awaited<ReturnType<StreamUnsealer['openStream']>>;
    try {
      stream = await this.openStream(recipientId, usk);
    } catch (error) {
      await writable.abort(error).catch(() => undefined);
      throw error;
    }
    const { opened } = stream;
    try {
      // The source is cancelled here rather than by pipeTo, with the typed reason.
      await opened.readable.pipeTo(writable, { preventCancel: true });
    } catch (error) {
      const failed = stream.failure();
      if (failed) throw failed.error;
      const sinkFailed = isPostGuardError(error)
        ? error
        : new PostGuardError(ErrorCode.SINK_FAILED, `the output stream failed: ${String(error)}`, { cause: error });
      await opened.readable.cancel(sinkFailed).catch(() => undefined);
      throw sinkFailed;
    }
    return opened.result;
  }
}

const sourceMismatch = (size: number) =>
  new PostGuardError(ErrorCode.SOURCE_FAILED, `the source did not deliver the ${size} bytes it was said to hold`);
