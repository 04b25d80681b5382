import fc from 'fast-check';
import { expectSameBytes } from '../test/bytes.js';
import { beforeAll, describe, expect, it } from 'vitest';
import { chunkedSource, collector } from '../test/streams.js';
import { StreamUnsealer, Unsealer, seal, sealStream, type Policy, type SealOptions } from './index.js';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from './keys.js';

/** Property tests: random policies, unicode recipient ids and values survive a round trip. */

let kem: { mpk: string; msk: string };
let ibs: { vk: string; sk: string };

beforeAll(() => {
  kem = generateKemKeys();
  ibs = generateSigningKeys();
});

const text = fc.string({ unit: 'grapheme', maxLength: 24 });
const attribute = fc
  .record({ t: text, v: fc.option(text, { nil: undefined }) })
  .map((a) => (a.v === undefined ? { t: a.t } : a));
const policy = fc.record({ ts: fc.integer({ min: 0, max: 2 ** 40 }), con: fc.array(attribute, { maxLength: 4 }) });
// A recipient needs at least one attribute (the empty identity is refused: lib/safety.test.ts), each
// with a type and a value (seal refuses the others: lib/seal-input.test.ts).
const recipientAttribute = fc.record({ t: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 24 }), v: text });
const recipientPolicy = fc.record({
  ts: fc.integer({ min: 0, max: 2 ** 40 }),
  con: fc.array(recipientAttribute, { minLength: 1, maxLength: 4 }),
});
const recipients = fc.uniqueArray(
  fc.tuple(fc.string({ unit: 'grapheme', minLength: 0, maxLength: 16 }), recipientPolicy),
  {
    minLength: 1,
    maxLength: 3,
    selector: ([id]) => id,
  },
);

function options(entries: Array<[string, Policy]>, signer: Policy, priv?: Policy): SealOptions {
  return {
    policy: new Map(entries),
    pubSignKey: { key: extractSigningKey(ibs.sk, signer), policy: signer },
    ...(priv ? { privSignKey: { key: extractSigningKey(ibs.sk, priv), policy: priv } } : {}),
  };
}

describe('round trips', () => {
  it('in memory, for random policies, ids and values', async () => {
    await fc.assert(
      fc.asyncProperty(
        recipients,
        policy,
        fc.option(policy, { nil: undefined }),
        fc.uint8Array({ maxLength: 3000 }),
        async (entries, signer, priv, plain) => {
          const ct = await seal(kem.mpk, options(entries, signer, priv), plain);
          const u = await Unsealer.new(ct, ibs.vk);
          expect([...u.inspect_header().keys()].sort()).toEqual(entries.map(([id]) => id).sort());
          expect(u.public_identity()).toEqual({
            ts: signer.ts,
            con: signer.con.map((a: { t: string; v?: string }) => ({ t: a.t, v: a.v })),
          });
          const [id, pol] = entries[entries.length - 1]!;
          const [got, result] = await u.unseal(id, extractUsk(kem.msk, pol));
          expectSameBytes(got, plain);
          expect(result.public.ts).toBe(signer.ts);
        },
      ),
      { numRuns: 25 },
    );
  });

  it('streaming, for random policies, sizes and chunkings', async () => {
    await fc.assert(
      fc.asyncProperty(
        recipients,
        policy,
        fc.integer({ min: 0, max: 700_000 }),
        fc.integer({ min: 1, max: 200_000 }),
        async (entries, signer, size, chunk) => {
          const plain = Uint8Array.from({ length: size }, (_, i) => (i * 7) & 255);
          const sealed = collector();
          await sealStream(kem.mpk, options(entries, signer), chunkedSource(plain, chunk), sealed.writable);
          const [id, pol] = entries[0]!;
          const out = collector();
          const u = await StreamUnsealer.new(chunkedSource(sealed.bytes(), chunk + 13), ibs.vk);
          await u.unseal(id, extractUsk(kem.msk, pol), out.writable);
          expectSameBytes(out.bytes(), plain);
          expect(out.state()).toBe('closed');
        },
      ),
      { numRuns: 15 },
    );
  });
});
