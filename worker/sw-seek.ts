import type { Policy } from '../lib/policy.js';
import { blobSource, openRandomAccess, rangedUrlSource, type ByteSource } from '../lib/random-access.js';
import type { WireSource } from './sw-protocol.js';

/**
 * Random access into a registered ciphertext, for the service worker's Range requests (sw-core.ts):
 * thin wrappers over the library's random access (lib/random-access.ts), which reads any span of a
 * Blob or of a URL whose server answers ranges, and decrypts plaintext ranges from just the
 * segments that hold them.
 *
 * What a range gives is weaker than a full download's answer (worker/README.md): every segment is
 * authenticated by AES-GCM under the file's key at its own position, and segment 0 and the final
 * segment are always opened (the prefix length, the true end), but the sender's signatures are
 * not verified, since each one signs the transcript of all the plaintext before it.
 */

/** A source that reads any span: the library's {@link ByteSource}. */
export type RandomAccessSource = ByteSource;

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
  if (source.kind === 'blob') return blobSource(source.blob);
  if (source.kind !== 'url') return undefined;
  return rangedUrlSource(source.url, {
    ...(source.headers !== undefined ? { headers: source.headers } : {}),
    credentials: source.credentials ?? 'same-origin',
    fetch: doFetch,
    signal,
    stallMs,
  });
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
  const file = await openRandomAccess(source, { vk, recipientId, usk });
  return { total: file.size, sender: file.sender, range: (start, end) => file.range(start, end + 1) };
}
