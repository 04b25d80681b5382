import { DEFAULT_STALL_MS, bounded, cancelledBy, linked } from './bounded.js';
import { ErrorCode, FormatError, InputError, PostGuardError, describeThrown, malformed } from './errors.js';
import { toHeaders, type CredentialsMode, type RequestHeaders } from './web-types.js';
import { readFrame } from './frame.js';
import { contentLength, contentRange, reencoded, unsatisfiedTotal, type ContentRange } from './http-lengths.js';
import { decodeSignerBlock, senderBound } from './payload.js';
import { policyToJs, type Policy } from './policy.js';
import { isFinal, messageBytes, rangePieces, segmentLayout, wireSpan, type SegmentPiece } from './segment-map.js';
import { openSegmentAlone } from './segments.js';
import { claimedSenderReport, type SenderReport } from './sender.js';
import { openSegmentAccess, type UserKeys, type VerifyingKeys } from './unseal.js';

/**
 * Random access into a streaming ciphertext (one made by `sealStream`): any span of its plaintext,
 * decrypted from just the segments that hold it. The source is anything that reads a span of
 * ciphertext bytes: a Blob or File, a URL whose server answers byte ranges, a Node `FileHandle`
 * (typed structurally: nothing of Node is imported), or any `{ size, read(offset, length) }`.
 *
 * Opening reads the framing, verifies the header signature, opens the recipient's key, then
 * segment 0 (the prefix's length, the sender copy sealed inside) and the final segment (the end
 * really is the end); both stay cached. A span then costs the segments it covers, each
 * authenticated by AES-GCM under the file's key at its own position before any of its bytes is
 * handed out.
 *
 * What that proves is weaker than `StreamUnsealer.unseal`: the sender's signatures are not
 * verified, since each one signs the transcript of all the plaintext before it. The sender is a
 * claim ({@link RandomAccessFile.claimedSender}, worded by lib/sender.ts); read the whole file with
 * `StreamUnsealer` to settle it.
 */

/**
 * The general source: ciphertext bytes that can be read at any offset. Blobs, ranged URLs and
 * file handles are adapted onto it ({@link blobSource}, {@link rangedUrlSource},
 * {@link fileHandleSource}).
 */
export interface ByteSource {
  /** Ciphertext bytes. */
  readonly size: number;
  /**
   * Exactly `length` bytes from `offset` (`offset + length <= size`). Fewer or more is read as a
   * source that changed (SOURCE_FAILED). `signal`, when given, aborts when the bytes are no longer
   * wanted; the reader stops waiting then whether or not the source heeds it.
   */
  read(offset: number, length: number, signal?: AbortSignal): Promise<Uint8Array>;
}

/**
 * A Node `FileHandle` (`fs/promises` `open()`), or anything with its `read`: typed by shape so this
 * module imports nothing of Node.
 */
export interface FileHandleLike {
  /** Reads `length` bytes at file position `position` into `buffer` from `offset`; `bytesRead` 0 at the end. */
  read(buffer: Uint8Array, offset: number, length: number, position: number): Promise<{ bytesRead: number }>;
  /** Used for the size when none is given. */
  stat?(): Promise<{ size: number | bigint }>;
}

/** How a URL source is fetched: its headers, credentials and fetch implementation. */
export interface RangedUrlFetch {
  /** Request headers (an Authorization, say); `Range` is set per request. */
  headers?: RequestHeaders;
  /** Default `same-origin`. */
  credentials?: CredentialsMode;
  /** The fetch implementation; default the global `fetch`. */
  fetch?: typeof fetch;
}

/** How a URL source is fetched, and how long and until when its reads may wait. */
export interface RangedUrlOptions extends RangedUrlFetch {
  /**
   * How long a request may wait for its response, and then for each piece of its body, before it
   * fails with SOURCE_FAILED (default 30 s).
   */
  stallMs?: number;
  /** Ends every request, pending and future, with CANCELLED. */
  signal?: AbortSignal;
}

/** A URL source given to {@link openRandomAccess}: the URL and how to fetch it. */
export interface RangedUrl extends RangedUrlFetch {
  /** Where the ciphertext is; its server must answer `Range: bytes=a-b` with a 206 (see {@link rangedUrlSource}). */
  url: string | URL;
}

/** A file handle given to {@link openRandomAccess}, with its size when it has no `stat`. */
export interface FileHandleInput {
  /** The open file (the caller closes it). */
  fileHandle: FileHandleLike;
  /** Its size in bytes; default from `fileHandle.stat()`. */
  size?: number;
}

/** What {@link openRandomAccess} reads from. */
export type RandomAccessInput = Blob | string | URL | RangedUrl | FileHandleInput | FileHandleLike | ByteSource;

/** The keys that open a file for one recipient. */
export interface RandomAccessKeys {
  /** The PKG's verification key (base64), or its key set's candidates (`VerifyingKeys`). */
  vk: VerifyingKeys;
  /** The recipient to decrypt for, as the header lists it. */
  recipientId: string;
  /** That recipient's user secret key, or one per key of the PKG's key set (`UserKeys`). */
  usk: UserKeys;
}

/** Options of {@link openRandomAccess}. */
export interface RandomAccessOptions extends RandomAccessKeys {
  /** Ends the reader: every pending and later read fails with CANCELLED. */
  signal?: AbortSignal;
  /**
   * How long one read of the source may take before it fails with SOURCE_FAILED (default 30 s);
   * for a URL, how long a response, and each piece of its body, may take.
   */
  stallMs?: number;
}

/** Options of one read. */
export interface SpanOptions {
  /** Ends this read (CANCELLED); the reader stays usable. */
  signal?: AbortSignal;
}

/**
 * What a span's bytes were shown to be: authenticated segment by segment under the file's key
 * (AES-GCM at each segment's position), the sender's signatures not checked.
 */
export type RangeTrust = 'segments-authenticated';

/** A streaming ciphertext opened for random access by {@link openRandomAccess}. */
export interface RandomAccessFile {
  /** Plaintext bytes, exact (segment 0 and the final segment authenticated). */
  readonly size: number;
  /** Ciphertext bytes. */
  readonly ciphertextSize: number;
  /** What every span's bytes were shown to be: see {@link RangeTrust}. */
  readonly trust: RangeTrust;
  /**
   * The sender the header names: a claim. Its header signature verified and segment 0's sealed
   * copy agrees (else SENDER_MISMATCH), but that copy is only authenticated under the file's key,
   * which every recipient holds; the content's signatures are checked only by a full read.
   */
  readonly sender: Policy;
  /** How to present the sender: `claimedSenderReport(sender, 'range')` from lib/sender.ts. */
  claimedSender(): SenderReport;
  /**
   * Plaintext bytes `start` to `end` (exclusive; default the end), in one buffer. For large spans
   * use {@link range} or {@link stream}. A span outside `0..size` is INVALID_INPUT.
   */
  slice(start: number, end?: number, options?: SpanOptions): Promise<Uint8Array>;
  /** The same span as authenticated pieces (at most one segment's each), read as they are asked for. */
  range(start: number, end?: number, options?: SpanOptions): AsyncGenerator<Uint8Array, void, undefined>;
  /** The same span as a `ReadableStream`; cancelling it stops reading the source. */
  stream(start?: number, end?: number, options?: SpanOptions): ReadableStream<Uint8Array>;
}

/** The default for `stallMs`. */
export { DEFAULT_STALL_MS };

/** Ciphertext read in one request of the source at most (unless one segment is larger). */
const RUN_BYTES = 1024 * 1024;

/**
 * Segments read in one request at most: with tiny segments a run's pieces, not its bytes, are what
 * it costs in memory (4096 segments of 256 bytes make a full RUN_BYTES run).
 */
const RUN_SEGMENTS = 4096;

/** What the first request of a URL source asks for: the framing of most files, and segment 0's start. */
const PROBE_BYTES = 64 * 1024;

/** Sources that bound their own waits (a URL: per response and per piece of body). */
const SELF_BOUNDED = new WeakSet<ByteSource>();

const sourceFailed = (message: string, cause?: unknown) =>
  new PostGuardError(ErrorCode.SOURCE_FAILED, message, cause === undefined ? undefined : { cause });

const cancelled = (signal: AbortSignal) => cancelledBy(signal);

const invalid = (message: string) => new InputError(ErrorCode.INVALID_INPUT, message);

/** Swallows a rejection that a later `await` of the same promise will report (or nobody wants). */
const quiet = <T>(p: Promise<T>): Promise<T> => {
  p.catch(() => undefined);
  return p;
};

function checkStall(stallMs: unknown): number {
  if (stallMs === undefined) return DEFAULT_STALL_MS;
  if (typeof stallMs !== 'number' || !(stallMs > 0)) throw invalid('stallMs must be a positive number of milliseconds');
  return stallMs;
}

/** A Blob or File as a source. A File changed on disk fails its reads (SOURCE_FAILED). */
export function blobSource(blob: Blob): ByteSource {
  return {
    size: blob.size,
    read: async (offset, length) => new Uint8Array(await blob.slice(offset, offset + length).arrayBuffer()),
  };
}

/**
 * A file handle as a source (Node: `await open(path)` from `node:fs/promises`); its size from
 * `size`, else from `stat()`. The handle stays the caller's to close.
 */
export async function fileHandleSource(handle: FileHandleLike, size?: number): Promise<ByteSource> {
  if (handle === null || typeof handle !== 'object' || typeof handle.read !== 'function')
    throw invalid('a file handle must have a read(buffer, offset, length, position) method');
  let bytes = size;
  if (bytes === undefined) {
    if (typeof handle.stat !== 'function') throw invalid('a file handle without stat() needs its size');
    try {
      bytes = Number((await handle.stat()).size);
    } catch (cause) {
      throw sourceFailed(`the file's size could not be read: ${describeThrown(cause)}`, cause);
    }
  }
  if (!Number.isSafeInteger(bytes) || bytes < 0) throw invalid(`a file of ${String(bytes)} bytes cannot exist`);
  return {
    size: bytes,
    async read(offset, length) {
      const out = new Uint8Array(length);
      let filled = 0;
      while (filled < length) {
        const { bytesRead } = await handle.read(out, filled, length - filled, offset + filled);
        if (!(bytesRead > 0)) break; // the end of the file, before its size: it shrank
        filled += bytesRead;
      }
      return filled === length ? out : out.subarray(0, filled);
    },
  };
}

/** Why a URL cannot be read by ranges, or the source it gives. */
type Probe = { source: ByteSource; refusal?: undefined } | { source?: undefined; refusal: string };

async function probeRangedUrl(url: string | URL, options: RangedUrlOptions): Promise<Probe> {
  const doFetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  const stallMs = checkStall(options.stallMs);
  const seconds = `${stallMs / 1000} s`;

  /** One request (a ranged GET unless `method` says otherwise), its response within the stall timeout. */
  const send = async (range: string | undefined, signal: AbortSignal | undefined, method = 'GET') => {
    const { controller, release } = linked(options.signal, signal);
    const headers = toHeaders(options.headers);
    if (range === undefined) headers.delete('range');
    else headers.set('range', range);
    try {
      const response = await bounded(
        doFetch(url, { method, headers, credentials: options.credentials ?? 'same-origin', signal: controller.signal }),
        controller.signal,
        stallMs,
        () => sourceFailed(`the ciphertext URL did not answer within ${seconds}`),
      );
      return { response, controller, release };
    } catch (cause) {
      controller.abort(cause);
      release();
      throw cause instanceof PostGuardError
        ? cause
        : sourceFailed(`the ciphertext could not be fetched: ${describeThrown(cause)}`, cause);
    }
  };

  /**
   * One ranged GET, judged by what any reader can see: a 206 whose bytes are not re-encoded. Its
   * Content-Range when readable (same-origin, or a host that exposes it), else only its
   * Content-Length: a cross-origin page reading Cryptify sees no other header.
   */
  const get = async (offset: number, length: number, signal: AbortSignal | undefined) => {
    const sent = await send(`bytes=${offset}-${offset + length - 1}`, signal);
    const { headers, status } = sent.response;
    const readable = headers.has('content-range');
    const range: ContentRange | undefined = contentRange(headers);
    let refusal: string | undefined;
    if (status !== 206) refusal = `it answered a range request with HTTP ${status}`;
    else if (readable && range === undefined)
      refusal = `its 206 answer has a Content-Range we do not read (${headers.get('content-range')})`;
    else if (reencoded(headers))
      refusal = `its answer is re-encoded (Content-Encoding: ${headers.get('content-encoding')})`;
    else if (range === undefined && contentLength(headers) === undefined)
      refusal = 'its 206 answer says neither which bytes it holds (Content-Range) nor how many (Content-Length)';
    const unsatisfied = status === 416 ? (readable ? (unsatisfiedTotal(headers) ?? -1) : 0) : undefined;
    return { ...sent, range, length: contentLength(headers), refusal, unsatisfied };
  };
  type Ranged = Awaited<ReturnType<typeof get>>;

  /** Reads exactly `length` body bytes, each piece of the body within the stall timeout. */
  const body = async (request: Ranged, offset: number, length: number): Promise<Uint8Array> => {
    const { response, controller, release } = request;
    const out = new Uint8Array(length);
    let filled = 0;
    const reader = response.body?.getReader();
    try {
      if (reader === undefined) throw sourceFailed('the ciphertext URL answered without a body');
      for (;;) {
        const next = await bounded(reader.read(), controller.signal, stallMs, () =>
          sourceFailed(
            `the ciphertext stopped arriving: nothing for ${seconds} after ${filled} of ${length} bytes at ${offset}`,
          ),
        );
        if (next.done) break;
        if (next.value.length > length - filled)
          throw sourceFailed(`the ciphertext URL sent more than the ${length} bytes asked for at ${offset}`);
        out.set(next.value, filled);
        filled += next.value.length;
      }
    } catch (cause) {
      throw cause instanceof PostGuardError
        ? cause
        : sourceFailed(`the ciphertext could not be read: ${describeThrown(cause)}`, cause);
    } finally {
      if (filled !== length || reader === undefined) controller.abort();
      await reader?.cancel().catch(() => undefined);
      release();
    }
    if (filled !== length)
      throw new FormatError(
        ErrorCode.TRUNCATED,
        `the ciphertext URL sent ${filled} of the ${length} bytes asked for at ${offset}`,
      );
    return out;
  };
  const drop = async (request: { response: Response; controller: AbortController; release: () => void }) => {
    request.controller.abort();
    await request.response.body?.cancel().catch(() => undefined);
    request.release();
  };

  /**
   * The file's size when no Content-Range is readable: the Content-Length of a HEAD, else of a
   * plain GET whose body is dropped as soon as its headers are in (a host may refuse HEAD).
   */
  const totalSize = async (): Promise<number | undefined> => {
    for (const method of ['HEAD', 'GET']) {
      let sent: Awaited<ReturnType<typeof send>>;
      try {
        sent = await send(undefined, undefined, method);
      } catch (error) {
        if (method === 'HEAD' && (error as PostGuardError).code === ErrorCode.SOURCE_FAILED) continue;
        throw error;
      }
      const { headers, status } = sent.response;
      await drop(sent);
      const total = status === 200 && !reencoded(headers) ? contentLength(headers) : undefined;
      if (total !== undefined) return total;
    }
    return undefined;
  };

  const probe = await get(0, PROBE_BYTES, undefined);
  if (probe.unsatisfied === 0) {
    // An empty file: no range of it exists. Its reads fail as the framing's (TRUNCATED/NOT_POSTGUARD).
    await drop(probe);
    return { source: { size: 0, read: () => Promise.resolve(new Uint8Array(0)) } };
  }
  if (probe.refusal !== undefined) {
    await drop(probe);
    return { refusal: probe.refusal };
  }
  if (probe.range !== undefined && probe.range.start !== 0) {
    await drop(probe);
    return { refusal: `it answered bytes ${probe.range.start}- to a request from 0` };
  }
  let size: number;
  let head: Uint8Array;
  if (probe.range !== undefined) {
    size = probe.range.total;
    const expected = Math.min(PROBE_BYTES, size);
    if (probe.range.end !== expected - 1) {
      await drop(probe);
      throw sourceFailed(
        `the ciphertext URL answered bytes 0-${probe.range.end}/${size} to a request for 0-${expected - 1}`,
      );
    }
    head = await body(probe, 0, expected);
  } else {
    // Cross-origin: the part's length is all a 206 shows; the file's comes from a request of its own.
    const part = probe.length!;
    if (part === 0 || part > PROBE_BYTES) {
      await drop(probe);
      throw sourceFailed(`the ciphertext URL answered ${part} bytes to a request for 0-${PROBE_BYTES - 1}`);
    }
    head = await body(probe, 0, part);
    const total = await totalSize();
    if (total === undefined)
      return { refusal: 'no Content-Range is readable and no plain request tells the file size (Content-Length)' };
    size = total;
    if (part !== Math.min(PROBE_BYTES, size))
      throw sourceFailed(
        `the ciphertext URL answered ${part} bytes to a request for 0-${PROBE_BYTES - 1} of a ${size}-byte file (the file changed?)`,
      );
  }
  const source: ByteSource = {
    size,
    async read(offset, length, signal) {
      if (offset + length <= head.length) return head.slice(offset, offset + length);
      const request = await get(offset, length, signal);
      const { range } = request;
      const continues =
        request.refusal === undefined &&
        (range === undefined
          ? request.length === length
          : range.start === offset && range.end === offset + length - 1 && range.total === size);
      if (!continues) {
        await drop(request);
        throw sourceFailed(
          request.refusal !== undefined
            ? `the ciphertext URL stopped answering ranges: ${request.refusal}`
            : range === undefined
              ? `the ciphertext URL answered ${request.length} bytes to a request for ${length} at ${offset} (the file changed?)`
              : `the ciphertext URL answered bytes ${range.start}-${range.end}/${range.total} to a request for ${offset}-${offset + length - 1}/${size} (the file changed?)`,
        );
      }
      return body(request, offset, length);
    },
  };
  SELF_BOUNDED.add(source);
  return { source };
}

/**
 * A URL as a source, read by `Range: bytes=a-b` requests; undefined when the server does not
 * answer ranges: a first request answered with anything but a 206 whose bytes are not re-encoded
 * (Content-Encoding). Fetch the whole file then (`StreamUnsealer`). Works cross-origin against a
 * host that exposes no header (Cryptify exposes only `cryptifytoken`): each answer is then judged
 * by its status and Content-Length, and the file's size is taken from a HEAD (or, where HEAD is
 * refused, a plain GET dropped once its headers are in); a readable Content-Range must agree.
 * Throws SOURCE_FAILED when a request fails or stalls, or an answer is not the span asked for (the
 * file changed), CANCELLED when `signal` aborts. The first request asks for 64 KiB (the framing of
 * most files), which later reads of those bytes reuse.
 */
export async function rangedUrlSource(
  url: string | URL,
  options: RangedUrlOptions = {},
): Promise<ByteSource | undefined> {
  return (await probeRangedUrl(url, options)).source;
}

/** A ByteSource's reads, bounded and checked: exactly the bytes asked for, or a typed error. */
function checkedReader(source: ByteSource, stallMs: number | undefined) {
  return async (offset: number, length: number, signal: AbortSignal | undefined): Promise<Uint8Array> => {
    if (length === 0) return new Uint8Array(0);
    if (offset + length > source.size)
      throw new FormatError(ErrorCode.TRUNCATED, `the ciphertext ends before byte ${offset + length}`);
    let bytes: unknown;
    try {
      bytes = await bounded(
        Promise.resolve().then(() => source.read(offset, length, signal)),
        signal,
        stallMs,
        () => sourceFailed(`the source did not answer within ${stallMs! / 1000} s (${length} bytes at ${offset})`),
      );
    } catch (cause) {
      throw cause instanceof PostGuardError
        ? cause
        : sourceFailed(`the source could not be read: ${describeThrown(cause)}`, cause);
    }
    if (!(bytes instanceof Uint8Array))
      throw sourceFailed(`the source answered ${length} bytes at ${offset} with something other than bytes`);
    if (bytes.length !== length)
      throw sourceFailed(
        `the source changed: ${length} bytes at ${offset} were asked for, ${bytes.length} came (it was ${source.size} bytes)`,
      );
    return bytes;
  };
}

function checkSource(source: ByteSource): void {
  if (source === null || typeof source !== 'object' || typeof source.read !== 'function')
    throw invalid('a source is { size, read(offset, length) }');
  if (!Number.isSafeInteger(source.size) || source.size < 0)
    throw invalid(`a source of ${String(source.size)} bytes cannot exist`);
}

/** The pieces of a span, grouped into runs of adjacent segments read in one request each. */
interface Run {
  pieces: SegmentPiece[];
  /** Ciphertext offset and length of the run's segments, or undefined for a cached one. */
  wire?: { offset: number; length: number };
}

/**
 * Opens a streaming ciphertext for random access (see the module comment for what it proves). The
 * source is a Blob or File, a URL (a string, a `URL`, or `{ url, headers, credentials, fetch }`:
 * SOURCE_FAILED when its server does not answer ranges, see {@link rangedUrlSource}), a file handle
 * (`{ fileHandle, size? }`, or a handle with `stat()`), or any {@link ByteSource}.
 *
 * Throws the framing's and header's typed errors, UNKNOWN_RECIPIENT, WRONG_KEY, WRONG_MODE (an
 * in-memory ciphertext), TRUNCATED (a file cut, at a segment boundary too), TAMPERED (segment 0
 * or the final segment damaged), SENDER_MISMATCH, SOURCE_FAILED, CANCELLED.
 */
export async function openRandomAccess(
  input: RandomAccessInput,
  options: RandomAccessOptions,
): Promise<RandomAccessFile> {
  if (options === null || typeof options !== 'object')
    throw invalid('options with vk, recipientId and usk are required');
  const stallMs = checkStall(options.stallMs);
  const { signal } = options;
  const source = await toSource(input, signal, stallMs);
  return openByteSource(source, options);
}

async function toSource(
  input: RandomAccessInput,
  signal: AbortSignal | undefined,
  stallMs: number,
): Promise<ByteSource> {
  if (typeof Blob !== 'undefined' && input instanceof Blob) return blobSource(input);
  if (typeof input === 'string' || (typeof URL !== 'undefined' && input instanceof URL))
    return urlOrFail(input, { signal, stallMs });
  if (input === null || typeof input !== 'object') throw invalid('not a ciphertext source');
  if ('url' in input) {
    const { url, ...fetching } = input;
    return urlOrFail(url, { ...fetching, signal, stallMs });
  }
  if ('fileHandle' in input)
    return bounded(fileHandleSource(input.fileHandle, input.size), signal, stallMs, () =>
      sourceFailed(`the file's size did not come within ${stallMs / 1000} s`),
    );
  const candidate = input as Partial<ByteSource> & Partial<FileHandleLike>;
  if (typeof candidate.read === 'function' && typeof candidate.size === 'number') return input as ByteSource;
  if (typeof candidate.read === 'function' && typeof candidate.stat === 'function')
    return bounded(fileHandleSource(input as FileHandleLike), signal, stallMs, () =>
      sourceFailed(`the file's size did not come within ${stallMs / 1000} s`),
    );
  throw invalid(
    'not a source to read a ciphertext from: a Blob, a URL, a file handle or { size, read(offset, length) }',
  );
}

async function urlOrFail(url: string | URL, options: RangedUrlOptions): Promise<ByteSource> {
  const probe = await probeRangedUrl(url, options);
  if (probe.source !== undefined) return probe.source;
  throw sourceFailed(
    `the ciphertext URL cannot be read by ranges: ${probe.refusal}; fetch the whole file instead (StreamUnsealer)`,
  );
}

/** {@link openRandomAccess} once its input is a {@link ByteSource}. */
async function openByteSource(source: ByteSource, options: RandomAccessOptions): Promise<RandomAccessFile> {
  if (options === null || typeof options !== 'object')
    throw invalid('options with vk, recipientId and usk are required');
  checkSource(source);
  const stallMs = checkStall(options.stallMs);
  const { signal } = options;
  const { vk, recipientId, usk } = options;
  const read = checkedReader(source, SELF_BOUNDED.has(source) ? undefined : stallMs);
  const size = source.size;

  const frame = await readFrame((offset, length) => read(offset, Math.max(0, Math.min(length, size - offset)), signal));
  const access = await openSegmentAccess(frame.header, frame.signature, vk, recipientId, usk);
  if (signal?.aborted) throw cancelled(signal);
  const layout = segmentLayout(size, frame.framingBytes, access.segmentSize);
  if (layout === undefined)
    throw new FormatError(
      ErrorCode.TRUNCATED,
      `a ciphertext of ${size} bytes does not end with a whole final segment: it was cut`,
    );

  /** Opens the segments of one run, read in one request. */
  const openRun = async (indices: readonly number[], wire: { offset: number; length: number }, s?: AbortSignal) => {
    const bytes = await read(wire.offset, wire.length, s);
    return Promise.all(
      indices.map((index) => {
        const span = wireSpan(layout, index);
        const at = span.offset - wire.offset;
        return openSegmentAlone(
          access.key,
          access.iv,
          index,
          isFinal(layout, index),
          bytes.subarray(at, at + span.length),
        );
      }),
    );
  };
  const finalIndex = layout.count - 1;
  const [first, last] = await Promise.all([
    openRun([0], wireSpan(layout, 0), signal).then(([region]) => region!),
    finalIndex === 0 ? undefined : openRun([finalIndex], wireSpan(layout, finalIndex), signal).then(([r]) => r!),
  ]);
  const { senderCopy, length: prefixBytes } = decodeSignerBlock(first);
  senderBound(senderCopy, access.publicPolicy); // a copy that differs is refused; an equal one proves nothing yet
  const total = messageBytes(layout, prefixBytes);
  if (total === undefined) throw malformed('the signer policy does not fit in segment 0');
  const cached = (index: number) => (index === 0 ? first : index === finalIndex ? (last ?? first) : undefined);
  const sender = policyToJs(access.publicPolicy);

  const span = (start: unknown, end: unknown): [number, number] => {
    const to = end === undefined ? total : end;
    if (!Number.isSafeInteger(start) || !Number.isSafeInteger(to))
      throw invalid('a span is two integer offsets into the plaintext');
    const [a, b] = [start as number, to as number];
    if (a < 0 || b < a || b > total)
      throw invalid(`bytes ${a} to ${b} (exclusive) are not within a plaintext of ${total} bytes`);
    return [a, b];
  };

  /**
   * The span's pieces in runs: cached segments alone, others grouped up to RUN_BYTES of ciphertext.
   * Pulled one run at a time, so what a span holds in memory before its first byte does not grow
   * with the span (a run of 1 MiB of 256-byte segments is some four thousand pieces; the whole span
   * planned up front was a quarter of a million for 64 MiB).
   */
  const plan = function* (start: number, end: number): Generator<Run, void, undefined> {
    if (start === end) return;
    let current: Run | undefined;
    for (const piece of rangePieces(layout, prefixBytes, start, end - 1)) {
      if (cached(piece.index) !== undefined) {
        if (current !== undefined) yield current;
        current = undefined;
        yield { pieces: [piece] };
        continue;
      }
      const wire = wireSpan(layout, piece.index);
      if (
        current?.wire !== undefined &&
        current.wire.length + wire.length <= RUN_BYTES &&
        current.pieces.length < RUN_SEGMENTS
      ) {
        current.pieces.push(piece);
        current.wire.length += wire.length;
      } else {
        if (current !== undefined) yield current;
        current = { pieces: [piece], wire: { ...wire } };
      }
    }
    if (current !== undefined) yield current;
  };

  async function* pieces(
    start: number,
    end: number | undefined,
    ...signals: (AbortSignal | undefined)[]
  ): AsyncGenerator<Uint8Array, void, undefined> {
    const [a, b] = span(start, end);
    const runs = plan(a, b);
    const { controller, release } = linked(signal, ...signals);
    const fetchRun = (run: Run): Promise<Uint8Array[]> =>
      run.wire === undefined
        ? Promise.resolve(run.pieces.map(({ index, from, to }) => cached(index)!.slice(from, to)))
        : openRun(
            run.pieces.map((p) => p.index),
            run.wire,
            controller.signal,
          ).then((regions) => regions.map((region, i) => region.subarray(run.pieces[i]!.from, run.pieces[i]!.to)));
    try {
      // One run read ahead of the one being handed out; the plan is pulled as the runs are read.
      const ahead = (): Promise<Uint8Array[]> | undefined => {
        const run = runs.next();
        return run.done === true ? undefined : quiet(fetchRun(run.value));
      };
      for (let current = ahead(); current !== undefined;) {
        const next = ahead();
        for (const piece of await current) yield piece;
        current = next;
      }
    } finally {
      controller.abort(); // a read ahead that nobody will take
      release();
    }
  }

  return {
    size: total,
    ciphertextSize: size,
    trust: 'segments-authenticated',
    sender,
    claimedSender: () => claimedSenderReport(sender, 'range'),
    range: (start, end, spanOptions) => pieces(start, end, spanOptions?.signal),
    async slice(start, end, spanOptions) {
      const [a, b] = span(start, end);
      const out = new Uint8Array(b - a);
      let at = 0;
      for await (const piece of pieces(a, b, spanOptions?.signal)) {
        out.set(piece, at);
        at += piece.length;
      }
      return out;
    },
    stream(start = 0, end, spanOptions) {
      const [a, b] = span(start, end);
      // Cancelling ends a read in flight at once (the generator's return would wait for it).
      const stop = new AbortController();
      const parts = pieces(a, b, spanOptions?.signal, stop.signal);
      return new ReadableStream<Uint8Array>({
        async pull(controller) {
          const next = await parts.next();
          if (next.done) controller.close();
          else controller.enqueue(next.value);
        },
        async cancel(reason) {
          stop.abort(reason);
          await parts.return();
        },
      });
    },
  };
}
