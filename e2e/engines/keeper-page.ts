import { clear, createStore } from 'idb-keyval';
import { UPLOADS_DB, UPLOADS_STORE } from '../../client/keeper-idb.js';
import { OPFS_FOLDER } from '../../client/keeper-opfs.js';
import { browserKeeper, type BrowserKeeperBackend } from '../../client/keeper-browser.js';
import { fillPattern, keeperContract, patterned } from '../../test/keeper-contract.js';
import { PkgCache } from '../../lib/pkg/cache.js';
import { indexedDbStore } from '../../lib/pkg/store.js';
import { originStorageText } from '../storage-dump.js';

/**
 * The page of e2e/engines/keeper.spec.ts: browserKeeper and the keeper contract, bundled by Vite
 * and driven through `window.keeperTest` with plain values (the only thing every engine's driver
 * can pass). Uploads written here use fresh 1 MiB chunks, chunk i patterned from seed + i, so a
 * page after a reload can check every byte without the writer's memory.
 */

const MIB = 1024 * 1024;

const heap = () => (performance as { memory?: { usedJSHeapSize: number } }).memory?.usedJSHeapSize;

async function keeper(bytesIn?: BrowserKeeperBackend) {
  return browserKeeper(bytesIn === undefined ? {} : { bytesIn });
}

const api = {
  /** Empties what a keeper of this origin keeps, so each test starts from nothing. */
  async wipe(): Promise<void> {
    await clear(createStore(UPLOADS_DB, UPLOADS_STORE)).catch(() => undefined);
    const root = await navigator.storage?.getDirectory?.().catch(() => undefined);
    await root?.removeEntry(OPFS_FOLDER, { recursive: true }).catch(() => undefined);
  },

  /** What this engine offers, and what browserKeeper picked. */
  async probe() {
    const k = await keeper();
    return {
      backend: k.backend,
      persistent: k.persistent,
      getDirectory: typeof navigator.storage?.getDirectory === 'function',
      createWritable:
        typeof FileSystemFileHandle !== 'undefined' &&
        typeof FileSystemFileHandle.prototype.createWritable === 'function',
      heapMeasured: heap() !== undefined,
    };
  },

  /**
   * The names in the keeper's OPFS folder, sorted, and whether this engine gives a worker a sync
   * access handle and move() (where keeper-opfs.ts writes through its writer worker).
   */
  async folder() {
    const root = await navigator.storage?.getDirectory?.().catch(() => undefined);
    const dir = await root?.getDirectoryHandle(OPFS_FOLDER).catch(() => undefined);
    const names: string[] = [];
    if (dir !== undefined)
      for await (const name of (dir as unknown as { keys(): AsyncIterable<string> }).keys()) names.push(name);
    const source = `postMessage(!!self.FileSystemFileHandle && typeof FileSystemFileHandle.prototype.createSyncAccessHandle === "function" && typeof FileSystemFileHandle.prototype.move === "function")`;
    const worker = new Worker(URL.createObjectURL(new Blob([source], { type: 'text/javascript' })));
    const syncInWorkers = await new Promise<boolean>((resolve) => {
      worker.onmessage = ({ data }) => resolve(data === true);
      worker.onerror = () => resolve(false);
    });
    worker.terminate();
    return { names: names.sort(), syncInWorkers };
  },

  /** The keeper contract; resolves with the backend and the rules checked. */
  async contract(bytesIn?: BrowserKeeperBackend, withoutWorkers = false) {
    const backend = (await keeper(bytesIn)).backend;
    // Without Worker, the OPFS keeper writes through createWritable(), as where a page may not
    // start its writer worker (a Content Security Policy without blob: workers).
    const Worker = globalThis.Worker;
    if (withoutWorkers) (globalThis as { Worker?: unknown }).Worker = undefined;
    try {
      const steps = await keeperContract((options) => browserKeeper({ ...options, ...(bytesIn ? { bytesIn } : {}) }));
      return { backend, steps };
    } finally {
      globalThis.Worker = Worker;
    }
  },

  /**
   * Saves a record, then writes `chunks` MiB of patterned bytes (closed unless `close` is false,
   * as a crash would leave them). Reports the JS heap before, and its lowest and highest points while
   * writing (a collection during the write can drop the heap below where it started).
   * `reuse` writes every chunk from one buffer.
   */
  async write(id: string, chunks: number, seed: number, bytesIn?: BrowserKeeperBackend, close = true, reuse = false) {
    const k = await keeper(bytesIn);
    await k.save({ id, createdAt: Date.now(), size: chunks * MIB, recipients: ['alice@example.org'], label: id });
    const before = heap();
    let peak = before ?? 0;
    let low = before ?? 0;
    const started = performance.now();
    const writer = (await k.create(id)).getWriter();
    // Reusing one buffer keeps the writer's own garbage out of the heap measure; a keeper must
    // be done with a chunk once its write resolved, and check() finds any byte it was not.
    const buffer = new Uint8Array(MIB);
    for (let i = 0; i < chunks; i++) {
      await writer.write(reuse ? fillPattern(buffer, seed + i) : patterned(MIB, seed + i));
      const now = heap() ?? 0;
      peak = Math.max(peak, now);
      low = Math.min(low, now);
    }
    if (close) await writer.close();
    peak = Math.max(peak, heap() ?? 0);
    return {
      backend: k.backend,
      ms: Math.round(performance.now() - started),
      heapBefore: before,
      heapLow: low,
      heapPeak: peak,
    };
  },

  /** What a keeper lists, and whether `id`'s bytes are exactly the patterned chunks written. */
  async check(id: string, chunks: number, seed: number, bytesIn?: BrowserKeeperBackend) {
    const k = await keeper(bytesIn);
    const listed = (await k.list()).map((r) => ({ id: r.id, size: r.size, label: r.label }));
    const source = await k.open(id);
    // null, not undefined: WebDriver hands undefined back as null.
    if (source === undefined) return { backend: k.backend, listed, size: null, firstDifference: null };
    let firstDifference: number | null = null;
    const want = new Uint8Array(MIB);
    for (let i = 0; i < chunks && firstDifference === null; i++) {
      const got = await source.read(i * MIB, MIB);
      fillPattern(want, seed + i);
      for (let j = 0; j < MIB; j++)
        if (got[j] !== want[j]) {
          firstDifference = i * MIB + j;
          break;
        }
    }
    return { backend: k.backend, listed, size: source.size, firstDifference };
  },

  /**
   * The device tier of keys at rest on this engine: a user secret key and a session JWT in the PKG
   * client's cache, a recovery token in the keeper, then the origin's IndexedDB and OPFS dumped.
   * Reports which secrets the dump holds (none, we expect), whether they still open (a new cache
   * and keeper over the same storage, as after a reload), and what forgetting the keys leaves.
   */
  async secretsAtRest() {
    const random = () => Array.from(crypto.getRandomValues(new Uint8Array(24)), (b) => b.toString(36)).join('');
    const secrets = { usk: `usk-${random()}`, jwt: `jwt-${random()}`, token: `token-${random()}` };
    const pkgUrl = 'https://pkg.example';
    const cache = () => new PkgCache(Promise.resolve(indexedDbStore()), pkgUrl, Date.now);
    const exp = Math.floor(Date.now() / 1000) + 3600;
    await cache().putSecret('usk', 'alice', secrets.usk, exp);
    await cache().putSecret('jwt', 'alice', secrets.jwt, exp);
    const k = await keeper();
    const writer = (await k.create('tok')).getWriter();
    await writer.write(new Uint8Array(3));
    await writer.close();
    await k.save({
      id: 'tok',
      createdAt: Date.now(),
      size: 3,
      recipients: ['alice@example.org'],
      recoveryToken: secrets.token,
    });
    const dump = await originStorageText();
    const reopened = {
      usk: await cache().secret('usk', 'alice'),
      jwt: await cache().secret('jwt', 'alice'),
      token: (await (await keeper()).list()).find((r) => r.id === 'tok')?.recoveryToken,
    };
    await cache().forgetSecrets();
    const after = await originStorageText();
    await (await keeper()).remove('tok');
    return {
      secrets,
      leaked: Object.values(secrets).filter((s) => dump.includes(s)),
      sealedEntries: ['|usk|', '|jwt|'].filter((s) => dump.includes(s)),
      deviceKeys: dump.split('[CryptoKey AES-GCM extractable=false]').length - 1,
      reopened,
      afterForget: {
        entries: ['|usk|', '|jwt|'].filter((s) => after.includes(s)),
        cacheKey: after.includes(`pg|${pkgUrl}|device-key`),
      },
    };
  },
};

export type KeeperTestApi = typeof api;
(globalThis as unknown as { keeperTest: KeeperTestApi }).keeperTest = api;
