import { ErrorCode, FormatError, InputError, malformed } from './errors.js';
import { readFrame } from './frame.js';
import { byteSourceOf, checkedReader } from './net/read-source.js';
import type { ByteSource, RandomAccessInput } from './net/sources.js';
import { DEFAULT_STALL_MS, cancelledBy, linked, stallOption } from './net/waits.js';
import { decodeSignerBlock, senderBound } from './payload.js';
import { policyToJs, type Policy } from './policy.js';
import {
  isFinal,
  messageBytes,
  rangePieces,
  segmentLayout,
  wireSpan,
  type SegmentLayout,
  type SegmentPiece,
} from './segment-map.js';
import { openSegmentAlone } from './segments.js';
import { claimedSenderReport, type SenderReport } from './sender.js';
import { openSegmentAccess, type SegmentAccess, type UserKeys, type VerifyingKeys } from './unseal.js';

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

// The sources it reads are lib/net's (Blob, ranged URL, file handle): public from here too.
export { blobSource, fileHandleSource } from './net/sources.js';
export type { ByteSource, FileHandleInput, FileHandleLike, RandomAccessInput, RangedUrl } from './net/sources.js';
export { rangedUrlSource, type RangedUrlOptions } from './net/ranged-url.js';
export type { RangedUrlFetch } from './net/request.js';

/** Ciphertext read in one request of the source at most (unless one segment is larger). */
const RUN_BYTES = 1024 * 1024;

/**
 * Segments read in one request at most: with tiny segments a run's pieces, not its bytes, are what
 * it costs in memory (4096 segments of 256 bytes make a full RUN_BYTES run).
 */
const RUN_SEGMENTS = 4096;

const cancelled = (signal: AbortSignal) => cancelledBy(signal);

const invalid = (message: string) => new InputError(ErrorCode.INVALID_INPUT, message);

/** Swallows a rejection that a later `await` of the same promise will report (or nobody wants). */
const quiet = <T>(p: Promise<T>): Promise<T> => {
  p.catch(() => undefined);
  return p;
};

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
  const stallMs = stallOption(options.stallMs);
  const source = await byteSourceOf(input, options.signal, stallMs);
  return openByteSource(source, options);
}

/** An opened file: what every span of it reads with. */
interface Opened {
  read: ReturnType<typeof checkedReader>;
  layout: SegmentLayout;
  key: SegmentAccess['key'];
  iv: SegmentAccess['iv'];
  /** Segment 0 and the final segment, opened at the start and kept. */
  first: Uint8Array;
  last: Uint8Array | undefined;
  prefixBytes: number;
  /** Plaintext bytes. */
  total: number;
  /** The reader's own signal (options.signal). */
  signal: AbortSignal | undefined;
}

/** Opens the segments `indices` of one run, read in one request. */
async function openRun(
  file: Pick<Opened, 'read' | 'layout' | 'key' | 'iv'>,
  indices: readonly number[],
  wire: { offset: number; length: number },
  signal: AbortSignal | undefined,
): Promise<Uint8Array[]> {
  const bytes = await file.read(wire.offset, wire.length, signal);
  return Promise.all(
    indices.map((index) => {
      const span = wireSpan(file.layout, index);
      const at = span.offset - wire.offset;
      const final = isFinal(file.layout, index);
      return openSegmentAlone(file.key, file.iv, index, final, bytes.subarray(at, at + span.length));
    }),
  );
}

/** The segment `index` when it is kept (segment 0, the final one), else undefined. */
const cached = (file: Opened, index: number) =>
  index === 0 ? file.first : index === file.layout.count - 1 ? (file.last ?? file.first) : undefined;

/** `start`..`end` (exclusive; default the end) checked against a plaintext of `total` bytes. */
function spanOf(total: number, start: unknown, end: unknown): [number, number] {
  const to = end === undefined ? total : end;
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(to))
    throw invalid('a span is two integer offsets into the plaintext');
  const [a, b] = [start as number, to as number];
  if (a < 0 || b < a || b > total)
    throw invalid(`bytes ${a} to ${b} (exclusive) are not within a plaintext of ${total} bytes`);
  return [a, b];
}

/**
 * The span's pieces in runs: cached segments alone, others grouped up to RUN_BYTES of ciphertext.
 * Pulled one run at a time, so what a span holds in memory before its first byte does not grow
 * with the span (a run of 1 MiB of 256-byte segments is some four thousand pieces; the whole span
 * planned up front was a quarter of a million for 64 MiB).
 */
function* plan(file: Opened, start: number, end: number): Generator<Run, void, undefined> {
  if (start === end) return;
  let current: Run | undefined;
  for (const piece of rangePieces(file.layout, file.prefixBytes, start, end - 1)) {
    if (cached(file, piece.index) !== undefined) {
      if (current !== undefined) yield current;
      current = undefined;
      yield { pieces: [piece] };
      continue;
    }
    const wire = wireSpan(file.layout, piece.index);
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
}

/** A run's plaintext pieces: from the cache, or read and opened. */
function fetchRun(file: Opened, run: Run, signal: AbortSignal): Promise<Uint8Array[]> {
  if (run.wire === undefined)
    return Promise.resolve(run.pieces.map(({ index, from, to }) => cached(file, index)!.slice(from, to)));
  const indices = run.pieces.map((p) => p.index);
  return openRun(file, indices, run.wire, signal).then((regions) =>
    regions.map((region, i) => region.subarray(run.pieces[i]!.from, run.pieces[i]!.to)),
  );
}

/** The span's authenticated pieces, one run read ahead of the one handed out. */
async function* pieces(
  file: Opened,
  start: number,
  end: number | undefined,
  ...signals: (AbortSignal | undefined)[]
): AsyncGenerator<Uint8Array, void, undefined> {
  const [a, b] = spanOf(file.total, start, end);
  const runs = plan(file, a, b);
  const { controller, release } = linked(file.signal, ...signals);
  try {
    // The plan is pulled as the runs are read.
    const ahead = (): Promise<Uint8Array[]> | undefined => {
      const run = runs.next();
      return run.done === true ? undefined : quiet(fetchRun(file, run.value, controller.signal));
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

/** The public face of an opened file. */
function fileReader(file: Opened, ciphertextSize: number, sender: Policy): RandomAccessFile {
  return {
    size: file.total,
    ciphertextSize,
    trust: 'segments-authenticated',
    sender,
    claimedSender: () => claimedSenderReport(sender, 'range'),
    range: (start, end, spanOptions) => pieces(file, start, end, spanOptions?.signal),
    async slice(start, end, spanOptions) {
      const [a, b] = spanOf(file.total, start, end);
      const out = new Uint8Array(b - a);
      let at = 0;
      for await (const piece of pieces(file, a, b, spanOptions?.signal)) {
        out.set(piece, at);
        at += piece.length;
      }
      return out;
    },
    stream(start = 0, end, spanOptions) {
      const [a, b] = spanOf(file.total, start, end);
      // Cancelling ends a read in flight at once (the generator's return would wait for it).
      const stop = new AbortController();
      const parts = pieces(file, a, b, spanOptions?.signal, stop.signal);
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

/** {@link openRandomAccess} once its input is a {@link ByteSource}. */
async function openByteSource(source: ByteSource, options: RandomAccessOptions): Promise<RandomAccessFile> {
  if (options === null || typeof options !== 'object')
    throw invalid('options with vk, recipientId and usk are required');
  const { signal, vk, recipientId, usk } = options;
  const read = checkedReader(source, stallOption(options.stallMs));
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
  const segments = { read, layout, key: access.key, iv: access.iv };
  const finalIndex = layout.count - 1;
  const [first, last] = await Promise.all([
    openRun(segments, [0], wireSpan(layout, 0), signal).then(([region]) => region!),
    finalIndex === 0
      ? undefined
      : openRun(segments, [finalIndex], wireSpan(layout, finalIndex), signal).then(([r]) => r!),
  ]);
  const { senderCopy, length: prefixBytes } = decodeSignerBlock(first);
  senderBound(senderCopy, access.publicPolicy); // a copy that differs is refused; an equal one proves nothing yet
  const total = messageBytes(layout, prefixBytes);
  if (total === undefined) throw malformed('the signer policy does not fit in segment 0');
  const file: Opened = { ...segments, first, last, prefixBytes, total, signal };
  return fileReader(file, size, policyToJs(access.publicPolicy));
}
