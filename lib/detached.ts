import { ErrorCode, FormatError, InputError, PostGuardError, isPostGuardError } from './errors.js';
import { encodeFrame, readFrame, splitFrame, type FrameParts } from './frame.js';
import { checkedSegmentSize, decodeHeader, type Mode } from './header.js';
import { StreamReader } from './io.js';
import { policyToJs, type Policy } from './policy.js';
import type { ByteSource } from './net/sources.js';
import { claimedSenderReport, type SenderReport } from './sender.js';
import { decodeSignatureExt } from './signatures.js';
import type { KeyCandidate } from './key-candidates.js';
import { StreamUnsealer, Unsealer, userKeyFor, type VerifyingKeys } from './unseal.js';
import type { Header } from './header.js';

/**
 * A ciphertext's framing on its own: what a file is, for whom and from whom it claims to be, read
 * from its first bytes only; and the framing stored apart from the payload ("detached header"),
 * then put back in front of it for `Unsealer` / `StreamUnsealer`.
 *
 * The framing is PRELUDE ‖ version ‖ BE32(H) ‖ header ‖ BE32(S) ‖ header signature (frame.ts); it
 * is at most about 2 MiB (both lengths are bounded before anything is read), and every reader here
 * walks it with `readFrame`, so nothing past it is ever asked for.
 */

/** Where `inspectCiphertext` reads a ciphertext's first bytes from. */
export type CiphertextSource =
  | Uint8Array
  | Blob
  | ReadableStream<Uint8Array>
  /** A sized source of exact reads, as random access takes (`blobSource`, `fileHandleSource`, `rangedUrlSource`). */
  | ByteSource
  /** Up to `length` bytes at `offset` (fewer only at the end of the source); asked in order. */
  | ((offset: number, length: number) => Promise<Uint8Array>);

/** What `inspectCiphertext` read from a ciphertext's framing. */
export interface CiphertextInspection {
  /** In-memory (with its size) or streaming (with its segment size and size hint). */
  readonly mode: Mode;
  /** Recipient id → that recipient's hidden policy, as `inspect_header()` gives it. */
  readonly recipients: Map<string, Policy>;
  /**
   * The header signer's policy: the sender the file *claims*. A verified header signature does not
   * make it more than a claim (anyone holding a signing key of the same PKG can re-sign the header
   * as themselves); only unsealing the whole file settles it (`senderReport`).
   */
  readonly claimedSender: Policy;
  /** The claimed sender in the words every surface shows (`claimedSenderReport`). */
  readonly sender: SenderReport;
  /**
   * `'verified'`: the header signature verified under the PKG verifying key given to
   * `inspectCiphertext`. `'not-checked'`: no key was given, so nothing was verified; recipients,
   * mode and sender are what the bytes say, and anyone could have written them.
   */
  readonly headerSignature: 'verified' | 'not-checked';
  /** The id of the key-set verifying key the header verified under, when `vk` was a key set's candidates. */
  readonly verifyingKeyId?: string;
  /** Bytes before the payload (preamble, header, signature length, header signature). */
  readonly framingBytes: number;
}

/** Options of `inspectCiphertext`. */
export interface InspectOptions {
  /**
   * The PKG's verifying key (base64), or its key set's (`[{ id, key, status }]`, as
   * `PkgClient.verificationKeys` gives them): with it the header signature is verified, else not checked.
   */
  readonly vk?: VerifyingKeys | undefined;
}

/**
 * Reads a ciphertext's framing (preamble, header, header signature; never the payload) and says
 * what it is: its mode, its recipients with their hidden policies, and the sender it claims. Needs
 * no key and no network; with `options.vk` (the PKG's verifying key) the header signature is
 * verified too (`headerSignature: 'verified'`, else `'not-checked'`).
 *
 * The source is read only as far as the framing: a `Blob`, a `ByteSource` (`rangedUrlSource` reads
 * a remote file's first bytes by Range requests) or a `read(offset, length)` function is asked for
 * the framing's spans alone (`framingBytes` bytes in all, in four reads). A `ReadableStream` is
 * read chunk by chunk until the framing is complete and then **cancelled**: inspection consumes
 * it. To keep the rest of a stream, split it with {@link splitHeaderStream} and inspect the header.
 *
 * Throws the framing's FormatErrors (NOT_POSTGUARD, UNSUPPORTED_VERSION, HEADER_TOO_LARGE,
 * TRUNCATED, MALFORMED), BAD_SIGNATURE with a key it does not verify under, INVALID_KEY for a key
 * that does not decode, and SOURCE_FAILED when the source fails.
 */
export async function inspectCiphertext(
  source: CiphertextSource,
  options: InspectOptions = {},
): Promise<CiphertextInspection> {
  const frame = await readSourceFrame(source);
  return inspectFrame(frame, options.vk);
}

/** A ciphertext split at the end of its framing (`detachHeader`). */
export interface DetachedCiphertext {
  /** The framing: preamble, header, header signature (a view of the ciphertext). */
  readonly header: Uint8Array;
  /** The payload that follows it (a view of the ciphertext). */
  readonly body: Uint8Array;
}

/**
 * Splits a ciphertext in memory into its framing (`header`, to be stored apart, e.g. beside a
 * database row) and its payload (`body`): views of `ciphertext`, no copies. `attachHeader` puts
 * them back together. Throws the framing's FormatErrors.
 */
export function detachHeader(ciphertext: Uint8Array): DetachedCiphertext {
  if (!(ciphertext instanceof Uint8Array))
    throw new InputError(ErrorCode.INVALID_INPUT, 'ciphertext must be a Uint8Array');
  const { framingBytes } = splitFrame(ciphertext);
  return { header: ciphertext.subarray(0, framingBytes), body: ciphertext.subarray(framingBytes) };
}

/** A ciphertext stream split at the end of its framing (`splitHeaderStream`). */
export interface SplitCiphertextStream {
  /** The framing, once read; rejects with the framing's error (the body then errors alike). */
  readonly header: Promise<Uint8Array>;
  /** Everything after the framing, chunk by chunk as the source gives it. */
  readonly body: ReadableStream<Uint8Array>;
}

/**
 * Splits a ciphertext stream into its framing and the rest, reading the source once: the framing
 * is read at once (so `await header` needs nobody to read the body), the body is read from the
 * source as it is read. A broken framing rejects `header`, errors `body` and cancels the source;
 * cancelling `body` cancels the source.
 */
export function splitHeaderStream(readable: ReadableStream<Uint8Array>): SplitCiphertextStream {
  if (!(readable instanceof ReadableStream))
    throw new InputError(ErrorCode.INVALID_INPUT, 'the ciphertext must be a ReadableStream');
  const reader = new StreamReader(readable);
  const header = readStreamFrame(reader).then(
    ({ header: h, signature }) => encodeFrame(h, signature),
    async (error: unknown) => {
      await reader.cancel(error);
      throw error;
    },
  );
  header.catch(() => undefined); // a caller may read only the body: it errors with the same error
  const next = reader.chunkSource();
  const body = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        await header;
        // Every pull enqueues or closes: a pull that gave nothing would not be called again.
        let chunk: Uint8Array | undefined;
        do chunk = await next();
        while (chunk?.length === 0);
        if (chunk === undefined) controller.close();
        else controller.enqueue(chunk);
      },
      async cancel(reason) {
        await reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
  return { header, body };
}

/**
 * Puts a detached header back in front of its body: what `Unsealer.new` (bytes) or
 * `StreamUnsealer.new` (a stream) opens. The header must be one whole framing and nothing more
 * (TRUNCATED, NOT_POSTGUARD, … or MALFORMED for bytes after it); the body is not looked at. Bytes
 * give bytes (one copy), a Blob gives a Blob (no copy), a stream gives a stream that yields the
 * header, then the body's chunks as they are read (cancelling it cancels the body).
 */
export function attachHeader(header: Uint8Array, body: Uint8Array): Uint8Array;
/** A detached header and a Blob body: one Blob, no copy of the body. */
export function attachHeader(header: Uint8Array, body: Blob): Blob;
/** A detached header and a body stream: one stream, the header first (for `StreamUnsealer.new`). */
export function attachHeader(header: Uint8Array, body: ReadableStream<Uint8Array>): ReadableStream<Uint8Array>;
export function attachHeader(
  header: Uint8Array,
  body: Uint8Array | Blob | ReadableStream<Uint8Array>,
): Uint8Array | Blob | ReadableStream<Uint8Array> {
  checkDetachedHeader(header);
  if (body instanceof Uint8Array) {
    const out = new Uint8Array(header.length + body.length);
    out.set(header, 0);
    out.set(body, header.length);
    return out;
  }
  if (typeof Blob !== 'undefined' && body instanceof Blob) return new Blob([header.slice(), body]);
  if (body instanceof ReadableStream) return prepend(header.slice(), body);
  throw new InputError(ErrorCode.INVALID_INPUT, 'the body must be a Uint8Array, a Blob or a ReadableStream');
}

/** A detached header is exactly one framing: nothing missing, nothing after it. */
function checkDetachedHeader(header: Uint8Array): void {
  if (!(header instanceof Uint8Array)) throw new InputError(ErrorCode.INVALID_INPUT, 'the header must be a Uint8Array');
  const { framingBytes } = splitFrame(header);
  if (framingBytes !== header.length) {
    throw new FormatError(
      ErrorCode.MALFORMED,
      `the detached header has ${header.length - framingBytes} bytes after its framing (a header is the framing alone)`,
    );
  }
}

function prepend(first: Uint8Array, rest: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        controller.enqueue(first);
      },
      async pull(controller) {
        reader ??= rest.getReader();
        const { done, value } = await reader.read();
        if (done) controller.close();
        else controller.enqueue(value);
      },
      async cancel(reason) {
        await (reader ?? rest).cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}

/** Reads the framing from any source, asking it for the framing's spans alone. */
async function readSourceFrame(source: CiphertextSource): Promise<FrameParts> {
  if (source instanceof Uint8Array) return splitFrame(source);
  if (typeof Blob !== 'undefined' && source instanceof Blob) {
    return readFrame(
      guarded(async (offset, length) => new Uint8Array(await source.slice(offset, offset + length).arrayBuffer())),
    );
  }
  if (source instanceof ReadableStream) {
    const reader = new StreamReader(source);
    try {
      return await readStreamFrame(reader);
    } finally {
      // Inspection consumes the stream: what the source would give next is not wanted.
      await reader.cancel();
    }
  }
  if (typeof source === 'function') return readFrame(guarded(source));
  if (isByteSource(source)) {
    const { size } = source;
    // Exact reads within its size: asked for no more than is there, so a short file reads as TRUNCATED.
    return readFrame(
      guarded(async (offset, length) => source.read(offset, Math.max(0, Math.min(length, size - offset)))),
    );
  }
  throw new InputError(
    ErrorCode.INVALID_INPUT,
    'the ciphertext must be a Uint8Array, a Blob, a ReadableStream, a ByteSource or a read(offset, length) function',
  );
}

const isByteSource = (source: unknown): source is ByteSource =>
  typeof source === 'object' &&
  source !== null &&
  typeof (source as ByteSource).read === 'function' &&
  Number.isSafeInteger((source as ByteSource).size) &&
  (source as ByteSource).size >= 0;

const readStreamFrame = (reader: StreamReader): Promise<FrameParts> =>
  readFrame(async (_, length) => (await reader.readUpTo(length)).bytes);

/** A caller's read function held to readFrame's contract; its failures are SOURCE_FAILED. */
function guarded(
  read: (offset: number, length: number) => Promise<Uint8Array>,
): (offset: number, length: number) => Promise<Uint8Array> {
  return async (offset, length) => {
    let bytes: unknown;
    try {
      bytes = await read(offset, length);
    } catch (cause) {
      if (isPostGuardError(cause)) throw cause;
      throw new PostGuardError(ErrorCode.SOURCE_FAILED, `reading the ciphertext failed: ${String(cause)}`, { cause });
    }
    if (!(bytes instanceof Uint8Array) || bytes.length > length) {
      throw new InputError(
        ErrorCode.INVALID_INPUT,
        `read(${offset}, ${length}) must answer a Uint8Array of at most ${length} bytes`,
      );
    }
    return bytes;
  };
}

// The decoded header of each inspection, for `userKeyForInspection` (kept off the inspection's public shape).
const inspectedHeaders = new WeakMap<CiphertextInspection, Header>();

/**
 * Which of the candidate user keys (`decryptionKey(…).usks`, one per key of the PKG's key set)
 * opens `recipientId`'s capsule in the inspected file: one KEM decapsulation per candidate tried,
 * nothing of the payload read. NO_MATCHING_KEY when none does (the file is under a retired key).
 */
export async function userKeyForInspection(
  inspection: CiphertextInspection,
  recipientId: string,
  candidates: readonly KeyCandidate[],
): Promise<KeyCandidate> {
  const header = inspectedHeaders.get(inspection);
  if (header === undefined)
    throw new InputError(ErrorCode.INVALID_INPUT, 'not an inspection made by inspectCiphertext in this context');
  return userKeyFor(header, recipientId, candidates);
}

async function inspectFrame(frame: FrameParts, vk: VerifyingKeys | undefined): Promise<CiphertextInspection> {
  const header = decodeHeader(frame.header);
  if (header.mode.type === 'Streaming') checkedSegmentSize(header.mode); // what StreamUnsealer refuses
  let recipients: Map<string, Policy>;
  let claimedSender: Policy;
  let verifyingKeyId: string | undefined;
  if (vk === undefined) {
    recipients = new Map([...header.recipients].map(([id, r]) => [id, policyToJs(r.policy)]));
    claimedSender = policyToJs(decodeSignatureExt(frame.signature).policy);
  } else {
    // The unsealers verify the header signature before they exist; no payload is given or read.
    const framing = encodeFrame(frame.header, frame.signature);
    const opened =
      header.mode.type === 'InMemory' ? await Unsealer.new(framing, vk) : await StreamUnsealer.new(once(framing), vk);
    recipients = opened.inspect_header();
    claimedSender = opened.public_identity();
    verifyingKeyId = opened.verifyingKeyId;
  }
  const inspection: CiphertextInspection = {
    mode: header.mode,
    recipients,
    claimedSender,
    sender: claimedSenderReport(claimedSender),
    headerSignature: vk === undefined ? 'not-checked' : 'verified',
    framingBytes: frame.framingBytes,
    ...(verifyingKeyId === undefined ? {} : { verifyingKeyId }),
  };
  inspectedHeaders.set(inspection, header);
  return inspection;
}

const once = (bytes: Uint8Array): ReadableStream<Uint8Array> =>
  new ReadableStream({
    start(controller) {
      controller.enqueue(bytes);
      controller.close();
    },
  });
