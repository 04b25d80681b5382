import { fileURLToPath } from 'node:url';

/**
 * The WebAssembly emitters: the modules that generate the Keccak, ristretto255 and BLS12-381
 * modules' bytes. In the repository lib/crypto/wasm-bytes.ts runs them; the package ships their
 * bytes instead (wasm-bytes.ts here), so neither lib/dist/ nor the ready-built scripts carry them.
 * What the runtime shares with them (memory maps, export names, table sizes) lives in the
 * `*-wasm-layout.ts` modules beside them. no-emitters.test.ts checks that no runtime module
 * imports one of these, and that wasm-bytes.ts reaches no other module the runtime does not.
 */
export const EMITTERS = [
  'wasm-emit.ts',
  'keccak-wasm-module.ts',
  'ristretto-wasm-field.ts',
  'ristretto-wasm-module.ts',
  'bls-wasm-field.ts',
  'bls-wasm-module.ts',
] as const;

/** The emitters' source files (absolute paths). */
export const emitterSources = (): string[] =>
  EMITTERS.map((file) => fileURLToPath(new URL(`../crypto/${file}`, import.meta.url)));

/** What tsc writes for an emitter into `dist` (lib/dist/, ending in a slash). */
export const emitterOutputs = (dist: string): string[] =>
  EMITTERS.flatMap((file) => ['.js', '.d.ts'].map((ext) => `${dist}lib/crypto/${file.replace(/\.ts$/, ext)}`));
