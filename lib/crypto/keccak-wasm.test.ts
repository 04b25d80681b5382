import { sha3_256, sha3_512, shake128, shake256 } from '@noble/hashes/sha3.js';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { hex } from '../../test/vectors.js';
import { ErrorCode, PostGuardError } from '../errors.js';
import { instantiateKeccakWasm, loadKeccakWasm, type KeccakWasm } from './keccak-wasm.js';
import { WINDOW_BYTES } from './keccak-wasm-layout.js';
import {
  chiPlan,
  COMPLEMENTED_LANES,
  DEFAULT_OPTIONS,
  keccakModuleBytes,
  rhoOffsets,
  roundConstants,
} from './keccak-wasm-module.js';
import type { Xof } from './xof.js';

const utf8 = (s: string) => new TextEncoder().encode(s);
const a3x200 = new Uint8Array(200).fill(0xa3);

/** Deterministic filler so failures reproduce without a seed. */
const pattern = (n: number, seed = 1) => {
  const out = new Uint8Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
};

// FIPS 202 example values (NIST CSRC "Examples with intermediate values": SHAKE128_Msg0,
// SHAKE128_Msg1600 with 4096 output bits; SHA3-* and SHAKE256 of "abc"); also what OpenSSL gives.
const SHAKE128_EMPTY_32 = '7f9c2ba4e88f827d616045507605853ed73b8093f6efbc88eb1a6eacfa66ef26';
const SHAKE128_ABC_32 = '5881092dd818bf5cf8a3ddb793fbcba74097d5c526a6d35f97b83351940f2cc8';
const SHAKE128_A3X200_512 =
  '131ab8d2b594946b9c81333f9bb6e0ce75c3b93104fa3469d3917457385da037cf232ef7164a6d1eb448c8908186ad85' +
  '2d3f85a5cf28da1ab6fe3438171978467f1c05d58c7ef38c284c41f6c2221a76f12ab1c04082660250802294fb8718' +
  '0213fdef5b0ecb7df50ca1f8555be14d32e10f6edcde892c09424b29f597afc270c904556bfcb47a7d40778d390923' +
  '642b3cbd0579e60908d5a000c1d08b98ef933f806445bf87f8b009ba9e94f7266122ed7ac24e5e266c42a82fa1bbef' +
  'b7b8db0066e16a85e0493f07df4809aec084a593748ac3dde5a6d7aae1e8b6e5352b2d71efbb47d4caeed5e6d63380' +
  '5d2d323e6fd81b4684b93a2677d45e7421c2c6aea259b855a698fd7d13477a1fe53e5a4a6197dbec5ce95f505b520b' +
  'cd9570c4a8265a7e01f89c0c002c59bfec6cd4a5c109258953ee5ee70cd577ee217af21fa70178f0946c9bf6ca8751' +
  '793479f6b537737e40b6ed28511d8a2d7e73eb75f8daac912ff906e0ab955b083bac45a8e5e9b744c8506f37e9b4e7' +
  '49a184b30f43eb188d855f1b70d71ff3e50c537ac1b0f8974f0fe1a6ad295ba42f6aec74d123a7abedde6e2c0711ca' +
  'b36be5acb1a5a11a4b1db08ba6982efccd716929a7741cfc63aa4435e0b69a9063e880795c3dc5ef3272e11c497a91' +
  'acf699fefee206227a44c9fb359fd56ac0a9a75a743cff6862f17d7259ab075216c0699511643b6439';
const SHAKE256_ABC_64 =
  '483366601360a8771c6863080cc4114d8db44530f8f1e1ee4f94ea37e78b5739' +
  'd5a15bef186a5386c75744c0527e1faa9f8726e462a12a4feb06bd8801e751e4';
const SHA3_256_ABC = '3a985da74fe225b2045c172d6bd390bd855f086e3e9d525b46bfe24511431532';
const SHA3_512_ABC =
  'b751850b1a57168a5693cd924b6b096e08f621827444f70d884f5d0240d2712e' +
  '10e116e9192af3c91a7ec57647e3934057340b4cf408d5a56592f8274eec53f0';

let keccak: KeccakWasm;
beforeAll(async () => {
  keccak = await loadKeccakWasm();
});

const feed = (xof: Xof, chunks: Uint8Array[]) => {
  for (const c of chunks) expect(xof.update(c)).toBe(xof);
  return xof;
};

/** Cuts `msg` at the given points (any order, repeats allowed: they make empty updates). */
const split = (msg: Uint8Array, cuts: number[]) => {
  const points = [0, ...cuts.map((c) => c % (msg.length + 1)).sort((a, b) => a - b), msg.length];
  return points.slice(1).map((end, i) => msg.subarray(points[i]!, end));
};

describe('known answers (FIPS 202)', () => {
  it('SHAKE128 of the empty message, "abc" and 200 bytes of 0xA3 with 4096 output bits', () => {
    expect(hex(keccak.createShake128().digest(32))).toBe(SHAKE128_EMPTY_32);
    expect(hex(keccak.createShake128().update(new Uint8Array(0)).digest(32))).toBe(SHAKE128_EMPTY_32);
    expect(hex(keccak.createShake128().update(utf8('abc')).digest(32))).toBe(SHAKE128_ABC_32);
    expect(hex(keccak.createShake128().update(a3x200).digest(512))).toBe(SHAKE128_A3X200_512);
  });

  it('gives the 0xA3 answer however the message is split', () => {
    const splits = [[167], [168], [169], [1, 2, 3, 168, 168, 199], Array.from({ length: 200 }, (_, i) => i)];
    for (const cuts of splits) {
      expect(hex(feed(keccak.createShake128(), split(a3x200, cuts)).digest(512))).toBe(SHAKE128_A3X200_512);
    }
  });

  it('a shorter output is a prefix of a longer one', () => {
    for (const n of [1, 64, 167, 168, 169, 336, 337]) {
      expect(hex(keccak.createShake128().update(a3x200).digest(n))).toBe(SHAKE128_A3X200_512.slice(0, 2 * n));
    }
  });

  it('SHAKE256, SHA3-256 and SHA3-512 of "abc"', () => {
    expect(hex(keccak.createShake256().update(utf8('abc')).digest(64))).toBe(SHAKE256_ABC_64);
    expect(hex(keccak.sha3_256(utf8('abc')))).toBe(SHA3_256_ABC);
    expect(hex(keccak.sha3_512(utf8('abc')))).toBe(SHA3_512_ABC);
  });

  it('every generator variant computes the same permutation', async () => {
    const variants = [
      { unroll: 1, complementedLanes: [] },
      { unroll: 2, complementedLanes: COMPLEMENTED_LANES },
      { unroll: 3, complementedLanes: [0, 24] },
      { unroll: 24, complementedLanes: COMPLEMENTED_LANES },
    ];
    for (const options of variants) {
      const k = await instantiateKeccakWasm(keccakModuleBytes(options));
      expect(hex(k.createShake128().update(a3x200).digest(512))).toBe(SHAKE128_A3X200_512);
      expect(hex(k.sha3_512(utf8('abc')))).toBe(SHA3_512_ABC);
    }
  });

  it('any set of complemented lanes is planned correctly', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uniqueArray(fc.integer({ min: 0, max: 24 }), { maxLength: 25 }), async (lanes) => {
        const k = await instantiateKeccakWasm(keccakModuleBytes({ unroll: 1, complementedLanes: lanes }));
        expect(hex(k.createShake128().update(a3x200).digest(512))).toBe(SHAKE128_A3X200_512);
      }),
      { numRuns: 25 },
    );
  });
});

describe('module generation', () => {
  it('round constants and rotation offsets are those tabulated in FIPS 202', () => {
    const rc = roundConstants();
    expect(rc).toHaveLength(24);
    expect(rc[0]).toBe(0x0000000000000001n);
    expect(rc[1]).toBe(0x0000000000008082n);
    expect(rc[2]).toBe(0x800000000000808an);
    expect(rc[23]).toBe(0x8000000080008008n);
    // x + 5y: r[1,0] = 1, r[0,1] = 36, r[4,4] = 14, r[0,0] = 0
    const rho = rhoOffsets();
    expect([rho[1], rho[5], rho[24], rho[0], rho[2]]).toEqual([1, 36, 14, 0, 62]);
  });

  it('emits a valid module and lane complementing saves NOTs in χ', () => {
    expect(WebAssembly.validate(keccakModuleBytes() as Uint8Array<ArrayBuffer>)).toBe(true);
    const mask = (lanes: readonly number[]) => Array.from({ length: 25 }, (_, i) => lanes.includes(i));
    expect(chiPlan(mask([])).nots).toBe(25);
    expect(chiPlan(mask(COMPLEMENTED_LANES)).nots).toBe(6);
    expect(DEFAULT_OPTIONS.complementedLanes).toBe(COMPLEMENTED_LANES);
  });

  it('rejects generator options it cannot honour', () => {
    expect(() => keccakModuleBytes({ unroll: 5, complementedLanes: [] })).toThrow(RangeError);
    expect(() => keccakModuleBytes({ unroll: 1, complementedLanes: [25] })).toThrow(RangeError);
  });
});

const OUTPUT_LENGTHS = [0, 1, 64, 168, 169, 500];

describe('agrees with @noble/hashes', () => {
  it('for random messages in random chunks and every output length', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 1500 }),
        fc.array(fc.nat(), { maxLength: 12 }),
        fc.constantFrom(...OUTPUT_LENGTHS),
        (msg, cuts, dkLen) => {
          const got = feed(keccak.createShake128(), split(msg, cuts)).digest(dkLen);
          expect(got).toHaveLength(dkLen);
          expect(hex(got)).toBe(hex(shake128(msg, { dkLen })));
        },
      ),
      { numRuns: 400 },
    );
  });

  it('for every message length up to three blocks, whole and cut at block boundaries', () => {
    const msg = pattern(3 * 168 + 2, 5);
    for (let n = 0; n <= msg.length; n++) {
      const m = msg.subarray(0, n);
      const expected = hex(shake128(m, { dkLen: 169 }));
      expect(hex(keccak.createShake128().update(m).digest(169))).toBe(expected);
      // The last update ends exactly on a block boundary (or one byte either side).
      for (const cut of [n - (n % 168), n - (n % 168) - 1, n - (n % 168) + 1]) {
        if (cut < 0 || cut > n) continue;
        const chunks = [m.subarray(0, cut), m.subarray(cut)];
        expect(hex(feed(keccak.createShake128(), chunks).digest(169))).toBe(expected);
      }
    }
  });

  it('for the other sponges too', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 600 }), fc.array(fc.nat(), { maxLength: 6 }), (msg, cuts) => {
        expect(hex(feed(keccak.createShake256(), split(msg, cuts)).digest(200))).toBe(
          hex(shake256(msg, { dkLen: 200 })),
        );
        expect(hex(keccak.sha3_256(msg))).toBe(hex(sha3_256(msg)));
        expect(hex(keccak.sha3_512(msg))).toBe(hex(sha3_512(msg)));
      }),
      { numRuns: 150 },
    );
  });

  it('across input-window boundaries (messages longer than the wasm window)', () => {
    const msg = pattern(2 * WINDOW_BYTES + 4321);
    const expected = hex(shake128(msg, { dkLen: 169 }));
    const windowFull = WINDOW_BYTES - (WINDOW_BYTES % 168);
    const splits = [
      [],
      [1],
      [167],
      [windowFull],
      [168, 168 + windowFull],
      [100, 168 + windowFull],
      [WINDOW_BYTES],
      [WINDOW_BYTES - 1, WINDOW_BYTES + 1],
      [5, WINDOW_BYTES + 5, 2 * WINDOW_BYTES + 5],
      [100_001, 100_002, 262_144, 524_288],
    ];
    for (const cuts of splits) {
      expect(hex(feed(keccak.createShake128(), split(msg, cuts)).digest(169))).toBe(expected);
    }
  });
});

describe('clone', () => {
  it('forks mid-stream into two independent sponges', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 800 }),
        fc.uint8Array({ maxLength: 800 }),
        fc.uint8Array({ maxLength: 800 }),
        fc.constantFrom(...OUTPUT_LENGTHS),
        (prefix, left, right, dkLen) => {
          const original = keccak.createShake128().update(prefix);
          const fork = original.clone();
          fork.update(right);
          original.update(left);
          expect(hex(fork.digest(dkLen))).toBe(hex(shake128(concat(prefix, right), { dkLen })));
          expect(hex(original.digest(dkLen))).toBe(hex(shake128(concat(prefix, left), { dkLen })));
        },
      ),
      { numRuns: 200 },
    );
  });

  it('keeps many clones alive at once, each with its own state', () => {
    const msg = pattern(40_000, 7);
    const running = keccak.createShake128();
    const forks: { at: number; xof: Xof }[] = [];
    for (let at = 0; at < msg.length;) {
      const step = 1 + ((at * 7919) % 503);
      running.update(msg.subarray(at, at + step));
      at = Math.min(at + step, msg.length);
      forks.push({ at, xof: running.clone() });
    }
    expect(forks.length).toBeGreaterThan(100);
    // Digest in an order unrelated to creation; the original must not be disturbed by any of it.
    for (const { at, xof } of [...forks].reverse()) {
      expect(hex(xof.digest(64))).toBe(hex(shake128(msg.subarray(0, at), { dkLen: 64 })));
    }
    expect(hex(running.digest(64))).toBe(hex(shake128(msg, { dkLen: 64 })));
  });

  it('digesting a clone leaves the original usable and unchanged', () => {
    const head = pattern(300, 3);
    const tail = pattern(500, 4);
    const original = keccak.createShake128().update(head);
    original.clone().digest(64);
    original.clone().update(tail).digest(1000);
    const grandchild = original.clone().clone();
    original.update(tail);
    expect(hex(original.digest(64))).toBe(hex(shake128(concat(head, tail), { dkLen: 64 })));
    expect(hex(grandchild.digest(64))).toBe(hex(shake128(head, { dkLen: 64 })));
  });
});

describe('lifecycle', () => {
  it('refuses any use after digest', () => {
    const xof = keccak.createShake128().update(utf8('abc'));
    xof.digest(0);
    for (const use of [() => xof.update(utf8('x')), () => xof.clone(), () => xof.digest(32)]) {
      expect(use).toThrow(PostGuardError);
      expect(use).toThrow(expect.objectContaining({ code: ErrorCode.INVALID_STATE }));
    }
  });

  it('rejects output lengths that are not non-negative integers', () => {
    for (const bad of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53]) {
      expect(() => keccak.createShake128().digest(bad)).toThrow(RangeError);
    }
  });

  it('shares one instance per realm', async () => {
    expect(await loadKeccakWasm()).toBe(keccak);
  });
});

describe('the transcript pattern of streaming signatures', () => {
  it('256 KiB updates with a clone and digest(64) per segment match noble', () => {
    const SEGMENT = 256 * 1024;
    const header = pattern(517, 11);
    const ours = keccak.createShake128().update(header);
    const reference = shake128.create({}).update(header);
    for (let i = 0; i < 5; i++) {
      const message = pattern(i === 4 ? 12_345 : SEGMENT, 100 + i);
      ours.update(message);
      reference.update(message);
      const suffix = concat(new Uint8Array([0, 0, 0, i, i === 4 ? 1 : 0]), pattern(32, 200 + i), pattern(32, 300 + i));
      const d = ours.clone().update(suffix).digest(64);
      expect(hex(d)).toBe(hex(reference.clone().update(suffix).xof(64)));
    }
  });
});

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
