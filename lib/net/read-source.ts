import { ErrorCode, FormatError, InputError, PostGuardError, describeThrown } from '../errors.js';
import { probeRangedUrl, type RangedUrlOptions } from './ranged-url.js';
import { sourceFailed } from './request.js';
import {
  blobSource,
  checkSource,
  fileHandleSource,
  isSelfBounded,
  type ByteSource,
  type FileHandleLike,
  type RandomAccessInput,
} from './sources.js';
import { bounded } from './waits.js';

/**
 * Any input a ciphertext is read from at any offset, made a {@link ByteSource}, and its reads
 * checked: exactly the bytes asked for, within the stall timeout and the caller's signal, or a
 * typed error.
 */

/** The source of `input` (a Blob, a URL, a file handle or a ByteSource), its opening bounded. */
export async function byteSourceOf(
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
  const sized = () => sourceFailed(`the file's size did not come within ${stallMs / 1000} s`);
  if ('fileHandle' in input) return bounded(fileHandleSource(input.fileHandle, input.size), signal, stallMs, sized);
  const candidate = input as Partial<ByteSource> & Partial<FileHandleLike>;
  if (typeof candidate.read === 'function' && typeof candidate.size === 'number') return input as ByteSource;
  if (typeof candidate.read === 'function' && typeof candidate.stat === 'function')
    return bounded(fileHandleSource(input as FileHandleLike), signal, stallMs, sized);
  throw invalid(
    'not a source to read a ciphertext from: a Blob, a URL, a file handle or { size, read(offset, length) }',
  );
}

const invalid = (message: string) => new InputError(ErrorCode.INVALID_INPUT, message);

async function urlOrFail(url: string | URL, options: RangedUrlOptions): Promise<ByteSource> {
  const probe = await probeRangedUrl(url, options);
  if (probe.source !== undefined) return probe.source;
  throw sourceFailed(
    `the ciphertext URL cannot be read by ranges: ${probe.refusal}; fetch the whole file instead (StreamUnsealer)`,
  );
}

/**
 * A ByteSource's reads, bounded and checked: exactly the bytes asked for, or a typed error. A source
 * that bounds its own waits (a URL) gets no timer of its own beside the signal.
 */
export function checkedReader(source: ByteSource, stallMs: number) {
  checkSource(source);
  const stall = isSelfBounded(source) ? undefined : stallMs;
  return async (offset: number, length: number, signal: AbortSignal | undefined): Promise<Uint8Array> => {
    if (length === 0) return new Uint8Array(0);
    if (offset + length > source.size)
      throw new FormatError(ErrorCode.TRUNCATED, `the ciphertext ends before byte ${offset + length}`);
    let bytes: unknown;
    try {
      bytes = await bounded(
        Promise.resolve().then(() => source.read(offset, length, signal)),
        signal,
        stall,
        () => sourceFailed(`the source did not answer within ${stallMs / 1000} s (${length} bytes at ${offset})`),
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
