import { createStore, del, get, keys, set, type UseStore } from 'idb-keyval';

/**
 * Where the PKG client keeps what it caches: the PKG's public keys (always) and, when the caller
 * opts in, session JWTs and decryption keys until they expire. A tiny async key-value interface,
 * so tests and apps can bring their own; IndexedDB in browsers (pages and workers), memory
 * elsewhere. Values are plain JSON-like objects (structured-cloneable).
 */
export interface KeyValueStore {
  /** The value stored under `key`, or undefined. */
  get<T>(key: string): Promise<T | undefined>;
  /** Stores `value` under `key`, replacing what was there. */
  set(key: string, value: unknown): Promise<void>;
  /** Removes `key`, if it is there. */
  delete(key: string): Promise<void>;
  /** Every key stored (the client finds its own entries among them). */
  keys(): Promise<string[]>;
}

/** Forgotten when the page goes away. */
export function memoryStore(): KeyValueStore {
  const map = new Map<string, unknown>();
  return {
    get: async <T>(key: string) => map.get(key) as T | undefined,
    set: async (key, value) => {
      map.set(key, structuredClone(value));
    },
    delete: async (key) => {
      map.delete(key);
    },
    keys: async () => [...map.keys()],
  };
}

export const DEFAULT_DB_NAME = 'postguard';
export const DEFAULT_STORE_NAME = 'pkg-cache';

/** IndexedDB through idb-keyval: survives reloads, shared by every page and worker of the origin. */
export function indexedDbStore(dbName = DEFAULT_DB_NAME, storeName = DEFAULT_STORE_NAME): KeyValueStore {
  const store: UseStore = createStore(dbName, storeName);
  return {
    get: <T>(key: string) => get<T>(key, store),
    set: (key, value) => set(key, value, store),
    delete: (key) => del(key, store),
    keys: async () => (await keys<IDBValidKey>(store)).filter((k): k is string => typeof k === 'string'),
  };
}

/**
 * IndexedDB when this realm has a working one, else memory. Some browsers expose `indexedDB` but
 * refuse to open it (private modes, disabled storage), so it is probed once.
 */
export async function defaultStore(dbName = DEFAULT_DB_NAME, storeName = DEFAULT_STORE_NAME): Promise<KeyValueStore> {
  if (typeof indexedDB === 'undefined') return memoryStore();
  const store = indexedDbStore(dbName, storeName);
  try {
    await store.get('probe');
    return store;
  } catch {
    return memoryStore();
  }
}
