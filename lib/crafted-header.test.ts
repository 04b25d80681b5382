import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  EMAIL,
  benignEmail,
  craftedEmail,
  sealedBy,
  withSignerPolicy,
  type SealedPair,
} from '../test/crafted-header.js';
import { loadPgWasm } from '../test/pgwasm.js';
import { chunkedSource, collector } from '../test/streams.js';
import { FormatError, StreamUnsealer, Unsealer, seal, signChallenge, verifyChallenge, type Policy } from './index.js';
import { MAX_SIGNER_ATTRIBUTES } from './identity.js';
import { extractUsk, generateKemKeys, generateSigningKeys } from './keys.js';

/**
 * A real ciphertext whose header-signature policy is an e-mail of "a", ~1 MiB of spaces and "a"
 * (test/crafted-header.ts): both unsealers and verifyChallenge read that policy before anything
 * is authenticated, and once took minutes to trim it. They answer it in well under a second now
 * (asserted against a generous bound, for a busy machine); so they do a header whose signer
 * policy is a flood of the smallest attributes, which is refused (MALFORMED) before any hashing.
 */

const BOUND_MS = 3000;
const ts = 1_700_000_000;
const kem = generateKemKeys();
const ibs = generateSigningKeys();
const bob: Policy = { ts, con: [{ t: EMAIL, v: 'bob@example.com' }] };
const bobUsk = extractUsk(kem.msk, bob);
const plain = new TextEncoder().encode('a message from a long address');
const timings: string[] = [];

let crafted: SealedPair;
let benign: SealedPair;

beforeAll(async () => {
  crafted = await sealedBy({ mpk: kem.mpk, sk: ibs.sk }, craftedEmail(), bob, plain);
  benign = await sealedBy({ mpk: kem.mpk, sk: ibs.sk }, benignEmail(), bob, plain);
}, 120_000);

afterAll(() => {
  if (process.env['LINEAR_TIME_LOG'] !== undefined) for (const line of timings) console.log(`[crafted] ${line}`);
});

/** Runs `work`, records how long it took, and holds it to BOUND_MS. */
async function promptly<T>(what: string, work: () => Promise<T> | T): Promise<T> {
  const start = performance.now();
  try {
    return await work();
  } finally {
    const ms = performance.now() - start;
    timings.push(`${what}: ${ms.toFixed(1)} ms`);
    expect(ms, what).toBeLessThan(BOUND_MS);
  }
}

describe('a header signed by an e-mail of a million spaces', () => {
  it('Unsealer.new verifies it promptly, and unseal opens the file', async () => {
    expect(crafted.memory.length).toBeGreaterThan(1024 * 1024);
    for (const [name, pair] of [
      ['benign', benign],
      ['crafted', crafted],
    ] as const) {
      const unsealer = await promptly(`Unsealer.new (${name})`, () => Unsealer.new(pair.memory, ibs.vk));
      expect(unsealer.public_identity()).toEqual(pair.signer);
      const [message, result] = await promptly(`Unsealer.unseal (${name})`, () => unsealer.unseal('bob', bobUsk));
      expect(message).toEqual(plain);
      expect(result.public).toEqual(pair.signer);
    }
  });

  it('StreamUnsealer.new verifies it promptly, and unseal opens the stream', async () => {
    for (const [name, pair] of [
      ['benign', benign],
      ['crafted', crafted],
    ] as const) {
      const unsealer = await promptly(`StreamUnsealer.new (${name})`, () =>
        StreamUnsealer.new(chunkedSource(pair.stream), ibs.vk),
      );
      expect(unsealer.public_identity()).toEqual(pair.signer);
      const out = collector();
      const result = await promptly(`StreamUnsealer.unseal (${name})`, () =>
        unsealer.unseal('bob', bobUsk, out.writable),
      );
      expect(out.bytes()).toEqual(plain);
      expect(result.public).toEqual(pair.signer);
    }
  });

  it('verifyChallenge checks a proof by that signer promptly', async () => {
    const challenge = crypto.getRandomValues(new Uint8Array(32));
    for (const [name, pair] of [
      ['benign', benign],
      ['crafted', crafted],
    ] as const) {
      const proof = signChallenge(pair.key, 'upload-1', challenge);
      const verified = await promptly(`verifyChallenge (${name})`, () =>
        verifyChallenge(ibs.vk, pair.signer, 'upload-1', challenge, proof),
      );
      expect(verified).toBe(true);
    }
  });

  it('pg-wasm 0.5.10 opens the same file: it is a valid PostGuard file, not a malformed one', async () => {
    const pg = await loadPgWasm();
    const [message, result] = await (await pg.Unsealer.new(crafted.memory, ibs.vk)).unseal('bob', bobUsk);
    expect(message).toEqual(plain);
    expect(result).toEqual({ public: crafted.signer });
  });
});

describe('a header whose signer policy is a flood of the smallest attributes', () => {
  // 9 bytes each (empty type, no value): 116 000 of them in 1 MiB.
  const flood: Policy = { ts, con: Array.from({ length: Math.floor((1024 * 1024 - 1024) / 9) }, () => ({ t: '' })) };

  it('both unsealers refuse it as MALFORMED before hashing a single attribute', async () => {
    expect(flood.con.length).toBeGreaterThan(MAX_SIGNER_ATTRIBUTES);
    const memory = withSignerPolicy(benign.memory, flood);
    const stream = withSignerPolicy(benign.stream, flood);
    const refusal = { code: 'MALFORMED', message: expect.stringMatching(/signer's policy has 116\d{3} attributes/) };
    const opened = promptly('Unsealer.new (flood)', () => Unsealer.new(memory, ibs.vk));
    await expect(opened).rejects.toBeInstanceOf(FormatError);
    await expect(opened).rejects.toMatchObject(refusal);
    await expect(
      promptly('StreamUnsealer.new (flood)', () => StreamUnsealer.new(chunkedSource(stream), ibs.vk)),
    ).rejects.toMatchObject(refusal);
    expect(
      await promptly('verifyChallenge (flood)', () =>
        verifyChallenge(ibs.vk, flood, 'upload-1', new Uint8Array(32), new Uint8Array(96)),
      ),
    ).toBe(false);
  });

  it('a sealer will not write one (TOO_LARGE): readers would refuse it', async () => {
    const signer: Policy = {
      ts,
      con: Array.from({ length: MAX_SIGNER_ATTRIBUTES + 1 }, (_, i) => ({ t: `x.y.z.${i}` })),
    };
    const options = { policy: { bob }, pubSignKey: { key: benign.key, policy: signer } };
    await expect(seal(kem.mpk, options, plain)).rejects.toMatchObject({ code: 'TOO_LARGE' });
  });
});
