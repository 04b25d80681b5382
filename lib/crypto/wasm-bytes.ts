import { buildBlsModule } from './bls-wasm-module.js';
import { keccakModuleBytes } from './keccak-wasm-module.js';
import { ristrettoModule } from './ristretto-wasm-module.js';

/**
 * The bytes of the library's WebAssembly modules: Keccak-f[1600] (keccak-wasm-module.ts),
 * ristretto255 (ristretto-wasm-module.ts) with its default options, and BLS12-381
 * (bls-wasm-module.ts).
 *
 * In the repository this module runs the emitters, so a change to an emitter takes effect at once.
 * The package build replaces it with the same bytes embedded (lib/build/wasm-bytes.ts), so a
 * published worker or service worker compiles them without generating them first. The bytes are
 * pinned by SHA-256 in wasm-bytes.test.ts: changing them is a reviewed change.
 *
 * Asynchronous, because the embedded bytes are compressed and inflated with DecompressionStream;
 * every caller compiles them asynchronously anyway.
 */

/** 'emitted' here; 'embedded' in the built package. */
export const wasmBytesOrigin: 'emitted' | 'embedded' = 'emitted';

export const keccakWasmBytes = async (): Promise<Uint8Array> => keccakModuleBytes();

export const ristrettoWasmBytes = async (): Promise<Uint8Array> => ristrettoModule().bytes;

export const blsWasmBytes = async (): Promise<Uint8Array> => buildBlsModule().bytes;
