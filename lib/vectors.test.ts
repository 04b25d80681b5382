import { describe, expect, it } from 'vitest';
import { chunkedSource, collector } from '../test/streams.js';
import { hex, stream2seg, unb64, unhex, vectors } from '../test/vectors.js';
import { StreamUnsealer, Unsealer } from './index.js';

/** Known answers: ciphertexts made by the real pg-wasm 0.5.10, opened by us. */

const { keys } = vectors;
const recipients = ['Bob', 'Charlie'] as const;
const plaintextOf = (v: any): Uint8Array =>
  v.plaintext_hex !== undefined ? unhex(v.plaintext_hex) : Uint8Array.from({ length: 262_644 }, (_, i) => i % 251);

const hiddenPolicies = (v: any) =>
  new Map(
    v.parsed.header.recipients.map((r: any) => [
      r.id,
      { ts: r.policy.ts, con: r.policy.con.map((a: any) => ({ t: a.t, v: a.v ?? undefined })) },
    ]),
  );

for (const v of [...vectors.vectors, stream2seg.vector]) {
  const ciphertext = unb64(v.ciphertext_b64);
  const streaming = 'Streaming' in v.parsed.header.mode;
  describe(`vector ${v.name}`, () => {
    it('shows the recipients hidden policies and the verified sender', async () => {
      const u = streaming
        ? await StreamUnsealer.new(chunkedSource(ciphertext, 1000), keys.vk_b64)
        : await Unsealer.new(ciphertext, keys.vk_b64);
      expect(u.inspect_header()).toEqual(hiddenPolicies(v));
      expect(u.public_identity()).toEqual(v.parsed.header_sig_ext.pol);
    });

    for (const id of recipients) {
      it(`opens for ${id} with the recorded plaintext and signer`, async () => {
        const usk = keys.usk[id].usk_b64;
        // pg-wasm 0.5.10 wrote no sender copy: the same result, not bound.
        const recorded = v[`unseal_result_${id}`];
        const expected = { ...recorded, contentSigner: 'private' in recorded ? 'private' : 'public', bound: false };
        if (streaming) {
          const out = collector();
          const u = await StreamUnsealer.new(chunkedSource(ciphertext, 4096), keys.vk_b64);
          const result = await u.unseal(id, usk, out.writable);
          expect(hex(out.bytes())).toBe(hex(plaintextOf(v)));
          expect(out.state()).toBe('closed');
          expect(result).toEqual(expected);
        } else {
          const u = await Unsealer.new(ciphertext, keys.vk_b64);
          const [plain, result] = await u.unseal(id, usk);
          expect(hex(plain)).toBe(hex(plaintextOf(v)));
          expect(result).toEqual(expected);
          expect('private' in result).toBe('private' in expected);
        }
      });
    }
  });
}
