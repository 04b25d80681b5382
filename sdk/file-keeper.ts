import { randomBytes } from 'node:crypto';
import { mkdir, open, readFile, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ByteSource } from 'postguard-ts';
import {
  ClientError,
  ClientErrorCode,
  MAX_RECORD_BYTES,
  keeperOver,
  type KeeperBackend,
  type KeeperOptions,
  type KeptBytes,
  type UploadKeeper,
} from 'postguard-ts/client';
import { tokenBox, type TokenKey } from './token-key.js';

/**
 * Unfinished uploads in a folder on disk, so that a Node process that crashed or was stopped can
 * resume them: `<id>.pgenc` holds the sealed bytes, `<id>.json` the record. Both are written to a
 * temporary `….part` name, flushed, then renamed into place, so a crash leaves either the old file
 * or the new one, never half of one; the sweep of `list()` removes old `.part` leftovers.
 * `<id>.sent` remembers a keyed upload that was sent (`upload({ key })`, its uuid), so running the
 * same batch again sends nothing twice; it stays until the folder is cleared.
 */

const BYTES = /^([\w-]{1,128})\.pgenc$/;
const RECORD = /^([\w-]{1,128})\.json$/;
const PART = /^[\w-]{1,128}\.(?:pgenc|json|sent)\.[\da-f]{16}\.part$/;
/** A storage uuid as a sent mark holds it (Cryptify's are UUIDs; anything short and plain is taken). */
const SENT_UUID = /^[\w-]{1,128}$/;

const isMissing = (e: unknown) => (e as NodeJS.ErrnoException | undefined)?.code === 'ENOENT';
const partName = (name: string) => `${name}.${randomBytes(8).toString('hex')}.part`;

async function statOrUndefined(path: string) {
  try {
    return await stat(path);
  } catch (e) {
    if (isMissing(e)) return undefined;
    throw e;
  }
}

/** Makes a rename survive a power cut (Linux, macOS); elsewhere a folder cannot be opened to sync, and the rename stands as the OS keeps it. */
async function syncFolder(dir: string): Promise<void> {
  const handle = await open(dir, 'r').catch(() => undefined);
  if (handle === undefined) return;
  try {
    await handle.sync().catch(() => undefined);
  } finally {
    await handle.close();
  }
}

/**
 * The committed bytes at `path`, read by opening the file for each span: a source has no close,
 * and a read sees the file it was opened for (same inode, size and time) or fails.
 */
function fileSource(path: string, seen: { ino: number; size: number; mtimeMs: number }): ByteSource {
  return {
    size: seen.size,
    async read(offset, length) {
      const handle = await open(path, 'r');
      try {
        const now = await handle.stat();
        if (now.ino !== seen.ino || now.size !== seen.size || now.mtimeMs !== seen.mtimeMs)
          throw new Error(`${path} changed since it was opened`);
        const out = new Uint8Array(length);
        for (let filled = 0; filled < length;) {
          const { bytesRead } = await handle.read(out, filled, length - filled, offset + filled);
          if (bytesRead === 0) throw new Error(`${path} ended early`);
          filled += bytesRead;
        }
        return out;
      } finally {
        await handle.close();
      }
    },
  };
}

function fileBackend(dir: string): KeeperBackend {
  // Made again whenever needed, not once: someone may clear the folder while the process runs.
  const ready = () => mkdir(dir, { recursive: true });
  const at = (name: string) => join(dir, name);

  const commit = async (part: string, name: string) => {
    await rename(at(part), at(name));
    await syncFolder(dir);
  };

  return {
    persistent: true,
    createBytes: async (id) => {
      await ready();
      const name = `${id}.pgenc`;
      const part = partName(name);
      const handle = await open(at(part), 'wx');
      let closed = false;
      const closeOnce = async () => {
        if (closed) return;
        closed = true;
        await handle.close();
      };
      const discard = async () => {
        await closeOnce().catch(() => undefined);
        await rm(at(part), { force: true });
      };
      // A stream whose write or close failed is errored, and an errored stream is never aborted:
      // the descriptor and the partial file are let go of here (a full disk stays full otherwise).
      const orDiscard = async (run: () => Promise<void>) => {
        try {
          await run();
        } catch (e) {
          await discard();
          throw e;
        }
      };
      return new WritableStream<Uint8Array>({
        write: (chunk) =>
          orDiscard(async () => {
            for (let done = 0; done < chunk.length;)
              done += (await handle.write(chunk, done, chunk.length - done)).bytesWritten;
          }),
        close: () =>
          orDiscard(async () => {
            await handle.sync();
            await closeOnce();
            await commit(part, name);
          }),
        async abort() {
          await discard();
          await rm(at(name), { force: true });
        },
      });
    },
    openBytes: async (id) => {
      const path = at(`${id}.pgenc`);
      const seen = await statOrUndefined(path);
      return seen === undefined || seen.size === 0 ? undefined : fileSource(path, seen);
    },
    listBytes: async () => {
      await ready();
      const found: KeptBytes[] = [];
      for (const name of await readdir(dir)) {
        const id = BYTES.exec(name)?.[1];
        const seen = id === undefined ? undefined : await statOrUndefined(at(name));
        if (id !== undefined && seen?.isFile() && seen.size > 0)
          found.push({ id, size: seen.size, modifiedAt: seen.mtimeMs });
      }
      return found;
    },
    removeBytes: (id) => rm(at(`${id}.pgenc`), { force: true }),
    saveRecord: async (record) => {
      await ready();
      const name = `${record.id}.json`;
      const part = partName(name);
      await writeFile(at(part), JSON.stringify(record), { flag: 'wx', flush: true });
      await commit(part, name);
    },
    listRecords: async () => {
      await ready();
      const found: Array<{ id: string; value: unknown }> = [];
      for (const name of await readdir(dir)) {
        const id = RECORD.exec(name)?.[1];
        if (id === undefined) continue;
        const seen = await statOrUndefined(at(name));
        if (seen === undefined) continue;
        // Too large to be ours, or unreadable: listed as damaged, so the keeper removes it.
        let value: unknown;
        if (seen.size <= MAX_RECORD_BYTES) {
          try {
            value = JSON.parse(await readFile(at(name), 'utf8'));
          } catch (e) {
            if (isMissing(e)) continue;
          }
        }
        found.push({ id, value });
      }
      return found;
    },
    removeRecord: (id) => rm(at(`${id}.json`), { force: true }),
    saveSent: async (id, uuid) => {
      await ready();
      const name = `${id}.sent`;
      const part = partName(name);
      await writeFile(at(part), JSON.stringify({ uuid, sentAt: Date.now() }), { flag: 'wx', flush: true });
      await commit(part, name);
    },
    loadSent: async (id) => {
      let text: string;
      try {
        text = await readFile(at(`${id}.sent`), 'utf8');
      } catch (e) {
        if (isMissing(e)) return undefined;
        throw e;
      }
      // A mark that does not read as one is not a send: a rerun then sends (one mail more, never none).
      try {
        const { uuid } = JSON.parse(text.slice(0, 1024)) as { uuid?: unknown };
        return typeof uuid === 'string' && SENT_UUID.test(uuid) ? uuid : undefined;
      } catch {
        return undefined;
      }
    },
    async sweep(before) {
      for (const name of await readdir(dir)) {
        if (!PART.test(name)) continue;
        const seen = await statOrUndefined(at(name));
        if (seen !== undefined && seen.mtimeMs < before) await rm(at(name), { force: true });
      }
    },
  };
}

/** What `fileKeeper` takes besides the folder. */
export interface FileKeeperOptions extends KeeperOptions {
  /**
   * The key that seals each upload's recovery token in the folder (token-key.ts): 32 bytes, or
   * `{ file }`, a key file made with mode 0600 if missing. Default: `POSTGUARD_KEEPER_KEY`
   * (base64) if set, else the key file `$XDG_CONFIG_HOME/postguard-ts/keeper.key`
   * (~/.config/… without it). Never inside the folder: a copy of the folder alone opens nothing.
   */
  tokenKey?: TokenKey;
}

/**
 * A keeper in the folder `dir` (made when first used): uploads survive the process. Give each
 * sending process its own folder, or one folder to processes that never resume the same upload at
 * the same time. Recovery tokens are stored sealed under a key kept apart (`tokenKey`); a key
 * that cannot be had fails `list()`, `open()` and `save()` with `INVALID_INPUT` and removes nothing.
 */
export function fileKeeper(dir: string, options: FileKeeperOptions = {}): UploadKeeper {
  if (typeof dir !== 'string' || dir === '')
    throw new ClientError(ClientErrorCode.INVALID_INPUT, 'fileKeeper needs the path of a folder');
  const { tokenKey, ...keeperOptions } = options;
  const secrets = tokenBox(tokenKey);
  const keeper = keeperOver({ ...fileBackend(dir), secrets }, keeperOptions);
  // The key first: a token the keeper cannot open is dropped with its upload, so no key must not look like that.
  return {
    ...keeper,
    list: async (listOptions) => (await secrets.ready(), keeper.list(listOptions)),
    open: async (id) => (await secrets.ready(), keeper.open(id)),
  };
}
