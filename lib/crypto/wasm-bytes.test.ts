import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { embeddedWasmBytesModule } from '../build/wasm-bytes.js';
import * as emitted from './wasm-bytes.js';

/**
 * The WebAssembly the library runs, pinned. A change to an emitter that changes these bytes fails
 * here first: update the hash in the same commit, after the differential tests (keccak-wasm,
 * ristretto-wasm, bls-wasm) pass, so that the change to what browsers execute is a reviewed one.
 */
const PINNED = {
  keccak: '48dc5e1205bbc01544552aaab734b34aaa27aef49c6fe9f6e68b6d2c7d611f4d',
  ristretto: '9d12f2285a4ff133146be325d309485548592e5871ecbc0204b53018b4bc82e7',
  bls: 'a92f09b749fc975ac3f69be27b0bfcf7b877e0464f9de71b6a6b6364a502889d',
};

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

describe('the WebAssembly modules', () => {
  it('are the pinned bytes', async () => {
    expect({
      keccak: sha256(await emitted.keccakWasmBytes()),
      ristretto: sha256(await emitted.ristrettoWasmBytes()),
      bls: sha256(await emitted.blsWasmBytes()),
    }).toEqual(PINNED);
    expect(emitted.wasmBytesOrigin).toBe('emitted');
  });

  const dir = mkdtempSync(join(tmpdir(), 'pg-wasm-bytes-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('the built package embeds the same bytes, compressed, needing only web APIs to inflate them', async () => {
    const file = join(dir, 'wasm-bytes.mjs');
    const source = await embeddedWasmBytesModule();
    writeFileSync(file, source);
    const built = (await import(/* @vite-ignore */ pathToFileURL(file).href)) as typeof emitted;
    expect(built.wasmBytesOrigin).toBe('embedded');
    expect(sha256(await built.keccakWasmBytes())).toBe(PINNED.keccak);
    expect(sha256(await built.ristrettoWasmBytes())).toBe(PINNED.ristretto);
    expect(sha256(await built.blsWasmBytes())).toBe(PINNED.bls);
    // Each call hands out its own copy: a caller that detaches or changes one cannot touch the next.
    const a = await built.keccakWasmBytes();
    a[0] = 0xff;
    expect((await built.keccakWasmBytes())[0]).toBe(0);
    expect(WebAssembly.validate((await built.ristrettoWasmBytes()) as Uint8Array<ArrayBuffer>)).toBe(true);
    expect(WebAssembly.validate((await built.blsWasmBytes()) as Uint8Array<ArrayBuffer>)).toBe(true);
    // Compressed: the three modules' bytes (73 KB) take less than a third of that in the script.
    const raw = [await emitted.keccakWasmBytes(), await emitted.ristrettoWasmBytes(), await emitted.blsWasmBytes()];
    expect(source.length).toBeLessThan(raw.reduce((n, b) => n + b.length, 0) / 3);
  });
});
