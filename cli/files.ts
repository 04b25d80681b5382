import { randomBytes } from 'node:crypto';
import { constants, unlinkSync } from 'node:fs';
import { link, open, rename, stat, unlink, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { fileProblem } from './exit.js';

/**
 * Files as Web Streams, with bounded memory: the input is read in fixed-size chunks as the
 * consumer pulls, and the output is written one chunk at a time with backpressure.
 *
 * Output is never left half-written where the user expects a result: it goes to a temporary file
 * in the target directory (same filesystem, so the final step is a rename), is fsynced, and only
 * then takes the target name. Any failure, and a signal (see removeTempFilesSync), removes it.
 */

/**
 * From this input size the transcript is hashed on a thread of its own (postguard-ts's
 * startHashThread): below it, the thread's start (tens of ms) buys little.
 */
export const HASH_THREAD_FROM_BYTES = 8 * 1024 * 1024;

/** Input read size: four 256 KiB segments per read keeps syscalls few and memory flat. */
export const READ_CHUNK_BYTES = 1 << 20;

const reason = (error: unknown): string => {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  switch (code) {
    case 'ENOENT':
      return 'no such file';
    case 'EACCES':
    case 'EPERM':
      return 'permission denied';
    case 'EISDIR':
      return 'is a directory';
    case 'ENOSPC':
      return 'no space left on the device';
    case 'EEXIST':
      return 'already exists';
    case 'ENOTDIR':
      return 'a part of the path is not a directory';
    default:
      return error instanceof Error ? error.message : String(error);
  }
};

export interface InputFile {
  readonly path: string;
  readonly size: number;
  /** The file's bytes; `onRead` sees every chunk's length (progress). Errors when `signal` fires. */
  readable(onRead?: (bytes: number) => void, signal?: AbortSignal): ReadableStream<Uint8Array>;
  /** Up to `length` bytes from `position` (fewer at the end of the file). */
  read(position: number, length: number): Promise<Uint8Array>;
  close(): Promise<void>;
}

/** Opens a regular file for reading; a one-line FILE error if it is missing, unreadable or not a file. */
export async function openInput(path: string): Promise<InputFile> {
  let handle: FileHandle;
  try {
    handle = await open(path, 'r');
  } catch (error) {
    throw fileProblem(`cannot read ${path}: ${reason(error)}`, error);
  }
  let size: number;
  try {
    const info = await handle.stat();
    if (!info.isFile())
      throw Object.assign(new Error('not a regular file'), { code: info.isDirectory() ? 'EISDIR' : undefined });
    size = info.size;
  } catch (error) {
    await handle.close();
    throw fileProblem(`cannot read ${path}: ${reason(error)}`, error);
  }
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await handle.close();
  };
  return {
    path,
    size,
    close,
    async read(position, length) {
      const buffer = new Uint8Array(Math.max(0, Math.min(length, size - position)));
      let filled = 0;
      while (filled < buffer.length) {
        const { bytesRead } = await handle.read(buffer, filled, buffer.length - filled, position + filled);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
      return buffer.subarray(0, filled);
    },
    readable(onRead, signal) {
      return new ReadableStream<Uint8Array>(
        {
          async pull(controller) {
            if (signal?.aborted) throw signal.reason;
            // A fresh buffer per chunk: the consumer may hold on to it.
            const buffer = new Uint8Array(READ_CHUNK_BYTES);
            let bytesRead: number;
            try {
              ({ bytesRead } = await handle.read(buffer, 0, buffer.length, null));
            } catch (error) {
              throw fileProblem(`cannot read ${path}: ${reason(error)}`, error);
            }
            if (bytesRead === 0) {
              controller.close();
              await close();
              return;
            }
            onRead?.(bytesRead);
            controller.enqueue(bytesRead === buffer.length ? buffer : buffer.subarray(0, bytesRead));
          },
          async cancel() {
            await close();
          },
        },
        { highWaterMark: 0 },
      );
    },
  };
}

/** Temporary outputs of this process, removed synchronously when a signal ends it. */
const liveTempFiles = new Set<string>();

/** For signal handlers: nothing async runs after them, so this must not be either. */
export function removeTempFilesSync(): void {
  for (const path of liveTempFiles) {
    try {
      unlinkSync(path);
    } catch {
      // already gone
    }
  }
  liveTempFiles.clear();
}

/** Fails with a FILE error if `path` exists and `force` is off (checked early, again at commit). */
export async function refuseExisting(path: string, force: boolean): Promise<void> {
  if (force) return;
  try {
    await stat(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw fileProblem(`cannot write ${path}: ${reason(error)}`, error);
  }
  throw fileProblem(`${path} already exists (use --force to overwrite it)`);
}

export interface AtomicOutput {
  readonly path: string;
  readonly tempPath: string;
  /** The temporary file's stream; closing it does not publish the file, commit() does. */
  readonly writable: WritableStream<Uint8Array>;
  /** fsync, then move into place (refusing an existing target unless forced), then fsync the directory. */
  commit(): Promise<void>;
  /** Removes the temporary file; safe to call at any point, and more than once. */
  discard(): Promise<void>;
}

export interface OutputOptions {
  force: boolean;
  /** File mode of the new file (before the umask). */
  mode: number;
}

export async function createAtomicOutput(path: string, options: OutputOptions): Promise<AtomicOutput> {
  const dir = dirname(path);
  const tempPath = join(dir, `.${basename(path)}.${randomBytes(6).toString('hex')}.pg-cli-partial`);
  let handle: FileHandle;
  try {
    handle = await open(tempPath, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, options.mode);
  } catch (error) {
    throw fileProblem(`cannot write in ${dir}: ${reason(error)}`, error);
  }
  liveTempFiles.add(tempPath);
  let open_ = true;
  let state: 'writing' | 'committed' | 'discarded' = 'writing';
  const closeHandle = async () => {
    if (!open_) return;
    open_ = false;
    await handle.close();
  };

  const writable = new WritableStream<Uint8Array>(
    {
      async write(chunk) {
        let offset = 0;
        try {
          while (offset < chunk.length) {
            const { bytesWritten } = await handle.write(chunk, offset, chunk.length - offset, null);
            offset += bytesWritten;
          }
        } catch (error) {
          throw fileProblem(`cannot write ${path}: ${reason(error)}`, error);
        }
      },
    },
    { highWaterMark: 1 },
  );

  const discard = async () => {
    if (state !== 'writing') return;
    state = 'discarded';
    await closeHandle().catch(() => undefined);
    await unlink(tempPath).catch(() => undefined);
    liveTempFiles.delete(tempPath);
  };

  const commit = async () => {
    if (state !== 'writing') throw new Error('output already committed or discarded');
    try {
      await handle.sync();
      await closeHandle();
      if (options.force) {
        await rename(tempPath, path);
      } else {
        // link() refuses an existing target atomically: a file that appeared meanwhile is not clobbered.
        await link(tempPath, path);
        await unlink(tempPath);
      }
    } catch (error) {
      await discard();
      const exists = (error as NodeJS.ErrnoException).code === 'EEXIST';
      throw fileProblem(
        exists ? `${path} already exists (use --force to overwrite it)` : `cannot write ${path}: ${reason(error)}`,
        error,
      );
    }
    state = 'committed';
    liveTempFiles.delete(tempPath);
    await syncDirectory(dir);
  };

  return { path, tempPath, writable, commit, discard };
}

/** Makes the new directory entry durable; some filesystems refuse to fsync a directory, which is fine. */
async function syncDirectory(dir: string): Promise<void> {
  let handle: FileHandle | undefined;
  try {
    handle = await open(dir, 'r');
    await handle.sync();
  } catch {
    // best effort
  } finally {
    await handle?.close().catch(() => undefined);
  }
}
