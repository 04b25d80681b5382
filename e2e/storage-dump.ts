import type { Page } from '@playwright/test';

/**
 * Everything the page's origin keeps in IndexedDB (every database, store, key and value) and in
 * the Origin Private File System (every file's bytes), as one latin1 string: bytes as themselves,
 * strings as UTF-8 bytes, so a test can look for a secret's text or its raw bytes in it. CryptoKeys
 * appear as their description only (a non-extractable one has no bytes a page could read).
 */
export function dumpOriginStorage(page: Page): Promise<string> {
  return page.evaluate(originStorageText);
}

/**
 * The same, run in the page itself: the engines' pages (e2e/engines/keeper-page.ts) bundle it,
 * since their drivers pass plain values only. Self-contained, as page.evaluate needs.
 */
export async function originStorageText(): Promise<string> {
  const parts: string[] = [];
  const latin1 = (bytes: Uint8Array) => Array.from(bytes, (b) => String.fromCharCode(b)).join('');
  const utf8 = (text: string) => latin1(new TextEncoder().encode(text));
  const walk = async (value: unknown, depth = 0): Promise<void> => {
    if (depth > 20) return;
    if (value instanceof Uint8Array) parts.push(latin1(value));
    else if (ArrayBuffer.isView(value))
      parts.push(latin1(new Uint8Array(value.buffer, value.byteOffset, value.byteLength)));
    else if (value instanceof ArrayBuffer) parts.push(latin1(new Uint8Array(value)));
    else if (value instanceof Blob) parts.push(latin1(new Uint8Array(await value.arrayBuffer())));
    else if (value instanceof CryptoKey)
      parts.push(`[CryptoKey ${value.algorithm.name} extractable=${value.extractable}]`);
    else if (typeof value === 'string') parts.push(utf8(value));
    else if (Array.isArray(value)) for (const v of value) await walk(v, depth + 1);
    else if (value instanceof Map) for (const [k, v] of value) await walk([k, v], depth + 1);
    else if (typeof value === 'object' && value !== null)
      for (const [k, v] of Object.entries(value)) await walk([k, v], depth + 1);
    else parts.push(String(value));
  };
  for (const { name } of await indexedDB.databases()) {
    if (name === undefined) continue;
    const db = await new Promise<IDBDatabase>((resolve, reject) => {
      const request = indexedDB.open(name);
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => reject(request.error);
    });
    for (const storeName of Array.from(db.objectStoreNames)) {
      const store = db.transaction(storeName, 'readonly').objectStore(storeName);
      const [keys, values] = await Promise.all(
        [store.getAllKeys(), store.getAll()].map(
          (request) =>
            new Promise<unknown[]>((resolve, reject) => {
              request.onsuccess = () => resolve(request.result as unknown[]);
              request.onerror = () => reject(request.error);
            }),
        ),
      );
      await walk([name, storeName, keys, values]);
    }
    db.close();
  }
  const files = async (dir: FileSystemDirectoryHandle): Promise<void> => {
    for await (const [name, handle] of (
      dir as unknown as { entries(): AsyncIterable<[string, FileSystemHandle]> }
    ).entries()) {
      parts.push(utf8(name));
      if (handle.kind === 'file') await walk(await (handle as FileSystemFileHandle).getFile());
      else await files(handle as FileSystemDirectoryHandle);
    }
  };
  const root = await navigator.storage?.getDirectory?.().catch(() => undefined);
  if (root !== undefined) await files(root);
  return parts.join('\n');
}
