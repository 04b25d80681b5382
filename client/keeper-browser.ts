import { del, get, set } from 'idb-keyval';
import { withTimeout } from '../lib/net/waits.js';
import { deviceKeyBox } from '../lib/pkg/secret-box.js';
import { keeperOver, memoryKeeper, type KeeperOptions, type UploadKeeper } from './keeper.js';
import { idbBytes, idbRecords, openUploadsStore, storesBlobs } from './keeper-idb.js';
import { openUploadsFolder, opfsBytes } from './keeper-opfs.js';

/** Where a browser keeper holds the sealed bytes (records are in IndexedDB unless it is 'memory'). */
export type BrowserKeeperBackend = 'opfs' | 'indexeddb' | 'memory';

/** Options of {@link browserKeeper}. */
export interface BrowserKeeperOptions extends KeeperOptions {
  /**
   * Skip the Origin Private File System ('indexeddb') or keep nothing across reloads ('memory').
   * Default: the best this page has.
   */
  bytesIn?: BrowserKeeperBackend;
  /** How long each probe of the browser's storage may take before the next choice is tried (default 5 s). */
  probeTimeoutMs?: number;
}

/** A browser keeper, saying where it keeps the bytes. */
export interface BrowserKeeper extends UploadKeeper {
  /** Where the sealed bytes are kept. */
  readonly backend: BrowserKeeperBackend;
}

/** `promise`, or a rejection after `ms`: a storage that never answers (a blocked database) is a storage we cannot use. */
const within = <T>(promise: Promise<T>, ms: number, what: string): Promise<T> =>
  withTimeout(promise, ms, () => new Error(`${what} did not answer within ${ms} ms`));

/**
 * Unfinished uploads kept by this browser, for this origin, shared by its tabs: the sealed bytes in
 * the Origin Private File System where the page can write files there (`createWritable()`; a
 * worker writes them through a sync access handle where it can, keeper-opfs.ts), else in
 * IndexedDB in pieces of 4 MiB (Blobs where the engine stores them); the records in IndexedDB (database 'postguard-uploads'),
 * their recovery tokens sealed under a non-extractable AES-GCM key kept there too. Where
 * neither works (some private modes), in memory, with `persistent` false. A write holds at most one
 * piece in memory and a read only its span, whatever the file's size.
 *
 * The browser may still evict an origin's storage under pressure unless the page asked for
 * persistence. That question is the app's to ask (`navigator.storage.persist()`), not this
 * keeper's: some engines show the user a prompt for it.
 */
export async function browserKeeper(options: BrowserKeeperOptions = {}): Promise<BrowserKeeper> {
  const { bytesIn, probeTimeoutMs = 5000, ...keeperOptions } = options;
  const store =
    bytesIn === 'memory' || typeof indexedDB === 'undefined'
      ? undefined
      : await within(openUploadsStore(), probeTimeoutMs, 'IndexedDB').catch(() => undefined);
  if (store === undefined) return { ...memoryKeeper(keeperOptions), backend: 'memory' };
  const folder =
    bytesIn === 'indexeddb'
      ? undefined
      : await within(openUploadsFolder(), probeTimeoutMs, 'the Origin Private File System').catch(() => undefined);
  const bytes = folder === undefined ? idbBytes(store, await storesBlobs(store)) : opfsBytes(folder);
  // The recovery token is sealed under a non-extractable key of this origin's, kept beside the records.
  const secrets = deviceKeyBox({
    get: (key) => get(key, store),
    set: (key, value) => set(key, value, store),
    delete: (key) => del(key, store),
    keys: async () => [],
  });
  const keeper = keeperOver({ persistent: true, ...idbRecords(store), ...bytes, secrets }, keeperOptions);
  return Object.assign(keeper, { backend: folder === undefined ? ('indexeddb' as const) : ('opfs' as const) });
}
