import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * The reference implementation, @e4a/pg-wasm 0.5.10 (web build), loaded synchronously in Node.
 * Tests and benchmarks only: the product never depends on it.
 */
export interface PgWasm {
  seal(mpk: string, options: unknown, plain: Uint8Array): Promise<Uint8Array>;
  sealStream(mpk: string, options: unknown, readable: ReadableStream, writable: WritableStream): Promise<void>;
  Unsealer: {
    new: (
      input: Uint8Array,
      vk: string,
    ) => Promise<{
      inspect_header(): Map<string, unknown>;
      public_identity(): unknown;
      unseal(id: string, usk: string): Promise<[Uint8Array, unknown]>;
    }>;
  };
  StreamUnsealer: {
    new: (
      readable: ReadableStream,
      vk: string,
    ) => Promise<{
      inspect_header(): Map<string, unknown>;
      public_identity(): unknown;
      unseal(id: string, usk: string, writable: WritableStream): Promise<unknown>;
    }>;
  };
}

let loaded: PgWasm | undefined;

export async function loadPgWasm(): Promise<PgWasm> {
  if (loaded) return loaded;
  const entry = import.meta.resolve('@e4a/pg-wasm/web');
  const mod = await import(entry);
  mod.initSync({ module: readFileSync(fileURLToPath(new URL('./index_bg.wasm', entry))) });
  loaded = mod as PgWasm;
  return loaded;
}
