import { beforeAll, describe, expect, it } from 'vitest';
import { vectors, unb64, unhex } from '../../test/vectors.js';
import { signingIdentity } from '../identity.js';
import { normalizePolicy } from '../policy.js';
import {
  GgBoundVerifier,
  ggBackend,
  ggKeygen,
  ggSetup,
  ggSign,
  ggVerify,
  loadGgAcceleration,
  parseSigningKey,
  parseVerifyingKey,
} from './gg.js';
import { createShake128 } from './shake-node.js';

/** With the WebAssembly backend loaded, signatures still interoperate with the BigInt path. */

beforeAll(async () => {
  await loadGgAcceleration();
});

describe('GG on the WebAssembly backend', () => {
  it('is active', () => {
    expect(ggBackend()).toBe('wasm');
  });

  it('verifies the pg-wasm header signatures with the bound verifier', () => {
    const vk = parseVerifyingKey(unb64(vectors.keys.vk_b64));
    for (const v of vectors.vectors) {
      const sigExt = v.parsed.header_sig_ext;
      const id = signingIdentity(normalizePolicy(sigExt.pol));
      const transcript = createShake128().update(unhex(v.parsed.header_hex));
      const bound = new GgBoundVerifier(vk, id);
      expect(bound.verify(unhex(sigExt.sig), transcript)).toBe(true);
      const other = createShake128().update(unhex(v.parsed.header_hex.replace(/^02/, '03')));
      expect(bound.verify(unhex(sigExt.sig), other)).toBe(false);
    }
  });

  it('signs what the BigInt verifier accepts, and verifies across the table threshold', () => {
    const { pk, sk } = ggSetup();
    const vk = parseVerifyingKey(pk);
    const id = new Uint8Array(32).fill(9);
    const key = parseSigningKey(ggKeygen(sk, id));
    const bound = new GgBoundVerifier(vk, id);
    const transcript = createShake128();
    for (let i = 0; i < 24; i++) {
      transcript.update(new Uint8Array([i, i]));
      const sig = ggSign(key, transcript);
      expect(ggVerify(vk, id, sig, transcript)).toBe(true); // BigInt path
      expect(bound.verify(sig, transcript)).toBe(true); // wasm: one-shot, then prepared
      const bad = sig.slice();
      bad[(i * 7) % 96]! ^= 0x40;
      expect(bound.verify(bad, transcript)).toBe(false);
    }
  });
});
