import type { RandomAccessFile } from '../lib/random-access.js';
import { crc32Update } from './crc32.js';
import { ClientError, ClientErrorCode, invalidInput } from './errors.js';
import { decodeZipName, displayName } from './zip-names.js';

/**
 * The entries of a ZIP bundle read in place, so one file of a bundle can be listed, saved or
 * previewed without unpacking the rest. The bundle is random-access plaintext: authenticated, but
 * still the sender's bytes, so every offset, length and count in it is checked against the bytes
 * that exist and against caps before anything is read or allocated, and each entry's CRC-32 is
 * checked before its stream closes.
 *
 * Reads: the tail (at most 65 557 bytes: the end record and the longest comment), the ZIP64 records
 * when the tail does not hold them, and the central directory in one read when the tail does not
 * hold it either. An entry costs its local header and its bytes.
 */

/** Bytes that can be read at any offset: a bundle's plaintext. */
export interface ZipReadable {
  /** Bytes in the bundle. */
  readonly size: number;
  /**
   * Exactly `length` bytes from `offset`. Any other length is read as a damaged bundle. `signal`
   * aborts when the bytes are no longer wanted; the reader stops waiting then in any case.
   */
  read(offset: number, length: number, signal?: AbortSignal): Promise<Uint8Array>;
}

/** One entry of a bundle, as its central directory describes it. */
export interface ZipEntry {
  /** A name safe to show or save under: the path's last segment, without control or bidi characters. */
  name: string;
  /** The name as stored: the sender's, possibly with folders, `..` or control characters. Never a save path. */
  path: string;
  /** Bytes of the file. */
  size: number;
  /** Bytes of the entry's data in the bundle (equal to `size` for a stored entry). */
  compressedSize: number;
  /** Compression method: 0 is stored, the only one read here. */
  method: number;
  /** CRC-32 of the file's bytes, checked by {@link zipEntryStream}. */
  crc32: number;
  /** Where the entry's local header starts in the bundle. */
  offset: number;
  /** Where the bundle's central directory starts: no entry's data may reach it. */
  centralDirectoryOffset: number;
  /** Modification time (the ZIP stores it in the sender's local time), when it is a valid date. */
  lastModified?: Date;
  /** A folder rather than a file. */
  directory: boolean;
  /** Stored (not compressed) and not encrypted: {@link zipEntryStream} can read it. */
  supported: boolean;
}

/** Options of {@link listZipEntries}. */
export interface ListZipEntriesOptions {
  /** Ends the listing with ABORTED. */
  signal?: AbortSignal;
  /** More entries than this is BUNDLE_INVALID (default {@link DEFAULT_MAX_ZIP_ENTRIES}). */
  maxEntries?: number;
  /** A larger central directory is BUNDLE_INVALID, before it is read (default {@link DEFAULT_MAX_CENTRAL_DIRECTORY_BYTES}). */
  maxCentralDirectoryBytes?: number;
}

/** Options of {@link zipEntryStream}. */
export interface ZipEntryStreamOptions {
  /** Errors the stream with ABORTED and stops reading. */
  signal?: AbortSignal;
}

/** The default cap on a bundle's entries. */
export const DEFAULT_MAX_ZIP_ENTRIES = 10_000;
/** The default cap on a bundle's central directory: 64 MiB. */
export const DEFAULT_MAX_CENTRAL_DIRECTORY_BYTES = 64 * 1024 * 1024;

const EOCD_SIGNATURE = 0x06054b50;
const EOCD_BYTES = 22;
const MAX_COMMENT_BYTES = 0xffff;
/** The end record can only sit this far from the end: itself plus the longest comment. */
const TAIL_BYTES = EOCD_BYTES + MAX_COMMENT_BYTES;
const LOCATOR_SIGNATURE = 0x07064b50;
const LOCATOR_BYTES = 20;
const EOCD64_SIGNATURE = 0x06064b50;
const EOCD64_BYTES = 56;
const CENTRAL_SIGNATURE = 0x02014b50;
const CENTRAL_BYTES = 46;
const LOCAL_SIGNATURE = 0x04034b50;
const LOCAL_BYTES = 30;
const ZIP64_EXTRA = 0x0001;
/** General-purpose flags: bit 0 encrypted, bit 6 strong encryption, bit 3 sizes in a trailing descriptor, bit 11 UTF-8 name. */
const FLAG_ENCRYPTED = 0x0001 | 0x0040;
const FLAG_DESCRIPTOR = 0x0008;
const FLAG_UTF8 = 0x0800;
const U16_MAX = 0xffff;
const U32_MAX = 0xffffffff;
/** Largest single read of an entry's bytes, so a large entry streams with bounded memory. */
const PIECE_BYTES = 1024 * 1024;

const invalid = (message: string) => new ClientError(ClientErrorCode.BUNDLE_INVALID, message);

const aborted = (signal: AbortSignal) =>
  new ClientError(ClientErrorCode.ABORTED, 'reading the bundle was aborted', { cause: signal.reason });

const quoted = (path: unknown) => {
  const text = String(path);
  return JSON.stringify(text.length > 80 ? `${text.slice(0, 80)}…` : text);
};

const isSize = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;

function checkReadable(file: ZipReadable): void {
  if (typeof file !== 'object' || file === null || typeof file.read !== 'function' || !isSize(file.size)) {
    throw invalidInput('the bundle must be { size, read(offset, length, signal) } with a whole, non-negative size');
  }
}

function positive(value: number | undefined, fallback: number, what: string): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value <= 0) throw invalidInput(`${what} must be a positive whole number`);
  return value;
}

/**
 * Reads exactly `length` bytes at `offset`, or fails typed: ABORTED as soon as `signal` fires (a
 * source that ignores its signal is not waited for), BUNDLE_INVALID for a short or long answer;
 * the source's own errors pass through as they are.
 */
async function readExact(
  file: ZipReadable,
  offset: number,
  length: number,
  signal: AbortSignal | undefined,
): Promise<Uint8Array> {
  if (signal === undefined) return checkLength(await file.read(offset, length), offset, length);
  if (signal.aborted) throw aborted(signal);
  let onAbort = () => {};
  const abort = new Promise<never>((_, reject) => {
    onAbort = () => reject(aborted(signal));
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return checkLength(await Promise.race([file.read(offset, length, signal), abort]), offset, length);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

function checkLength(bytes: unknown, offset: number, length: number): Uint8Array {
  if (!(bytes instanceof Uint8Array) || bytes.length !== length) {
    const got = bytes instanceof Uint8Array ? `${bytes.length} bytes` : 'no bytes';
    throw invalid(`reading ${length} bytes at ${offset} of the bundle gave ${got}`);
  }
  return bytes;
}

const view = (bytes: Uint8Array) => new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);

/** A 64-bit field as a number, refused beyond 2^53 (no bundle that large exists to read). */
function u64(data: DataView, at: number, what: string): number {
  const value = data.getBigUint64(at, true);
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw invalid(`${what} is out of range (${value})`);
  return Number(value);
}

/**
 * Where the end-of-central-directory record starts in `tail`, or -1. Scanned backwards from the
 * last place one fits, so the first hit is the record nearest the end; a hit counts only when its
 * comment length reaches exactly the end of the bundle. One pass, constant work per byte.
 */
export function findEndRecord(tail: Uint8Array): number {
  const data = view(tail);
  for (let at = tail.length - EOCD_BYTES; at >= 0; at--) {
    if (tail[at] !== 0x50 || data.getUint32(at, true) !== EOCD_SIGNATURE) continue;
    if (at + EOCD_BYTES + data.getUint16(at + 20, true) === tail.length) return at;
  }
  return -1;
}

/** Where the central directory is, as the end records (ZIP64 or not) state it and the bounds allow. */
interface Directory {
  offset: number;
  size: number;
  entries: number;
}

/**
 * Lists the bundle's entries from its central directory, in directory order. Throws a
 * {@link ClientError}: BUNDLE_INVALID for anything that is not a well-formed single-disk ZIP within
 * the caps, ABORTED when `signal` fires, INVALID_INPUT for bad arguments; the source's own errors
 * (a PostGuardError from the decrypting reader, say) pass through.
 */
export async function listZipEntries(file: ZipReadable, options: ListZipEntriesOptions = {}): Promise<ZipEntry[]> {
  checkReadable(file);
  const maxEntries = positive(options.maxEntries, DEFAULT_MAX_ZIP_ENTRIES, 'maxEntries');
  const maxDirectory = positive(
    options.maxCentralDirectoryBytes,
    DEFAULT_MAX_CENTRAL_DIRECTORY_BYTES,
    'maxCentralDirectoryBytes',
  );
  const { signal } = options;
  if (file.size < EOCD_BYTES) throw invalid(`a bundle of ${file.size} bytes is too short to be a ZIP`);

  const tailStart = file.size - Math.min(file.size, TAIL_BYTES);
  const tail = await readExact(file, tailStart, file.size - tailStart, signal);
  // Records before the tail cost a read of their own; those inside it are already here.
  const bytesAt = (offset: number, length: number) =>
    offset >= tailStart
      ? Promise.resolve(tail.subarray(offset - tailStart, offset - tailStart + length))
      : readExact(file, offset, length, signal);

  const found = findEndRecord(tail);
  if (found < 0) throw invalid('no end of central directory record in the last 64 KiB of the bundle');
  const endAt = tailStart + found;
  const directory = await locateDirectory(view(tail.subarray(found, found + EOCD_BYTES)), endAt, bytesAt);

  if (directory.entries > maxEntries) {
    throw invalid(`the bundle states ${directory.entries} entries, over the limit of ${maxEntries}`);
  }
  if (directory.size > maxDirectory) {
    throw invalid(`the central directory is ${directory.size} bytes, over the limit of ${maxDirectory}`);
  }
  if (directory.entries * CENTRAL_BYTES > directory.size) {
    throw invalid(`${directory.entries} entries cannot fit in a central directory of ${directory.size} bytes`);
  }
  const records = await bytesAt(directory.offset, directory.size);
  return parseDirectory(records, directory);
}

/**
 * Reads the end record (and the ZIP64 locator and record when present) into where the central
 * directory is, checked: one disk, counts that agree, and the directory wholly before the end
 * records.
 */
async function locateDirectory(
  end: DataView,
  endAt: number,
  bytesAt: (offset: number, length: number) => Promise<Uint8Array>,
): Promise<Directory> {
  const disk = end.getUint16(4, true);
  const directoryDisk = end.getUint16(6, true);
  const entriesOnDisk = end.getUint16(8, true);
  const entries = end.getUint16(10, true);
  const size = end.getUint32(12, true);
  const offset = end.getUint32(16, true);
  if (disk !== 0 || directoryDisk !== 0 || entriesOnDisk !== entries) {
    throw invalid('the bundle spans several disks (a split archive), which is not read');
  }

  const locator = endAt >= LOCATOR_BYTES ? view(await bytesAt(endAt - LOCATOR_BYTES, LOCATOR_BYTES)) : undefined;
  if (locator === undefined || locator.getUint32(0, true) !== LOCATOR_SIGNATURE) {
    if (offset + size > endAt) throw invalid(`the central directory (${size} bytes at ${offset}) runs past its end`);
    return { offset, size, entries };
  }

  const locatorAt = endAt - LOCATOR_BYTES;
  if (locator.getUint32(4, true) !== 0 || locator.getUint32(16, true) > 1) {
    throw invalid('the bundle spans several disks (a split archive), which is not read');
  }
  const recordAt = u64(locator, 8, 'the ZIP64 end record offset');
  if (recordAt + EOCD64_BYTES > locatorAt) throw invalid(`the ZIP64 end record offset ${recordAt} is out of bounds`);
  const record = view(await bytesAt(recordAt, EOCD64_BYTES));
  if (record.getUint32(0, true) !== EOCD64_SIGNATURE) throw invalid(`no ZIP64 end record at ${recordAt}`);
  // The record's own size counts from after its first 12 bytes; extensible data may follow the 56.
  if (recordAt + 12 + u64(record, 4, 'the ZIP64 end record size') > locatorAt) {
    throw invalid('the ZIP64 end record runs past its locator');
  }
  if (record.getUint32(16, true) !== 0 || record.getUint32(20, true) !== 0) {
    throw invalid('the bundle spans several disks (a split archive), which is not read');
  }
  const entries64 = u64(record, 32, 'the entry count');
  const directory = {
    entries: entries64,
    size: u64(record, 40, 'the central directory size'),
    offset: u64(record, 48, 'the central directory offset'),
  };
  if (u64(record, 24, 'the entry count on this disk') !== entries64) {
    throw invalid('the bundle spans several disks (a split archive), which is not read');
  }
  // The 32-bit fields hold either the value itself or the "see ZIP64" sentinel: anything else is a
  // bundle whose two end records disagree, so neither can be believed.
  const agrees = (small: number, sentinel: number, large: number) => small === sentinel || small === large;
  if (
    !agrees(entries, U16_MAX, directory.entries) ||
    !agrees(size, U32_MAX, directory.size) ||
    !agrees(offset, U32_MAX, directory.offset)
  ) {
    throw invalid('the end record and the ZIP64 end record disagree');
  }
  if (directory.offset + directory.size > recordAt) {
    throw invalid(`the central directory (${directory.size} bytes at ${directory.offset}) runs past its end`);
  }
  return directory;
}

/** The directory's records, each checked against the bytes it stands in and the entries before the directory. */
function parseDirectory(records: Uint8Array, directory: Directory): ZipEntry[] {
  const data = view(records);
  const entries: ZipEntry[] = [];
  let at = 0;
  for (let i = 0; i < directory.entries; i++) {
    if (at + CENTRAL_BYTES > records.length) throw invalid(`central directory record ${i} runs past the directory`);
    if (data.getUint32(at, true) !== CENTRAL_SIGNATURE) throw invalid(`no central directory record ${i} at ${at}`);
    const nameLength = data.getUint16(at + 28, true);
    const extraLength = data.getUint16(at + 30, true);
    const commentLength = data.getUint16(at + 32, true);
    const next = at + CENTRAL_BYTES + nameLength + extraLength + commentLength;
    if (next > records.length) throw invalid(`central directory record ${i} runs past the directory`);
    const nameStart = at + CENTRAL_BYTES;
    const extra = records.subarray(nameStart + nameLength, nameStart + nameLength + extraLength);
    entries.push(parseRecord(data, at, records.subarray(nameStart, nameStart + nameLength), extra, directory, i));
    at = next;
  }
  if (at !== records.length) {
    throw invalid(`the central directory has ${records.length - at} bytes after its ${directory.entries} records`);
  }
  return entries;
}

function parseRecord(
  data: DataView,
  at: number,
  nameBytes: Uint8Array,
  extra: Uint8Array,
  directory: Directory,
  index: number,
): ZipEntry {
  const host = data.getUint8(at + 5);
  const flags = data.getUint16(at + 8, true);
  const method = data.getUint16(at + 10, true);
  const external = data.getUint32(at + 38, true);
  const path = decodeZipName(nameBytes, (flags & FLAG_UTF8) !== 0);
  const which = `entry ${index} (${quoted(path)})`;

  // ZIP64 values replace exactly the fields that hold the sentinel, in this order.
  const wide = zip64Field(extra, which);
  let wideAt = 0;
  const field = (value: number, sentinel: number, what: string) => {
    if (value !== sentinel) return value;
    if (wide === undefined || wideAt + 8 > wide.byteLength)
      throw invalid(`${which}: ${what} is missing its ZIP64 value`);
    const wideValue = u64(wide, wideAt, `${which}: ${what}`);
    wideAt += 8;
    return wideValue;
  };
  const size = field(data.getUint32(at + 24, true), U32_MAX, 'the size');
  const compressedSize = field(data.getUint32(at + 20, true), U32_MAX, 'the compressed size');
  const offset = field(data.getUint32(at + 42, true), U32_MAX, 'the offset');
  if (data.getUint16(at + 34, true) === U16_MAX) {
    if (wide === undefined || wideAt + 4 > wide.byteLength)
      throw invalid(`${which}: the disk is missing its ZIP64 value`);
    if (wide.getUint32(wideAt, true) !== 0) throw invalid(`${which} is on another disk`);
  } else if (data.getUint16(at + 34, true) !== 0) {
    throw invalid(`${which} is on another disk`);
  }

  // Its local header and its data must both lie before the directory; the data's exact start,
  // which depends on the local header's own name and extra lengths, is checked when it is read.
  if (offset + LOCAL_BYTES + compressedSize > directory.offset) {
    throw invalid(`${which}: its ${compressedSize} bytes at ${offset} run into the central directory`);
  }
  if (method === 0 && size !== compressedSize) {
    throw invalid(`${which} is stored but its sizes differ (${size} and ${compressedSize})`);
  }

  const lastModified = dosDate(data.getUint16(at + 14, true), data.getUint16(at + 12, true));
  return {
    name: displayName(path),
    path,
    size,
    compressedSize,
    method,
    crc32: data.getUint32(at + 16, true),
    offset,
    centralDirectoryOffset: directory.offset,
    ...(lastModified === undefined ? {} : { lastModified }),
    directory: isDirectory(path, host, external),
    supported: method === 0 && (flags & FLAG_ENCRYPTED) === 0,
  };
}

/** The ZIP64 extended information field among `extra`'s (id, length, data) fields, if any. */
function zip64Field(extra: Uint8Array, which: string): DataView | undefined {
  let found: DataView | undefined;
  let at = 0;
  // Fewer than 4 bytes left over is padding some writers leave, not a field.
  while (at + 4 <= extra.length) {
    const id = extra[at]! | (extra[at + 1]! << 8);
    const length = extra[at + 2]! | (extra[at + 3]! << 8);
    if (at + 4 + length > extra.length) throw invalid(`${which}: an extra field runs past its record`);
    if (id === ZIP64_EXTRA && found === undefined) found = view(extra.subarray(at + 4, at + 4 + length));
    at += 4 + length;
  }
  return found;
}

/** Unix hosts keep the file type in the external attributes' high half; others keep MS-DOS attributes. */
function isDirectory(path: string, host: number, external: number): boolean {
  if (path.endsWith('/') || path.endsWith('\\')) return true;
  if (host === 3 && ((external >>> 16) & 0o170000) === 0o040000) return true;
  return (external & 0x10) !== 0;
}

/** An MS-DOS date and time (local time, 2-second steps), or undefined when it names no real moment. */
function dosDate(date: number, time: number): Date | undefined {
  const year = 1980 + (date >>> 9);
  const month = (date >>> 5) & 0x0f;
  const day = date & 0x1f;
  const hours = time >>> 11;
  const minutes = (time >>> 5) & 0x3f;
  const seconds = (time & 0x1f) * 2;
  if (month < 1 || month > 12 || day < 1 || hours > 23 || minutes > 59 || seconds > 59) return undefined;
  const result = new Date(year, month - 1, day, hours, minutes, seconds);
  // February 31 and the like roll over into the next month: not a date the sender's clock gave.
  return result.getDate() === day ? result : undefined;
}

/** A signal that fires when `outer` does or `inner` is aborted; `release` detaches it from `outer`. */
function linked(outer: AbortSignal | undefined, inner: AbortController): () => void {
  if (outer === undefined) return () => {};
  const onAbort = () => inner.abort(outer.reason);
  if (outer.aborted) onAbort();
  else outer.addEventListener('abort', onAbort, { once: true });
  return () => outer.removeEventListener('abort', onAbort);
}

function checkEntry(file: ZipReadable, entry: ZipEntry): void {
  if (typeof entry !== 'object' || entry === null) throw invalidInput('entry must be one of listZipEntries() results');
  const { offset, size, compressedSize, centralDirectoryOffset: limit, crc32 } = entry;
  if (![offset, size, compressedSize, limit].every(isSize) || !Number.isInteger(crc32)) {
    throw invalidInput('entry must be one of listZipEntries() results');
  }
  if (!entry.supported || entry.method !== 0) {
    throw invalid(
      `entry ${quoted(entry.path)} is ${entry.method === 0 ? 'encrypted' : `compressed (method ${entry.method})`}: ` +
        'only stored entries can be read',
    );
  }
  if (size !== compressedSize || offset + LOCAL_BYTES + size > limit || limit > file.size) {
    throw invalid(`entry ${quoted(entry.path)} lies outside the bundle's entries`);
  }
}

/**
 * The entry's bytes as a stream, read in pieces of at most 1 MiB as they are asked for. Its local
 * header is read first for where the data starts, which must end before the central directory. The
 * CRC-32 is checked before the last piece is let out: on a mismatch the stream errors instead of
 * closing (BUNDLE_INVALID), so a consumer never takes a damaged entry as complete. Cancelling the
 * stream or firing `signal` stops the reads (the latter errors it with ABORTED).
 *
 * Throws BUNDLE_INVALID at once, before any byte, for an entry that is compressed or encrypted
 * (`supported` false), and INVALID_INPUT for something that is not an entry.
 */
export function zipEntryStream(
  file: ZipReadable,
  entry: ZipEntry,
  options: ZipEntryStreamOptions = {},
): ReadableStream<Uint8Array> {
  checkReadable(file);
  checkEntry(file, entry);
  const { size, crc32: expected, centralDirectoryOffset: limit } = entry;
  const which = `entry ${quoted(entry.path)}`;
  const stop = new AbortController();
  let release = () => {};
  let position: number | undefined;
  let end = 0;
  let crc = 0;

  const dataStart = async () => {
    const header = view(await readExact(file, entry.offset, LOCAL_BYTES, stop.signal));
    if (header.getUint32(0, true) !== LOCAL_SIGNATURE) throw invalid(`${which}: no local header at ${entry.offset}`);
    const flags = header.getUint16(6, true);
    if (header.getUint16(8, true) !== entry.method || (flags & FLAG_ENCRYPTED) !== 0) {
      throw invalid(`${which}: its local header does not describe a stored entry`);
    }
    // Without a trailing descriptor the local header repeats the CRC and sizes (or their ZIP64 sentinel).
    if ((flags & FLAG_DESCRIPTOR) === 0) {
      const crcHere = header.getUint32(14, true);
      const sizes = [header.getUint32(18, true), header.getUint32(22, true)];
      if (crcHere !== expected || !sizes.every((s) => s === U32_MAX || s === size)) {
        throw invalid(`${which}: its local header and the central directory disagree`);
      }
    }
    const start = entry.offset + LOCAL_BYTES + header.getUint16(26, true) + header.getUint16(28, true);
    if (start + size > limit) throw invalid(`${which}: its data runs into the central directory`);
    return start;
  };

  return new ReadableStream<Uint8Array>(
    {
      start() {
        release = linked(options.signal, stop);
      },
      async pull(controller) {
        try {
          if (stop.signal.aborted) throw aborted(stop.signal);
          if (position === undefined) {
            position = await dataStart();
            end = position + size;
          }
          const length = Math.min(PIECE_BYTES, end - position);
          const piece = length === 0 ? new Uint8Array(0) : await readExact(file, position, length, stop.signal);
          crc = crc32Update(crc, piece);
          position += length;
          if (position < end) {
            controller.enqueue(piece);
            return;
          }
          if (crc !== expected) {
            throw invalid(
              `${which}: its bytes do not match its CRC-32 (${hex(crc)}, the directory says ${hex(expected)})`,
            );
          }
          if (piece.length > 0) controller.enqueue(piece);
          release();
          controller.close();
        } catch (error) {
          release();
          throw error;
        }
      },
      cancel(reason) {
        stop.abort(reason);
        release();
      },
    },
    // Nothing is read before the consumer asks, so an unread stream costs no reads.
    { highWaterMark: 0 },
  );
}

const hex = (n: number) => n.toString(16).padStart(8, '0');

/**
 * A random-access decrypted file (`openRandomAccess` from `postguard-ts`) as a {@link ZipReadable}:
 * each read is one `slice`, authenticated segment by segment, with its signal passed on.
 */
export function zipFromRandomAccess(file: Pick<RandomAccessFile, 'size' | 'slice'>): ZipReadable {
  return {
    size: file.size,
    read: (offset, length, signal) => file.slice(offset, offset + length, signal === undefined ? {} : { signal }),
  };
}
