import { keccakModuleBytes } from './keccak-wasm-module.js';
import { ristrettoModule } from './ristretto-wasm-module.js';

/**
 * The bytes of the library's two WebAssembly modules: Keccak-f[1600] (keccak-wasm-module.ts) and
 * ristretto255 (ristretto-wasm-module.ts), with their default options.
 *
 * In the repository this module runs the emitters, so a change to an emitter takes effect at once.
 * The package build replaces it with the same bytes embedded (lib/build/wasm-bytes.ts), so a
 * published worker or service worker compiles them without generating them first. The bytes are
 * pinned by SHA-256 in wasm-bytes.test.ts: changing them is a reviewed change.
 */

/** 'emitted' here; 'embedded' in the built package. */
export const wasmBytesOrigin: 'emitted' | 'embedded' = 'emitted';

export const keccakWasmBytes = (): Uint8Array => keccakModuleBytes();

export const ristrettoWasmBytes = (): Uint8Array => ristrettoModule().bytes;
