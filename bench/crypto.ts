/**
 * The crypto core on its own: medians of the key operations, plus the reference's way of
 * decapsulating (two G2 multiplications and a four-pair pairing) to show what the six-pair
 * form saves, and pg-wasm 0.5.10's 1 KiB seal/unseal for scale.
 *
 *   npx tsx bench/crypto.ts [--runs=N]
 */
import { bls12_381 } from '@noble/curves/bls12-381.js';
import { sha3_512, shake256 } from '@noble/hashes/sha3.js';
import { parseArgs } from 'node:util';
import {
  cgwkvSetup,
  decaps,
  encaps,
  extractUsk,
  multiDecaps,
  multiEncaps,
  parseCgwkvCiphertext,
  parseMasterPublicKey,
  parseMkemCiphertext,
  parseUserSecretKey,
  wideScalar,
} from '../lib/crypto/cgwkv.js';
import { ggKeygen, ggSetup, ggSign, ggVerify, parseSigningKey, parseVerifyingKey } from '../lib/crypto/gg.js';
import { compressGt, decompressGt } from '../lib/crypto/gt.js';
import { createShake128 } from '../lib/crypto/shake-node.js';
import { extractSigningKey, extractUsk as extractUskB64, generateKemKeys, generateSigningKeys } from '../lib/keys.js';
import { loadPgWasm } from '../test/pgwasm.js';

const { values: args } = parseArgs({ options: { runs: { type: 'string', default: '21' } } });
const RUNS = Number(args.runs);

async function median(f: () => unknown, runs = RUNS): Promise<{ median: number; min: number; max: number }> {
  for (let i = 0; i < 3; i++) await f();
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    await f();
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return { median: times[Math.floor(runs / 2)]!, min: times[0]!, max: times[runs - 1]! };
}

const rows: Array<[string, Awaited<ReturnType<typeof median>>]> = [];
async function measure(name: string, f: () => unknown, runs?: number): Promise<void> {
  const r = await median(f, runs);
  rows.push([name, r]);
  console.log(`${name.padEnd(52)} ${r.median.toFixed(2).padStart(8)} ms   (${r.min.toFixed(2)}–${r.max.toFixed(2)})`);
}

const id = (i: number) => sha3_512(new Uint8Array([i]));
const { mpk: mpkBytes, msk } = cgwkvSetup();
const mpk = parseMasterPublicKey(mpkBytes);
const uskBytes = extractUsk(msk, id(0));
const usk = parseUserSecretKey(uskBytes);
const ctBytes = encaps(mpk, id(0)).ct;
const ct = parseCgwkvCiphertext(ctBytes);
const { cts } = await multiEncaps(mpk, [id(0)]);
const mkem = parseMkemCiphertext(cts[0]!);

console.log(`node ${process.version}, ${RUNS} runs per line (medians; min–max)\n`);
console.log('CGWKV');
await measure('setup', () => cgwkvSetup(), 11);
await measure('extract USK', () => extractUsk(msk, id(1)));
await measure('parse MPK (8 G1 + Gt, all subgroup-checked, tables)', () => parseMasterPublicKey(mpkBytes));
await measure('  of which Gt decompression + membership test', () => decompressGt(mpkBytes.subarray(384)));
await measure('parse USK (6 G2 checked + line precomputation)', () => parseUserSecretKey(uskBytes));
await measure('parse 284-byte capsule (4 G1 checked)', () => parseMkemCiphertext(cts[0]!));
await measure('encaps, 1 recipient (CGWKV only)', () => encaps(mpk, id(2)));
await measure('multiEncaps, 1 recipient (with AES wrap)', () => multiEncaps(mpk, [id(2)]));
await measure('multiEncaps, 10 recipients', () =>
  multiEncaps(
    mpk,
    Array.from({ length: 10 }, (_, i) => id(i)),
  ),
);
await measure('decaps (six-pair form, parsed USK and ct)', () => decaps(usk, ct));
await measure('multiDecaps (decaps + AES unwrap)', () => multiDecaps(usk, mkem));

// The reference's decapsulation: t_j = d1[j] + y'·d2[j] in G2, then a four-pair pairing. Given
// its best chance: d0's lines precomputed once like ours, only t_j's computed per ciphertext.
const G1 = bls12_381.G1.Point;
const G2 = bls12_381.G2.Point;
const { Fp12 } = bls12_381.fields;
const d = [0, 1, 2, 3, 4, 5].map((i) => G2.fromBytes(uskBytes.subarray(i * 96, i * 96 + 96)));
const d0Lines = [d[0]!, d[1]!].map((q) => bls12_381.utils.calcPairingPrecomputes(q));
const c = [0, 1, 2, 3].map((i) => G1.fromBytes(ctBytes.subarray(i * 48, i * 48 + 48)).toAffine());
const referenceDecaps = () => {
  const y = wideScalar(
    sha3_512
      .create()
      .update(ctBytes.subarray(192))
      .update(G1.fromAffine(c[0]!).toBytes(false))
      .update(G1.fromAffine(c[1]!).toBytes(false))
      .digest(),
  );
  const t = [d[2]!.add(d[4]!.multiplyUnsafe(y)), d[3]!.add(d[5]!.multiplyUnsafe(y))];
  const tLines = t.map((q) => bls12_381.utils.calcPairingPrecomputes(q));
  const m = bls12_381.millerLoopBatch([
    [tLines[0]!, c[0]!.x, c[0]!.y],
    [tLines[1]!, c[1]!.x, c[1]!.y],
    [d0Lines[0]!, c[2]!.x, c[2]!.y],
    [d0Lines[1]!, c[3]!.x, c[3]!.y],
  ]);
  return shake256(compressGt(Fp12.finalExponentiate(m)), { dkLen: 32 });
};
if (Buffer.compare(referenceDecaps(), decaps(usk, ct)) !== 0) throw new Error('decapsulation forms disagree');
await measure('  for comparison: reference form (2 G2 mults, 4 pairs)', referenceDecaps);

console.log('\nGG signatures (1 KiB transcript)');
const ibs = ggSetup();
const signingKey = parseSigningKey(ggKeygen(ibs.sk, new Uint8Array(32).fill(1)));
const vk = parseVerifyingKey(ibs.pk);
const transcript = createShake128().update(new Uint8Array(1024));
const signature = ggSign(signingKey, transcript);
await measure('keygen', () => ggKeygen(ibs.sk, new Uint8Array(32).fill(2)));
await measure('sign', () => ggSign(signingKey, transcript));
await measure('verify', () => ggVerify(vk, signingKey.id, signature, transcript));

console.log('\npg-wasm 0.5.10, 1 KiB in memory, for scale (MPK/USK parsed inside every call)');
const pg = await loadPgWasm();
const kem = generateKemKeys();
const sig = generateSigningKeys();
const alice = { ts: 1_700_000_000, con: [{ t: 'pbdf.sidn-pbdf.email.email', v: 'alice@example.com' }] };
const bob = { ts: 1_700_000_000, con: [{ t: 'pbdf.sidn-pbdf.email.email', v: 'bob@example.com' }] };
const options = { policy: { bob }, pubSignKey: { key: extractSigningKey(sig.sk, alice), policy: alice } };
const plain = new Uint8Array(1024);
const sealed = await pg.seal(kem.mpk, options, plain);
const bobUsk = extractUskB64(kem.msk, bob);
await measure('pg-wasm seal', () => pg.seal(kem.mpk, options, plain));
await measure('pg-wasm unseal', async () => (await pg.Unsealer.new(sealed, sig.vk)).unseal('bob', bobUsk));
