import type { ByteSource } from '../lib/net/sources.js';
import type { KeeperBackend, KeptBytes } from './keeper.js';

/**
 * Sealed bytes in the Origin Private File System: one file per upload, `<id>.pgenc` in the folder
 * {@link OPFS_FOLDER}, read through `getFile()` slices, so no read holds more than its span.
 *
 * Written, where the engine allows it, by a dedicated worker of the file's own through a sync
 * access handle into `<id>.pgenc.part`, moved to its name when it closes (the commit a keeper
 * needs): the worker writes the file itself, where `createWritable()` hands every write to the
 * browser's process, which writes a swap file that close() moves in. Sealing 256 MiB into the file
 * on a profile on disk (bench:memory `--stages seal+opfs,seal+sync`, Chromium, a loaded machine):
 * createWritable 66–75 MB/s and 0.9 CPU s of the browser's process, the sync handle 88–102 MB/s
 * and 0.1. Elsewhere (no sync handle or no `move()` in workers, a Content Security Policy that
 * forbids a worker from a blob: URL) through `createWritable()`. `getFileHandle(…, { create: true })` shows
 * an empty file while such a write is under way: an empty file counts as no bytes, and the sweep
 * removes old empty ones and old `.part` files (a writer that never closed).
 */

/** The folder of the origin's private file system that holds the sealed bytes. */
export const OPFS_FOLDER = 'postguard-uploads';

const NAME = /^([\w-]{1,128})\.pgenc$/;
const PART = /^[\w-]{1,128}\.pgenc\.part$/;
const fileName = (id: string) => `${id}.pgenc`;
const partName = (id: string) => `${id}.pgenc.part`;

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

/**
 * The writer worker's script (a blob: URL, so no bundler has to find a file of its own): one
 * file, opened, written in order at its end, then closed (flushed, moved to its name) or aborted
 * (closed, removed). Each message is answered `{ n }` (a write's also `spent`: its buffer, back),
 * or `{ n, error }`.
 */
const WRITER_SOURCE = `"use strict";
let dir, part, handle, at = 0;
onmessage = async ({ data }) => {
  try {
    if (data.op === "open") {
      const file = self.FileSystemFileHandle && FileSystemFileHandle.prototype;
      if (!file || typeof file.createSyncAccessHandle !== "function" || typeof file.move !== "function")
        throw new Error("no sync access handle or move() in a worker");
      dir = await (await navigator.storage.getDirectory()).getDirectoryHandle(data.folder);
      part = await dir.getFileHandle(data.part, { create: true });
      handle = await part.createSyncAccessHandle();
      handle.truncate(0);
    } else if (data.op === "write") {
      const written = handle.write(data.bytes, { at });
      if (written !== data.bytes.length) throw new Error(written + " of " + data.bytes.length + " bytes written");
      at += written;
    } else if (data.op === "close") {
      handle.flush();
      handle.close();
      handle = undefined;
      // Engines differ on moving onto a file that exists: where it is refused, that one goes first
      // (a crash just then leaves no bytes under the name, never other ones).
      await part.move(data.name).catch(async () => {
        await dir.removeEntry(data.name).catch(() => undefined);
        await part.move(data.name);
      });
    } else {
      if (handle !== undefined) handle.close();
      handle = undefined;
      if (dir !== undefined) await dir.removeEntry(data.part).catch(() => undefined);
    }
    // A written chunk's buffer goes back to the page, to carry the next one.
    if (data.op === "write") postMessage({ n: data.n, spent: data.bytes.buffer }, [data.bytes.buffer]);
    else postMessage({ n: data.n });
  } catch (e) {
    postMessage({ n: data.n, error: e instanceof Error ? e.name + ": " + e.message : String(e) });
  }
};`;

let writerUrl: string | undefined;

/** How long a writer worker may take to start and open its file before the page writes through createWritable(). */
const WRITER_OPEN_MS = 5000;

/**
 * A writer of `id`'s bytes in a worker through a sync access handle, or undefined where this
 * engine or page cannot have one (the caller then uses createWritable()).
 */
async function syncWriter(dir: FileSystemDirectoryHandle, id: string): Promise<WritableStream<Uint8Array> | undefined> {
  if (typeof Worker === 'undefined' || typeof Blob === 'undefined' || typeof URL.createObjectURL !== 'function')
    return undefined;
  let worker: Worker;
  try {
    writerUrl ??= URL.createObjectURL(new Blob([WRITER_SOURCE], { type: 'text/javascript' }));
    worker = new Worker(writerUrl, { name: 'postguard-keeper' });
  } catch {
    return undefined;
  }
  const pending = new Map<number, { resolve: () => void; reject: (e: Error) => void }>();
  let next = 0;
  let broken: Error | undefined;
  const fail = (error: Error) => {
    broken ??= error;
    for (const { reject } of pending.values()) reject(broken);
    pending.clear();
    worker.terminate();
  };
  // The buffer the last write carried, back from the worker: fresh memory for each 5 MB chunk
  // costs more than the copy into it (zeroed, faulted in), and the worker's garbage grows RSS.
  let spare: ArrayBuffer | undefined;
  worker.onmessage = ({ data }: MessageEvent<{ n: number; error?: string; spent?: ArrayBuffer }>) => {
    if (data.spent !== undefined) spare = data.spent;
    const call = pending.get(data.n);
    pending.delete(data.n);
    if (data.error === undefined) call?.resolve();
    else call?.reject(new Error(data.error));
  };
  worker.onerror = (event) => {
    event.preventDefault();
    fail(new Error(`the keeper's writer worker failed: ${event.message || 'it did not start'}`));
  };
  const call = (op: string, bytes?: Uint8Array<ArrayBuffer>) =>
    new Promise<void>((resolve, reject) => {
      if (broken !== undefined) return reject(broken);
      const n = next++;
      pending.set(n, { resolve, reject });
      const message = { n, op, folder: dir.name, name: fileName(id), part: partName(id), bytes };
      worker.postMessage(message, bytes === undefined ? [] : [bytes.buffer]);
    });
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    await Promise.race([
      call('open'),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('the writer worker did not open the file in time')), WRITER_OPEN_MS);
      }),
    ]);
  } catch {
    fail(new Error('not opened'));
    await removeFile(dir, partName(id)).catch(() => undefined);
    return undefined;
  } finally {
    clearTimeout(timer);
  }
  return new WritableStream<Uint8Array>({
    // A copy moved to the worker: the caller may reuse or still send the chunk it wrote.
    write(chunk) {
      if (chunk.length === 0) return;
      const buffer = spare !== undefined && spare.byteLength >= chunk.length ? spare : new ArrayBuffer(chunk.length);
      spare = undefined;
      const copy = new Uint8Array(buffer, 0, chunk.length);
      copy.set(chunk);
      return call('write', copy);
    },
    async close() {
      try {
        await call('close');
      } finally {
        worker.terminate();
      }
    },
    async abort() {
      await call('abort').catch(() => undefined);
      worker.terminate();
      await removeFile(dir, partName(id)).catch(() => undefined);
      await removeFile(dir, fileName(id));
    },
  });
}

/**
 * The bytes half of a backend over `dir`: a folder at the root of the origin's private file system,
 * as {@link openUploadsFolder} gives (the writer worker finds it there by its name).
 */
export function opfsBytes(
  dir: FileSystemDirectoryHandle,
): Pick<KeeperBackend, 'createBytes' | 'openBytes' | 'listBytes' | 'removeBytes' | 'sweep'> {
  return {
    createBytes: async (id) => {
      const viaWorker = await syncWriter(dir, id);
      if (viaWorker !== undefined) return viaWorker;
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
    async removeBytes(id) {
      await removeFile(dir, fileName(id));
      // What a writer that never closed left (a reload mid-sealing); one still open refuses, and
      // the sweep takes it once it is old.
      await removeFile(dir, partName(id)).catch(() => undefined);
    },
    async sweep(before) {
      for (const { id, file } of await ownFiles(dir))
        if (file.size === 0 && file.lastModified < before) await removeFile(dir, fileName(id));
      const parts: Array<[string, FileSystemFileHandle]> = [];
      for await (const [name, handle] of (dir as unknown as Listable).entries())
        if (PART.test(name) && handle.kind === 'file') parts.push([name, handle as FileSystemFileHandle]);
      for (const [name, handle] of parts) {
        const file = await handle.getFile().catch(() => undefined);
        // One still open in a live writer refuses to go (it is no leftover): the next sweep tries again.
        if (file !== undefined && file.lastModified < before) await removeFile(dir, name).catch(() => undefined);
      }
    },
  };
}
