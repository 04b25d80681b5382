import { makeZip, predictLength } from 'client-zip';
import { invalidInput } from './errors.js';

/**
 * The files of one message, bundled into a single ZIP as they stream (client-zip: entries are
 * stored, not compressed, and nothing is held beyond what is in flight). Names are reduced to
 * their last path segment, as the .NET SDK does, so no entry can point outside the folder it is
 * extracted to.
 */

/** A file's bytes: a stream (read once), a Uint8Array or a Blob (read each time the message is sealed). */
export type FileContent = ReadableStream<Uint8Array> | Uint8Array | Blob;

/** One file of a message. */
export interface PgFile {
  /** The entry name; any directory part (after the last / or \) is dropped. */
  name: string;
  /** Its bytes. */
  content: FileContent;
  /** Modification time stored in the ZIP. Default: now (or the Blob's own, for a File). */
  lastModified?: Date;
}

export interface ZipEntry {
  name: string;
  content: FileContent;
  lastModified: Date | undefined;
}

export function entryName(name: unknown): string {
  if (typeof name !== 'string') throw invalidInput('file name must be a string');
  const base = name.slice(Math.max(name.lastIndexOf('/'), name.lastIndexOf('\\')) + 1);
  if (base === '' || base === '.' || base === '..')
    throw invalidInput(`file name ${JSON.stringify(name)} does not name a file`);
  if (/\p{Cc}/u.test(base)) throw invalidInput(`file name ${JSON.stringify(name)} contains control characters`);
  return base;
}

const isContent = (value: unknown): value is FileContent =>
  value instanceof Uint8Array ||
  value instanceof ReadableStream ||
  (typeof Blob !== 'undefined' && value instanceof Blob);

const isFile = (value: unknown): value is File => typeof File !== 'undefined' && value instanceof File;

/** A browser `File` as one of ours: its name, its bytes, its modification time. */
const fromFile = (file: File): PgFile => ({
  name: file.name,
  content: file,
  lastModified: new Date(file.lastModified),
});

/**
 * Validates the files (names, duplicates, content types) before anything runs. Takes our
 * `{ name, content }` objects, browser `File`s (pg-js's input) or a `FileList`.
 */
export function zipEntries(files: unknown): ZipEntry[] {
  const list =
    typeof FileList !== 'undefined' && files instanceof FileList ? Array.from(files) : (files as unknown[] | undefined);
  if (!Array.isArray(list) || list.length === 0) throw invalidInput('files: give at least one file');
  const seen = new Set<string>();
  return list.map((given: unknown, i) => {
    const file = isFile(given) ? fromFile(given) : given;
    if (typeof file !== 'object' || file === null)
      throw invalidInput(`files[${i}]: expected {name, content} or a File`);
    const { name: raw, content, lastModified } = file as Partial<PgFile>;
    const name = entryName(raw);
    if (seen.has(name))
      throw invalidInput(`files[${i}]: duplicate ZIP entry name ${JSON.stringify(name)} (from ${JSON.stringify(raw)})`);
    seen.add(name);
    if (!isContent(content))
      throw invalidInput(`files[${i}] (${name}): content must be a ReadableStream, Uint8Array or Blob`);
    if (lastModified !== undefined && !(lastModified instanceof Date && Number.isFinite(lastModified.getTime()))) {
      throw invalidInput(`files[${i}] (${name}): lastModified must be a valid Date`);
    }
    return { name, content, lastModified };
  });
}

/** The ZIP as a byte stream; pulling it pulls the file contents one after the other. */
export function zipStream(entries: readonly ZipEntry[]): ReadableStream<Uint8Array> {
  return makeZip(
    entries.map((e) => ({
      name: e.name,
      input: e.content,
      ...(e.lastModified === undefined ? {} : { lastModified: e.lastModified }),
    })),
  );
}

/** Bytes in a file's content when it is known before reading (a stream's is not). */
const knownSize = (content: FileContent): number | undefined =>
  content instanceof Uint8Array ? content.length : content instanceof ReadableStream ? undefined : content.size;

/** The ZIP's exact length, computed from the names and sizes; undefined when a content is a stream. */
export function zipLength(entries: readonly ZipEntry[]): number | undefined {
  const meta: Array<{ name: string; size: number }> = [];
  for (const e of entries) {
    const size = knownSize(e.content);
    if (size === undefined) return undefined;
    meta.push({ name: e.name, size });
  }
  return Number(predictLength(meta));
}

/** The plaintext's length when it can be known before reading: a ZIP of sized files, or bytes. */
export function plainLength(input: ZipEntry[] | Uint8Array | ReadableStream<Uint8Array>): number | undefined {
  if (input instanceof Uint8Array) return input.length;
  if (input instanceof ReadableStream) return undefined;
  return zipLength(input);
}
