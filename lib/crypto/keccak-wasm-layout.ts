/**
 * What the Keccak-f[1600] WebAssembly module and its JavaScript side agree on: the memory map and
 * the export names. keccak-wasm-module.ts emits the module to this layout and keccak-wasm.ts drives
 * it; keeping the layout here keeps the emitter out of the runtime (and out of the package, which
 * ships the emitted bytes, lib/crypto/wasm-bytes.ts).
 *
 * Linear memory (fixed size, never grows):
 *   [RC_OFFSET, +192)        the 24 round constants
 *   [STATE_OFFSET, +200)     the one working state; callers copy an object's state in and out
 *   [WINDOW_OFFSET, end)     the input window: whole blocks copied in from JavaScript
 */

export const RC_OFFSET = 0;
export const STATE_OFFSET = 256;
export const STATE_BYTES = 200;
export const WINDOW_OFFSET = 512;
export const MEMORY_PAGES = 4;
export const WINDOW_BYTES = MEMORY_PAGES * 65536 - WINDOW_OFFSET;

/** Rates in 64-bit lanes of the functions the module exports (see `absorbExport`). */
export const RATE_LANES = [21, 17, 9] as const; // SHAKE128; SHAKE256 / SHA3-256; SHA3-512
export type RateLanes = (typeof RATE_LANES)[number];

export const absorbExport = (lanes: RateLanes) => `absorb${lanes * 8}`;
export const PERMUTE_EXPORT = 'permute';
export const MEMORY_EXPORT = 'memory';
