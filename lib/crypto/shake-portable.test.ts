import { shake128 } from '@noble/hashes/sha3.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { hex } from '../../test/vectors.js';

/** A fresh copy of the portable module (and of the wasm loader it memoizes). */
const freshPortable = async () => {
  vi.resetModules();
  return import('./shake-portable.js');
};

const msg = new Uint8Array(1000).map((_, i) => (i * 13 + 5) & 0xff);
const expected = (dkLen: number) => hex(shake128(msg, { dkLen }));

/** Hashes with a running state and a fork, like the signing code. */
const exercise = (create: () => import('./xof.js').Xof) => {
  const running = create().update(msg.subarray(0, 400));
  const fork = running.clone();
  running.update(msg.subarray(400));
  fork.update(msg.subarray(400));
  return [hex(running.digest(64)), hex(fork.digest(200))];
};

afterEach(() => {
  vi.unstubAllGlobals();
  vi.restoreAllMocks();
});

describe('loadShake128 (portable)', () => {
  it('uses WebAssembly when it is available, compiling it once', async () => {
    const instantiate = vi.spyOn(WebAssembly, 'instantiate');
    const shake = await freshPortable();
    expect(shake.shakeBackend).toBe('@noble/hashes');
    const [a, b] = await Promise.all([shake.loadShake128(), shake.loadShake128()]);
    expect(a).toBe(b);
    expect(await shake.loadShake128()).toBe(a);
    expect(instantiate).toHaveBeenCalledTimes(1);
    expect(shake.shakeBackend).toBe('wasm');
    expect(exercise(a)).toEqual([expected(64), expected(200)]);
    // The synchronous factory follows the loaded backend.
    expect(exercise(shake.createShake128)).toEqual([expected(64), expected(200)]);
    expect(a().constructor).toBe(shake.createShake128().constructor);
  });

  it('falls back to noble when WebAssembly is missing', async () => {
    vi.stubGlobal('WebAssembly', undefined);
    const shake = await freshPortable();
    const create = await shake.loadShake128();
    expect(shake.shakeBackend).toBe('@noble/hashes');
    expect(exercise(create)).toEqual([expected(64), expected(200)]);
    expect(exercise(shake.createShake128)).toEqual([expected(64), expected(200)]);
  });

  it('falls back to noble when compilation fails (e.g. a CSP without wasm-unsafe-eval)', async () => {
    const instantiate = vi
      .spyOn(WebAssembly, 'instantiate')
      .mockRejectedValue(new WebAssembly.CompileError('Wasm code generation disallowed by embedder'));
    const shake = await freshPortable();
    const create = await shake.loadShake128();
    await shake.loadShake128();
    expect(instantiate).toHaveBeenCalledTimes(1);
    expect(shake.shakeBackend).toBe('@noble/hashes');
    expect(exercise(create)).toEqual([expected(64), expected(200)]);
  });

  it('the noble fallback keeps the Xof contract', async () => {
    vi.stubGlobal('WebAssembly', undefined);
    const shake = await freshPortable();
    const create = await shake.loadShake128();
    const xof = create().update(msg);
    expect(hex(xof.clone().digest(0))).toBe('');
    expect(hex(xof.clone().digest(1))).toBe(expected(1));
    expect(hex(xof.digest(169))).toBe(expected(169));
    expect(() => xof.update(msg)).toThrow();
  });
});
