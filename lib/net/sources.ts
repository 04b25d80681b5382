import { ErrorCode, InputError, PostGuardError, describeThrown } from '../errors.js';
import type { RangedUrlFetch } from './request.js';

/**
 * The byte sources a ciphertext is read from at any offset: the general {@link ByteSource}, and
 * adapters of a Blob and a file handle onto it (a ranged URL's is ranged-url.ts). Nothing of Node
 * is imported: a file handle is typed by shape.
 */

/**
 * The general source: ciphertext bytes that can be read at any offset. Blobs, ranged URLs and
 * file handles are adapted onto it ({@link blobSource}, `rangedUrlSource`,
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

/** A URL source given to `openRandomAccess`: the URL and how to fetch it. */
export interface RangedUrl extends RangedUrlFetch {
  /** Where the ciphertext is; its server must answer `Range: bytes=a-b` with a 206 (see `rangedUrlSource`). */
  url: string | URL;
}

/** A file handle given to `openRandomAccess`, with its size when it has no `stat`. */
export interface FileHandleInput {
  /** The open file (the caller closes it). */
  fileHandle: FileHandleLike;
  /** Its size in bytes; default from `fileHandle.stat()`. */
  size?: number;
}

/** What `openRandomAccess` reads from. */
export type RandomAccessInput = Blob | string | URL | RangedUrl | FileHandleInput | FileHandleLike | ByteSource;

/** Sources that bound their own waits (a URL: per answer and per idle window of its body). */
const SELF_BOUNDED = new WeakSet<ByteSource>();

/** Marks `source` as one that bounds its own waits, so its reader adds no timer of its own. */
export function selfBounded(source: ByteSource): ByteSource {
  SELF_BOUNDED.add(source);
  return source;
}

/** Whether `source` bounds its own waits. */
export const isSelfBounded = (source: ByteSource): boolean => SELF_BOUNDED.has(source);

const invalid = (message: string) => new InputError(ErrorCode.INVALID_INPUT, message);

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
      throw new PostGuardError(ErrorCode.SOURCE_FAILED, `the file's size could not be read: ${describeThrown(cause)}`, {
        cause,
      });
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

/** Refuses what is not a {@link ByteSource} (INVALID_INPUT). */
export function checkSource(source: ByteSource): void {
  if (source === null || typeof source !== 'object' || typeof source.read !== 'function')
    throw invalid('a source is { size, read(offset, length) }');
  if (!Number.isSafeInteger(source.size) || source.size < 0)
    throw invalid(`a source of ${String(source.size)} bytes cannot exist`);
}
