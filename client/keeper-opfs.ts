import type { ByteSource } from '../lib/net/sources.js';
import type { KeeperBackend, KeptBytes } from './keeper.js';

/**
 * Sealed bytes in the Origin Private File System: one file per upload, `<id>.pgenc` in the folder
 * {@link OPFS_FOLDER}, written through `createWritable()`, which writes aside and swaps the file in
 * at close (the commit a keeper needs), and read through `getFile()` slices, so no read holds more
 * than its span. `getFileHandle(…, { create: true })` shows an empty file while the write is under
 * way: an empty file counts as no bytes, and the sweep removes old empty ones.
 */

/** The folder of the origin's private file system that holds the sealed bytes. */
export const OPFS_FOLDER = 'postguard-uploads';

const NAME = /^([\w-]{1,128})\.pgenc$/;
const fileName = (id: string) => `${id}.pgenc`;

/** `entries()` of a directory handle (TypeScript's DOM lib types it only in DOM.AsyncIterable). */
type Listable = { entries(): AsyncIterable<[string, FileSystemHandle]> };

const isNotFound = (e: unknown) => e instanceof DOMException && e.name === 'NotFoundError';

async function fileOf(dir: FileSystemDirectoryHandle, id: string): Promise<File | undefined> {
  try {
    return await (await dir.getFileHandle(fileName(id))).getFile();
  } catch (e) {
    if (isNotFound(e)) return undefined;
    throw e;
  }
}

async function removeFile(dir: FileSystemDirectoryHandle, name: string): Promise<void> {
  await dir.removeEntry(name).catch((e: unknown) => {
    if (!isNotFound(e)) throw e;
  });
}

/** Our files in the folder, with their current snapshots. */
async function ownFiles(dir: FileSystemDirectoryHandle): Promise<Array<{ id: string; file: File }>> {
  const found: Array<{ id: string; file: File }> = [];
  for await (const [name, handle] of (dir as unknown as Listable).entries()) {
    const id = NAME.exec(name)?.[1];
    if (id === undefined || handle.kind !== 'file') continue;
    // A file removed between the listing and the read is simply not there.
    const file = await (handle as FileSystemFileHandle).getFile().catch(() => undefined);
    if (file !== undefined) found.push({ id, file });
  }
  return found;
}

/** A snapshot's spans, each read alone (not lib's blobSource: that would bring the crypto into a keeper's bundle). */
const fileSource = (file: File): ByteSource => ({
  size: file.size,
  read: async (offset, length) => new Uint8Array(await file.slice(offset, offset + length).arrayBuffer()),
});

/** The folder, if this page may write files into it through `createWritable()`. */
export async function openUploadsFolder(): Promise<FileSystemDirectoryHandle> {
  if (typeof navigator === 'undefined' || typeof navigator.storage?.getDirectory !== 'function')
    throw new Error('no Origin Private File System');
  if (
    typeof FileSystemFileHandle === 'undefined' ||
    typeof FileSystemFileHandle.prototype.createWritable !== 'function'
  )
    throw new Error('no createWritable() on this thread');
  const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle(OPFS_FOLDER, { create: true });
  // An engine may have the method and still refuse it (private modes): write and read a byte.
  const probe = await dir.getFileHandle('.probe', { create: true });
  const writable = await probe.createWritable();
  await writable.write(new Uint8Array([1]));
  await writable.close();
  const size = (await probe.getFile()).size;
  await removeFile(dir, '.probe');
  if (size !== 1) throw new Error('a written file did not keep its byte');
  return dir;
}

/** The bytes half of a backend over `dir`. */
export function opfsBytes(
  dir: FileSystemDirectoryHandle,
): Pick<KeeperBackend, 'createBytes' | 'openBytes' | 'listBytes' | 'removeBytes' | 'sweep'> {
  return {
    createBytes: async (id) => {
      const writable = await (await dir.getFileHandle(fileName(id), { create: true })).createWritable();
      const writer = writable.getWriter();
      return new WritableStream<Uint8Array>({
        write: (chunk) => writer.write(chunk),
        close: () => writer.close(),
        async abort(reason) {
          await writer.abort(reason).catch(() => undefined);
          await removeFile(dir, fileName(id));
        },
      });
    },
    openBytes: async (id) => {
      const file = await fileOf(dir, id);
      return file === undefined || file.size === 0 ? undefined : fileSource(file);
    },
    listBytes: async () =>
      (await ownFiles(dir))
        .filter(({ file }) => file.size > 0)
        .map(({ id, file }): KeptBytes => ({ id, size: file.size, modifiedAt: file.lastModified })),
    removeBytes: (id) => removeFile(dir, fileName(id)),
    async sweep(before) {
      for (const { id, file } of await ownFiles(dir))
        if (file.size === 0 && file.lastModified < before) await removeFile(dir, fileName(id));
    },
  };
}
