import { makeZip } from 'client-zip';
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

/** Validates the files (names, duplicates, content types) before anything runs. */
export function zipEntries(files: unknown): ZipEntry[] {
  if (!Array.isArray(files) || files.length === 0) throw invalidInput('files: give at least one file');
  const seen = new Set<string>();
  return files.map((file: unknown, i) => {
    if (typeof file !== 'object' || file === null) throw invalidInput(`files[${i}]: expected {name, content}`);
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
