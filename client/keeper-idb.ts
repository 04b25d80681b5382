import { createStore, del, delMany, get, keys, set, type UseStore } from 'idb-keyval';
import type { ByteSource } from '../lib/net/sources.js';
import type { KeeperBackend, KeptBytes, UploadRecord } from './keeper.js';

/**
 * Unfinished uploads in IndexedDB: the records always (where IndexedDB works), and the sealed
 * bytes where the Origin Private File System cannot be written from a page. idb-keyval's
 * createStore opens a database with exactly one object store, so the uploads have a database of
 * their own, apart from the PKG cache's 'postguard'.
 *
 * Keys: `record:<id>` → the record; `bytes:<id>` → the manifest of committed bytes;
 * `piece:<id>:<generation>:<n>` → {@link PIECE_BYTES} of them (the last one shorter) as a Blob, so
 * that a read fetches only its slice, or as a Uint8Array where the engine refuses Blobs (WebKit's
 * ephemeral sessions: "Error preparing Blob/File data to be stored"). A write
 * puts its pieces under a fresh generation and commits by writing the manifest, so a crash
 * mid-write leaves only unreferenced pieces, which the sweep removes; the generation starts with
 * its time so the sweep can tell an old leftover from a write still under way in another tab.
 */

/** The uploads' database (apart from the PKG cache's 'postguard': idb-keyval opens one store per database). */
export const UPLOADS_DB = 'postguard-uploads';
/** The one store of {@link UPLOADS_DB}. */
export const UPLOADS_STORE = 'uploads';

/** Bytes per stored piece: one buffer of this size is all a write holds in memory. */
export const PIECE_BYTES = 4 * 1024 * 1024;

interface Manifest {
  generation: string;
  size: number;
  pieces: number;
  modifiedAt: number;
}

const recordKey = (id: string) => `record:${id}`;
const manifestKey = (id: string) => `bytes:${id}`;
const pieceKey = (id: string, generation: string, n: number) => `piece:${id}:${generation}:${n}`;
const pieceKeys = (id: string, m: Pick<Manifest, 'generation' | 'pieces'>) =>
  Array.from({ length: m.pieces }, (_, n) => pieceKey(id, m.generation, n));

function newGeneration(): string {
  const random = crypto.getRandomValues(new Uint32Array(2));
  return `${Date.now()}.${random[0]!.toString(36)}${random[1]!.toString(36)}`;
}

const isManifest = (m: unknown): m is Manifest =>
  m !== null &&
  typeof m === 'object' &&
  typeof (m as Manifest).generation === 'string' &&
  Number.isSafeInteger((m as Manifest).size) &&
  Number.isSafeInteger((m as Manifest).pieces) &&
  typeof (m as Manifest).modifiedAt === 'number';

/** The store, once it answered a read (private modes may expose indexedDB and refuse it). */
export async function openUploadsStore(): Promise<UseStore> {
  const store = createStore(UPLOADS_DB, UPLOADS_STORE);
  await get('probe', store);
  return store;
}

async function stringKeys(store: UseStore, prefix: string): Promise<string[]> {
  return (await keys(store)).filter((k): k is string => typeof k === 'string' && k.startsWith(prefix));
}

/** The record half of a backend: records in the uploads store. */
export function idbRecords(store: UseStore): Pick<KeeperBackend, 'saveRecord' | 'listRecords' | 'removeRecord'> {
  return {
    saveRecord: (record: UploadRecord) => set(recordKey(record.id), record, store),
    listRecords: async () => {
      const found = await stringKeys(store, 'record:');
      return Promise.all(found.map(async (key) => ({ id: key.slice('record:'.length), value: await get(key, store) })));
    },
    removeRecord: (id) => del(recordKey(id), store),
  };
}

/** Whether this engine stores Blobs in IndexedDB (and gives them back as Blobs). */
export async function storesBlobs(store: UseStore): Promise<boolean> {
  try {
    await set('probe:blob', new Blob([new Uint8Array([1])]), store);
    const back = await get<unknown>('probe:blob', store);
    await del('probe:blob', store);
    return back instanceof Blob && back.size === 1;
  } catch {
    return false;
  }
}

/** A writer that stores `id`'s bytes as pieces and commits them with a manifest. */
function pieceWriter(store: UseStore, id: string, asBlobs: boolean): WritableStream<Uint8Array> {
  const generation = newGeneration();
  let buffer: Uint8Array<ArrayBuffer> | undefined;
  let filled = 0;
  let pieces = 0;
  let size = 0;
  const flush = async () => {
    if (filled === 0) return;
    // Blob copies the bytes, and so does put()'s structured clone (of the whole buffer under a
    // view: hence the slice of a last, partial piece), so the one buffer is reused for the next.
    const bytes = filled === PIECE_BYTES ? buffer! : buffer!.slice(0, filled);
    await set(pieceKey(id, generation, pieces), asBlobs ? new Blob([bytes]) : bytes, store);
    pieces += 1;
    filled = 0;
  };
  const removeAll = async () => {
    const committed = await get<unknown>(manifestKey(id), store);
    const stale = pieceKeys(id, { generation, pieces });
    if (isManifest(committed)) stale.push(...pieceKeys(id, committed), manifestKey(id));
    await delMany(stale, store);
  };
  return new WritableStream<Uint8Array>({
    async write(chunk) {
      size += chunk.length;
      for (let at = 0; at < chunk.length;) {
        buffer ??= new Uint8Array(PIECE_BYTES);
        const take = Math.min(PIECE_BYTES - filled, chunk.length - at);
        buffer.set(chunk.subarray(at, at + take), filled);
        filled += take;
        at += take;
        if (filled === PIECE_BYTES) await flush();
      }
    },
    async close() {
      await flush();
      buffer = undefined;
      const earlier = await get<unknown>(manifestKey(id), store);
      const manifest: Manifest = { generation, size, pieces, modifiedAt: Date.now() };
      await set(manifestKey(id), manifest, store);
      if (isManifest(earlier) && earlier.generation !== generation) await delMany(pieceKeys(id, earlier), store);
    },
    async abort() {
      buffer = undefined;
      await removeAll();
    },
  });
}

/**
 * A span of the committed pieces: only the pieces it covers are read (a Blob only its slice). The
 * last Uint8Array piece is kept, as an upload reads in order in spans smaller than a piece: one
 * piece fetched per piece, not per span.
 */
function pieceSource(store: UseStore, id: string, m: Manifest): ByteSource {
  let last: { n: number; bytes: Uint8Array } | undefined;
  const pieceAt = async (n: number) => {
    if (last?.n === n) return last.bytes;
    const piece = await get<unknown>(pieceKey(id, m.generation, n), store);
    if (piece instanceof Uint8Array) last = { n, bytes: piece };
    return piece;
  };
  return {
    size: m.size,
    async read(offset, length) {
      const out = new Uint8Array(length);
      for (let filled = 0; filled < length;) {
        const at = offset + filled;
        const n = Math.floor(at / PIECE_BYTES);
        const piece = await pieceAt(n);
        const start = at - n * PIECE_BYTES;
        const end = start + length - filled;
        let part: Uint8Array;
        if (piece instanceof Blob) part = new Uint8Array(await piece.slice(start, end).arrayBuffer());
        else if (piece instanceof Uint8Array) part = piece.subarray(start, end);
        else throw new Error(`piece ${n} of upload ${id} is gone`);
        if (part.length === 0) throw new Error(`piece ${n} of upload ${id} is short`);
        out.set(part, filled);
        filled += part.length;
      }
      return out;
    },
  };
}

/** The bytes half of a backend: pieces in the uploads store. */
export function idbBytes(
  store: UseStore,
  asBlobs: boolean,
): Pick<KeeperBackend, 'createBytes' | 'openBytes' | 'listBytes' | 'removeBytes' | 'sweep'> {
  const manifestOf = async (id: string) => {
    const m = await get<unknown>(manifestKey(id), store);
    return isManifest(m) ? m : undefined;
  };
  return {
    createBytes: async (id) => pieceWriter(store, id, asBlobs),
    openBytes: async (id) => {
      const m = await manifestOf(id);
      return m === undefined || m.size === 0 ? undefined : pieceSource(store, id, m);
    },
    listBytes: async () => {
      const found: KeptBytes[] = [];
      for (const key of await stringKeys(store, 'bytes:')) {
        const id = key.slice('bytes:'.length);
        const m = await manifestOf(id);
        if (m !== undefined && m.size > 0) found.push({ id, size: m.size, modifiedAt: m.modifiedAt });
      }
      return found;
    },
    // Every piece of `id`, committed or not: a write a reload cut off left pieces no manifest
    // names, and a removed upload keeps nothing (no other write of the same id can be under way).
    removeBytes: async (id) => {
      const pieces = await stringKeys(store, `piece:${id}:`);
      await delMany([...pieces, manifestKey(id)], store);
    },
    async sweep(before) {
      const live = new Set<string>();
      for (const key of await stringKeys(store, 'bytes:')) {
        const id = key.slice('bytes:'.length);
        const m = await manifestOf(id);
        if (m !== undefined) live.add(`${id}:${m.generation}`);
      }
      const stale = (await stringKeys(store, 'piece:')).filter((key) => {
        const [, id, generation] = key.split(':');
        const startedAt = Number(generation?.split('.')[0]);
        return !live.has(`${id}:${generation}`) && !(startedAt >= before);
      });
      if (stale.length > 0) await delMany(stale, store);
    },
  };
}
