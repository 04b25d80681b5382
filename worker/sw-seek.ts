import { ErrorCode, FormatError, PostGuardError, malformed } from '../lib/errors.js';
import { PREAMBLE_BYTES, parsePreamble, parseSignatureLength } from '../lib/frame.js';
import { decodeSignerBlock, senderBound } from '../lib/payload.js';
import { policyToJs, type Policy } from '../lib/policy.js';
import { openSegmentAlone } from '../lib/segments.js';
import { openSegmentAccess, type SegmentAccess } from '../lib/unseal.js';
import { isFinal, messageBytes, rangePieces, segmentLayout, wireSpan } from '../lib/segment-map.js';
import { withTimeout } from './sw-source.js';
import type { WireSource } from './sw-protocol.js';

/**
 * Random access into a registered ciphertext, for the service worker's Range requests (sw-core.ts):
 * a source that can read any span (a Blob, or a URL whose server answers ranges), and a file
 * opened on it whose plaintext ranges are decrypted from just the segments that hold them.
 *
 * What a range gives is weaker than a full download's answer (worker/README.md): every segment is
 * authenticated by AES-GCM under the file's key at its own position, and segment 0 and the final
 * segment are always opened (the prefix length, the true end), but the sender's signatures are
 * not verified, since each one signs the transcript of all the plaintext before it.
 */

export interface RandomAccessSource {
  /** Ciphertext bytes. */
  size: number;
  /** Exactly `length` bytes from `offset`. */
  read(offset: number, length: number): Promise<Uint8Array>;
}

/** What the first request of a URL source asks for: the framing of most files, and segment 0's start. */
const PROBE_BYTES = 64 * 1024;

const CONTENT_RANGE = /^bytes (\d+)-(\d+)\/(\d+)$/;

const sourceFailed = (message: string, cause?: unknown) =>
  new PostGuardError(ErrorCode.SOURCE_FAILED, message, cause === undefined ? undefined : { cause });

/**
 * Opens `source` for random access; undefined when it cannot seek: a stream, or a URL whose server
 * does not answer a byte range with a 206 whose Content-Range it lets us read (a cross-origin host
 * must expose Content-Range) and whose bytes are not re-encoded (Content-Encoding).
 */
export async function randomAccess(
  source: WireSource,
  doFetch: typeof fetch,
  signal: AbortSignal,
  stallMs: number,
): Promise<RandomAccessSource | undefined> {
  if (source.kind === 'blob') {
    const { blob } = source;
    return {
      size: blob.size,
      async read(offset, length) {
        const bytes = new Uint8Array(await blob.slice(offset, offset + length).arrayBuffer());
        if (bytes.length !== length)
          throw sourceFailed(`the file changed: ${length} bytes at ${offset} are not there any more`);
        return bytes;
      },
    };
  }
  if (source.kind !== 'url') return undefined;

  /** One ranged GET: the response, and its Content-Range when the server answered with one. */
  const get = async (offset: number, length: number) => {
    let response: Response;
    try {
      response = await withTimeout(
        doFetch(source.url, {
          headers: { ...(source.headers ?? {}), range: `bytes=${offset}-${offset + length - 1}` },
          credentials: source.credentials ?? 'same-origin',
          signal,
        }),
        stallMs,
        () => sourceFailed(`the ciphertext URL did not answer within ${stallMs / 1000} s`),
      );
    } catch (cause) {
      throw cause instanceof PostGuardError
        ? cause
        : sourceFailed(`the ciphertext could not be fetched: ${String(cause)}`, cause);
    }
    const match = CONTENT_RANGE.exec(response.headers.get('content-range') ?? '');
    const encoded = (response.headers.get('content-encoding') ?? 'identity') !== 'identity';
    const range =
      response.status === 206 && match !== null && !encoded
        ? { start: Number(match[1]), end: Number(match[2]), total: Number(match[3]) }
        : undefined;
    return { response, range };
  };
  const body = async (response: Response, offset: number, length: number): Promise<Uint8Array> => {
    let bytes: Uint8Array;
    try {
      bytes = new Uint8Array(
        await withTimeout(response.arrayBuffer(), stallMs, () =>
          sourceFailed(`the ciphertext stopped arriving: ${length} bytes at ${offset} took over ${stallMs / 1000} s`),
        ),
      );
    } catch (cause) {
      await response.body?.cancel().catch(() => undefined);
      throw cause instanceof PostGuardError
        ? cause
        : sourceFailed(`the ciphertext could not be read: ${String(cause)}`, cause);
    }
    if (bytes.length !== length)
      throw new PostGuardError(
        ErrorCode.TRUNCATED,
        `the ciphertext URL sent ${bytes.length} of the ${length} bytes asked for at ${offset}`,
      );
    return bytes;
  };

  const probe = await get(0, PROBE_BYTES);
  if (probe.range === undefined || probe.range.start !== 0) {
    // A 200 (no range support), an unreadable Content-Range, or an error: not seekable. sw-core.ts
    // then serves the whole file, fetching it afresh, and reports any error from that fetch.
    await probe.response.body?.cancel().catch(() => undefined);
    return undefined;
  }
  const size = probe.range.total;
  const head = await body(probe.response, 0, Math.min(PROBE_BYTES, size));
  return {
    size,
    async read(offset, length) {
      if (offset + length <= head.length) return head.slice(offset, offset + length);
      const { response, range } = await get(offset, length);
      if (range === undefined || range.start !== offset || range.end !== offset + length - 1 || range.total !== size) {
        await response.body?.cancel().catch(() => undefined);
        throw sourceFailed(
          range === undefined
            ? `the ciphertext URL stopped answering ranges (HTTP ${response.status})`
            : `the ciphertext URL answered bytes ${range.start}-${range.end}/${range.total} to a request for ${offset}-${offset + length - 1}/${size}`,
        );
      }
      return body(response, offset, length);
    },
  };
}

/** A ciphertext opened for random access: its plaintext length, its claimed sender, and ranges of it. */
export interface SeekableFile {
  /** Message (plaintext) bytes. */
  total: number;
  /**
   * The sender the header names: a claim (its header signature verified, the content's signatures
   * not). Segment 0's sender copy is checked against it (SENDER_MISMATCH), but that copy is only
   * authenticated under the file's key, which every recipient holds, so it settles nothing here.
   */
  sender: Policy;
  /** Message bytes start..end (inclusive), one authenticated piece per segment, decrypted as they are asked for. */
  range(start: number, end: number): AsyncGenerator<Uint8Array, void, undefined>;
}

/**
 * Reads the framing, verifies the header signature, opens the key, then segment 0 (the prefix's
 * length, the sender sealed inside) and the final segment (the end really is the end: a file cut
 * at a segment boundary fails here, as its last segment is not marked final). Both stay cached:
 * media elements come back to the start and the end (headers, indexes) again and again.
 */
export async function openSeekable(
  source: RandomAccessSource,
  vk: string,
  recipientId: string,
  usk: string,
): Promise<SeekableFile> {
  if (source.size < PREAMBLE_BYTES) {
    // parsePreamble tells a short file that starts like PostGuard (TRUNCATED) from anything else.
    parsePreamble(await source.read(0, source.size));
    throw new FormatError(ErrorCode.TRUNCATED, 'the ciphertext ends inside its preamble');
  }
  const headerBytes = parsePreamble(await source.read(0, PREAMBLE_BYTES));
  const signatureField = PREAMBLE_BYTES + headerBytes;
  const within = (end: number, what: string) => {
    if (end > source.size) throw new FormatError(ErrorCode.TRUNCATED, `the ciphertext ends inside ${what}`);
  };
  within(signatureField + 4, 'its header');
  const signatureBytes = parseSignatureLength(await source.read(signatureField, 4));
  const framingBytes = signatureField + 4 + signatureBytes;
  within(framingBytes, 'its header signature');
  const access: SegmentAccess = await openSegmentAccess(
    await source.read(PREAMBLE_BYTES, headerBytes),
    await source.read(signatureField + 4, signatureBytes),
    vk,
    recipientId,
    usk,
  );
  const layout = segmentLayout(source.size, framingBytes, access.segmentSize);
  if (layout === undefined)
    throw new FormatError(
      ErrorCode.TRUNCATED,
      `a ciphertext of ${source.size} bytes does not end with a whole final segment: it was cut`,
    );

  const open = async (index: number): Promise<Uint8Array> => {
    const { offset, length } = wireSpan(layout, index);
    return openSegmentAlone(access.key, access.iv, index, isFinal(layout, index), await source.read(offset, length));
  };
  const first = await open(0);
  const { senderCopy, length: prefixBytes } = decodeSignerBlock(first);
  senderBound(senderCopy, access.publicPolicy); // a copy that differs is refused; an equal one proves nothing yet
  const last = layout.count === 1 ? first : await open(layout.count - 1);
  const total = messageBytes(layout, prefixBytes);
  if (total === undefined) throw malformed('the signer policy does not fit in segment 0');
  const cached = (index: number) => (index === 0 ? first : isFinal(layout, index) ? last : undefined);

  return {
    total,
    sender: policyToJs(access.publicPolicy),
    async *range(start, end) {
      for (const { index, from, to } of rangePieces(layout, prefixBytes, start, end)) {
        const region = cached(index);
        // A cached region is copied: the response's reader may keep (or transfer) what it is given.
        yield region !== undefined ? region.slice(from, to) : (await open(index)).subarray(from, to);
      }
    },
  };
}
