import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { expectSameBytes } from '../test/bytes.js';
import { loadPgWasm, type PgWasm } from '../test/pgwasm.js';
import { chunkedSource, collector } from '../test/streams.js';
import {
  DEFAULT_SEGMENT_SIZE,
  StreamUnsealer,
  Unsealer,
  seal,
  sealStream,
  type Policy,
  type SealOptions,
} from './index.js';
import { encodePolicy } from './policy.js';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from './keys.js';

/**
 * Live interop with @e4a/pg-wasm 0.5.10: our ciphertexts open in theirs and theirs in ours,
 * with keys from postguard-ts/keys on both sides.
 */

const TS = 1_700_000_123;
const EMAIL = 'pbdf.sidn-pbdf.email.email';
const MOBILE = 'pbdf.sidn-pbdf.mobilenumber.mobilenumber';

let pg: PgWasm;
let mpk: string;
let vk: string;
let pubSignKey: SealOptions['pubSignKey'];
let privSignKey: SealOptions['privSignKey'];
const recipients: Array<{ id: string; policy: Policy; usk: string }> = [];

beforeAll(async () => {
  pg = await loadPgWasm();
  const kem = generateKemKeys();
  const ibs = generateSigningKeys();
  mpk = kem.mpk;
  vk = ibs.vk;
  const pubPolicy = { ts: TS, con: [{ t: EMAIL, v: 'alice@example.com' }] };
  const privPolicy = { ts: TS, con: [{ t: 'pbdf.gemeente.personalData.fullname', v: 'Alice Example' }] };
  pubSignKey = { key: extractSigningKey(ibs.sk, pubPolicy), policy: pubPolicy };
  privSignKey = { key: extractSigningKey(ibs.sk, privPolicy), policy: privPolicy };
  const ids = [
    'bob@example.com',
    'Charlie',
    'zoë@example.org',
    '\u{1F600}@x',
    'dave',
    'eve',
    'frank',
    'grace',
    'heidi',
    'ivan',
  ];
  for (const [i, id] of ids.entries()) {
    const con =
      i === 1
        ? [{ t: MOBILE, v: '0612345678' }] // a hint type: the header keeps 061234****
        : i === 4
          ? [
              { t: EMAIL, v: id },
              { t: 'pbdf.gemeente.personalData.surname', v: 'Dee' },
            ] // a second attribute
          : [{ t: EMAIL, v: id }];
    const policy = { ts: TS - i, con };
    recipients.push({ id, policy, usk: extractUsk(kem.msk, policy) });
  }
});

const policyFor = (n: number) => Object.fromEntries(recipients.slice(0, n).map((r) => [r.id, r.policy]));
const optionsFor = (n: number, priv: boolean): SealOptions => ({
  policy: policyFor(n),
  pubSignKey,
  ...(priv ? { privSignKey } : {}),
});
const expectedSigner = (priv: boolean) =>
  priv ? { public: pubSignKey.policy, private: privSignKey!.policy } : { public: pubSignKey.policy };
/** What our unsealers report for a file from pg-wasm 0.5.10: the same, and not bound (no sender copy). */
const unbound = (priv: boolean) => ({
  ...expectedSigner(priv),
  contentSigner: priv ? 'private' : 'public',
  bound: false,
});
const message = (n: number) => Uint8Array.from({ length: n }, (_, i) => (i * 31 + 7) & 255);

async function theirStreamSeal(options: SealOptions, plain: Uint8Array, chunk = 65_536): Promise<Uint8Array> {
  const out = collector();
  await pg.sealStream(mpk, options, chunkedSource(plain, chunk), out.writable);
  return out.bytes();
}

async function ourStreamSeal(options: SealOptions, plain: Uint8Array, chunk = 65_536): Promise<Uint8Array> {
  const out = collector();
  await sealStream(mpk, options, chunkedSource(plain, chunk), out.writable);
  expect(out.state()).toBe('closed');
  return out.bytes();
}

async function theirStreamOpen(ct: Uint8Array, id: string, usk: string) {
  const out = collector();
  const u = await pg.StreamUnsealer.new(chunkedSource(ct, 100_000), vk);
  const result = await u.unseal(id, usk, out.writable);
  return { plain: out.bytes(), result };
}

async function ourStreamOpen(ct: Uint8Array, id: string, usk: string, chunk = 100_000) {
  const out = collector();
  const u = await StreamUnsealer.new(chunkedSource(ct, chunk), vk);
  const result = await u.unseal(id, usk, out.writable);
  expect(out.state()).toBe('closed');
  return { plain: out.bytes(), result };
}

describe('in-memory interop', () => {
  for (const n of [1, 3, 10]) {
    for (const priv of [false, true]) {
      it(`our seal opens in pg-wasm: ${n} recipient(s), private signer ${priv}`, async () => {
        const plain = message(1000 + n);
        const ct = await seal(mpk, optionsFor(n, priv), plain);
        for (const r of recipients.slice(0, n)) {
          const u = await pg.Unsealer.new(ct, vk);
          expect(u.public_identity()).toEqual(pubSignKey.policy);
          const [got, result] = await u.unseal(r.id, r.usk);
          expectSameBytes(got, plain);
          expect(result).toEqual(expectedSigner(priv));
        }
      });

      it(`pg-wasm's seal opens in ours: ${n} recipient(s), private signer ${priv}`, async () => {
        const plain = message(2000 + n);
        const ct = await pg.seal(mpk, optionsFor(n, priv), plain);
        const u = await Unsealer.new(ct, vk);
        for (const r of recipients.slice(0, n)) {
          const [got, result] = await u.unseal(r.id, r.usk); // one Unsealer, reused
          expectSameBytes(got, plain);
          expect(result).toEqual(unbound(priv));
        }
      });
    }
  }

  // Value-less attributes, which only pg-wasm seals: server/valueless-attribute.test.ts.
  it('headers agree: hidden policies with hints and removed values, UTF-8 order', async () => {
    const opts = optionsFor(10, false);
    const [ours, theirs] = await Promise.all([seal(mpk, opts, message(5)), pg.seal(mpk, opts, message(5))]);
    const theirView = (await pg.Unsealer.new(ours, vk)).inspect_header();
    const ourView = (await Unsealer.new(theirs, vk)).inspect_header();
    expect([...ourView.keys()]).toEqual([...theirView.keys()]);
    expect(ourView).toEqual(theirView);
    expect(ourView.get('Charlie')!.con[0]!.v).toBe('061234****');
  });

  it('the empty message, both ways', async () => {
    const opts = optionsFor(2, true);
    const [got] = await (
      await pg.Unsealer.new(await seal(mpk, opts, new Uint8Array(0)), vk)
    ).unseal(recipients[0]!.id, recipients[0]!.usk);
    expect(got.length).toBe(0);
    const [ours] = await (
      await Unsealer.new(await pg.seal(mpk, opts, new Uint8Array(0)), vk)
    ).unseal(recipients[1]!.id, recipients[1]!.usk);
    expect(ours.length).toBe(0);
  });

  it('skipEncryption seals for the Default recipient as pg-wasm does', async () => {
    const opts = { pubSignKey, skipEncryption: true };
    const [ours, theirs] = await Promise.all([seal(mpk, opts, message(3)), pg.seal(mpk, opts, message(3))]);
    expect((await Unsealer.new(theirs, vk)).inspect_header()).toEqual(
      (await pg.Unsealer.new(ours, vk)).inspect_header(),
    );
  });
});

describe('streaming interop', () => {
  const prefix = 4 + encodePolicy({ ts: TS, con: [{ t: EMAIL, v: 'alice@example.com' }] }).length;
  const seg = DEFAULT_SEGMENT_SIZE;
  const sizes = [
    0,
    1,
    512,
    seg - prefix - 1,
    seg - prefix,
    seg - prefix + 1,
    seg,
    2 * seg,
    3 * seg - prefix,
    3 * seg + 16,
  ];

  for (const size of sizes) {
    it(`our sealStream opens in pg-wasm and back, ${size} bytes`, async () => {
      const plain = message(size);
      const r = recipients[0]!;
      const ours = await ourStreamSeal(optionsFor(2, false), plain);
      const theirs = await theirStreamOpen(ours, r.id, r.usk);
      expectSameBytes(theirs.plain, plain);
      expect(theirs.result).toEqual(expectedSigner(false));

      const theirCt = await theirStreamSeal(optionsFor(2, false), plain);
      // same layout; ours carries the public sender's copy in segment 0 (payload.ts)
      // (one segment more when the copy pushes the message over a segment boundary).
      const copy = encodePolicy(pubSignKey.policy as Policy).length;
      expect([copy, copy + 96 + 16]).toContain(ours.length - theirCt.length);
      const back = await ourStreamOpen(theirCt, r.id, r.usk);
      expectSameBytes(back.plain, plain);
      expect(back.result).toEqual(unbound(false));
    });
  }

  for (const priv of [false, true]) {
    it(`10 recipients, private signer ${priv}, every recipient opens both ways`, async () => {
      const plain = message(seg + 12345);
      const ours = await ourStreamSeal(optionsFor(10, priv), plain);
      const theirs = await theirStreamSeal(optionsFor(10, priv), plain);
      for (const [i, r] of recipients.entries()) {
        // pg-wasm opens a stream at ~1 s here: it checks the first, a middle and the last recipient's
        // capsule; ours opens every one.
        if (i === 0 || i === 5 || i === recipients.length - 1) {
          const a = await theirStreamOpen(ours, r.id, r.usk);
          expectSameBytes(a.plain, plain);
          expect(a.result).toEqual(expectedSigner(priv));
        }
        const b = await ourStreamOpen(theirs, r.id, r.usk);
        expectSameBytes(b.plain, plain);
        expect(b.result).toEqual(unbound(priv));
      }
    });
  }

  // Chunks from 1 KiB: pg-wasm's streams take seconds for a file in single bytes, which made this
  // property's time a matter of luck. Tiny chunks are covered on our side (roundtrip, badinput).
  it('multi-segment messages of random sizes and random chunking, both ways', { timeout: 180_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 3 * seg + 1000 }),
        fc.integer({ min: 1024, max: 300_000 }),
        fc.integer({ min: 1024, max: 300_000 }),
        fc.boolean(),
        async (size, inChunk, outChunk, priv) => {
          const plain = message(size);
          const r = recipients[size % recipients.length]!;
          const ours = await ourStreamSeal(optionsFor(10, priv), plain, inChunk);
          expectSameBytes((await theirStreamOpen(ours, r.id, r.usk)).plain, plain);
          const theirs = await theirStreamSeal(optionsFor(10, priv), plain, inChunk);
          const back = await ourStreamOpen(theirs, r.id, r.usk, outChunk);
          expectSameBytes(back.plain, plain);
          expect(back.result).toEqual(unbound(priv));
        },
      ),
      { numRuns: 10 },
    );
  });

  it('inspect_header and public_identity agree with pg-wasm on a stream', async () => {
    const ct = await ourStreamSeal(optionsFor(10, true), message(10));
    const theirs = await pg.StreamUnsealer.new(chunkedSource(ct), vk);
    const ours = await StreamUnsealer.new(chunkedSource(ct), vk);
    expect(ours.inspect_header()).toEqual(theirs.inspect_header());
    expect(ours.public_identity()).toEqual(theirs.public_identity());
    expect(ours.inspect_header().get('dave')).toEqual({
      ts: TS - 4,
      con: [
        { t: EMAIL, v: '' },
        { t: 'pbdf.gemeente.personalData.surname', v: '' },
      ],
    });
  });
});
