import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import * as node from './aes-node.js';
import * as portable from './aes-portable.js';
import { GCM_TAG_BYTES } from './aes.js';

// The two sides of the '#aes' seam must be interchangeable: what one seals the other opens, and
// both refuse the same inputs the same way.
const backends = { node, portable } as const;
const key = new Uint8Array(16).map((_, i) => i * 7);
const iv = new Uint8Array(12).map((_, i) => 200 - i);

describe.each(Object.entries(backends))('AES-128-GCM, %s backend', (name, impl) => {
  const other = name === 'node' ? portable : node;

  it('opens what the other backend sealed, and the other opens what it sealed', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 5000 }), async (plaintext) => {
        const [k, ko] = await Promise.all([impl.importAesKey(key), other.importAesKey(key)]);
        const sealed = await impl.aesGcmSeal(k, iv, plaintext);
        expect(sealed.length).toBe(plaintext.length + GCM_TAG_BYTES);
        expect(await other.aesGcmOpen(ko, iv, sealed)).toEqual(plaintext);
        expect(await impl.aesGcmOpen(k, iv, await other.aesGcmSeal(ko, iv, plaintext))).toEqual(plaintext);
      }),
      { numRuns: 40 },
    );
  });

  it('seals a segment in pieces that, joined, are the bytes aesGcmSeal gives', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 5000 }), async (plaintext) => {
        const [k, ko] = await Promise.all([impl.importAesKey(key), other.importAesKey(key)]);
        const pieces = await impl.aesGcmSealPieces(k, iv, plaintext);
        // Each piece may be transferred to another thread by the caller's sink: none shares a buffer.
        for (const p of pieces) expect([p.byteOffset, p.buffer.byteLength]).toEqual([0, p.length]);
        const joined = new Uint8Array(pieces.reduce((n, p) => n + p.length, 0));
        pieces.reduce((at, p) => (joined.set(p, at), at + p.length), 0);
        expect(joined).toEqual(await other.aesGcmSeal(ko, iv, plaintext));
      }),
      { numRuns: 30 },
    );
    if (name === 'node') {
      await expect(impl.aesGcmSealPieces(await portable.importAesKey(key), iv, new Uint8Array(8))).rejects.toThrow(
        TypeError,
      );
    }
  });

  it('answers undefined, never bytes, for a flipped bit, a wrong nonce or key, or input shorter than a tag', async () => {
    const k = await impl.importAesKey(key);
    const sealed = await impl.aesGcmSeal(k, iv, new Uint8Array(1000).fill(3));
    for (const at of [0, 500, sealed.length - 1]) {
      const bad = sealed.slice();
      bad[at]! ^= 1;
      expect(await impl.aesGcmOpen(k, iv, bad)).toBeUndefined();
    }
    expect(
      await impl.aesGcmOpen(
        k,
        iv.map((b, i) => (i === 11 ? b ^ 1 : b)),
        sealed,
      ),
    ).toBeUndefined();
    expect(await impl.aesGcmOpen(await impl.importAesKey(key.map((b) => b ^ 1)), iv, sealed)).toBeUndefined();
    expect(await impl.aesGcmOpen(k, iv, sealed.subarray(0, GCM_TAG_BYTES - 1))).toBeUndefined();
    // The empty message: the tag alone.
    expect(await impl.aesGcmOpen(k, iv, await impl.aesGcmSeal(k, iv, new Uint8Array()))).toEqual(new Uint8Array());
  });

  it('refuses a key of the wrong length, and a key made by the other backend', async () => {
    await expect(impl.importAesKey(new Uint8Array(15))).rejects.toThrow(RangeError);
    if (name === 'node') {
      const foreign = await portable.importAesKey(key);
      await expect(impl.aesGcmOpen(foreign, iv, new Uint8Array(32))).rejects.toThrow(TypeError);
      await expect(impl.aesGcmSeal(foreign, iv, new Uint8Array(32))).rejects.toThrow(TypeError);
    }
  });

  it('returns plaintext that owns its whole buffer (safe to transfer to a worker)', async () => {
    const k = await impl.importAesKey(key);
    for (const n of [0, 1, 100, 5000, 300_000]) {
      const out = (await impl.aesGcmOpen(k, iv, await impl.aesGcmSeal(k, iv, new Uint8Array(n).fill(9))))!;
      expect([out.byteOffset, out.buffer.byteLength]).toEqual([0, n]);
    }
  });
});
