import { clear, createStore } from 'idb-keyval';
import { UPLOADS_DB, UPLOADS_STORE } from '../../client/keeper-idb.js';
import { OPFS_FOLDER } from '../../client/keeper-opfs.js';
import { browserKeeper, type BrowserKeeperBackend } from '../../client/keeper-browser.js';
import { fillPattern, keeperContract, patterned } from '../../test/keeper-contract.js';

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
   * as a crash would leave them). Reports the JS heap before and its highest point while writing.
   * `reuse` writes every chunk from one buffer.
   */
  async write(id: string, chunks: number, seed: number, bytesIn?: BrowserKeeperBackend, close = true, reuse = false) {
    const k = await keeper(bytesIn);
    await k.save({ id, createdAt: Date.now(), size: chunks * MIB, recipients: ['alice@example.org'], label: id });
    const before = heap();
    let peak = before ?? 0;
    const started = performance.now();
    const writer = (await k.create(id)).getWriter();
    // Reusing one buffer keeps the writer's own garbage out of the heap measure; a keeper must
    // be done with a chunk once its write resolved, and check() finds any byte it was not.
    const buffer = new Uint8Array(MIB);
    for (let i = 0; i < chunks; i++) {
      await writer.write(reuse ? fillPattern(buffer, seed + i) : patterned(MIB, seed + i));
      peak = Math.max(peak, heap() ?? 0);
    }
    if (close) await writer.close();
    peak = Math.max(peak, heap() ?? 0);
    return { backend: k.backend, ms: Math.round(performance.now() - started), heapBefore: before, heapPeak: peak };
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
};

export type KeeperTestApi = typeof api;
(globalThis as unknown as { keeperTest: KeeperTestApi }).keeperTest = api;
