import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { expectSameBytes } from '../test/bytes.js';
import { loadPgWasm, type PgWasm } from '../test/pgwasm.js';
import { chunkedSource, collector, concat, readAll } from '../test/streams.js';
import { inlineSegmentHasher, remoteInFlight } from './crypto/segment-hasher.js';
import { OPEN_QUEUE_BYTES } from './crypto/segment-hasher-node.js';
import { readFrame, splitFrame } from './frame.js';
import { DEFAULT_SEGMENT_SIZE, decodeHeader } from './header.js';
import {
  StreamUnsealer,
  plaintextSize,
  prepareSeal,
  seal,
  sealStream,
  sealedSize,
  expectedSealedSize,
  type Policy,
  type SealOptions,
} from './index.js';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from './keys.js';
import { pumpSegments } from './pump.js';
import { SegmentSealer } from './segments.js';
import { streamPayloadSize } from './size.js';

/**
 * Sizes as public API: `sealedSize` is exact before sealing (both modes), `plaintextSize` reads the
 * length a sealer stated, and `StreamUnsealer.open` proves it. Checked against real sealing at
 * every segment boundary up to three segments and at random lengths beyond.
 */

const EMAIL = 'pbdf.sidn-pbdf.email.email';
const at = (who: string): Policy => ({ ts: 1_700_000_000, con: [{ t: EMAIL, v: `${who}@example.com` }] });
const kem = generateKemKeys();
const ibs = generateSigningKeys();
const vk = ibs.vk;
const bobUsk = extractUsk(kem.msk, at('bob'));
const signer = (policy: Policy) => ({ key: extractSigningKey(ibs.sk, policy), policy });
const privatePolicy: Policy = { ts: 1_700_000_000, con: [{ t: 'pbdf.gemeente.personalData.fullname', v: 'Alice A' }] };

/** Options of a few shapes: one or three recipients, with or without a private signer. */
const optionShapes: SealOptions[] = [
  { policy: { bob: at('bob') }, pubSignKey: signer(at('alice')) },
  {
    policy: { bob: at('bob'), carol: at('carol'), dave: at('dave-with-a-longer-name') },
    pubSignKey: signer(at('alice')),
    privSignKey: signer(privatePolicy),
  },
];

const content = (n: number) => new Uint8Array(n).map((_, i) => (i * 7 + 3) & 255);

async function sealToBytes(options: SealOptions, plain: Uint8Array): Promise<Uint8Array> {
  const out = collector();
  await sealStream(kem.mpk, options, chunkedSource(plain, 100_000), out.writable);
  return out.bytes();
}

describe('sealedSize is exact before sealing', () => {
  it('at every segment boundary up to 3 segments + 1, both option shapes', async () => {
    for (const options of optionShapes) {
      // Find the signer block's length from one real seal: segment 0's message part.
      const empty = await sealToBytes(options, new Uint8Array(0));
      const { framingBytes } = splitFrame(empty);
      const prefix = empty.length - framingBytes - 112; // one empty-of-message final segment
      const lengths = new Set([0, 1, 2, 3]);
      for (let k = 1; k <= 3; k++) {
        for (let d = -2; d <= 2; d++) lengths.add(k * DEFAULT_SEGMENT_SIZE - prefix + d);
      }
      lengths.add(3 * DEFAULT_SEGMENT_SIZE + 1);
      for (const n of [...lengths].filter((x) => x >= 0)) {
        const stated = { ...options, size: n };
        const ct = await sealToBytes(stated, content(n));
        expect(ct.length, `stream, ${n} bytes`).toBe(sealedSize(n, options));
        expect(plaintextSize(ct.length, splitFrame(ct)), `stated, ${n} bytes`).toBe(n);
      }
    }
  });

  it('at random lengths, in memory and streaming', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 6 * DEFAULT_SEGMENT_SIZE }),
        fc.constantFrom(...optionShapes),
        async (n, options) => {
          const plain = content(n);
          const memory = await seal(kem.mpk, options, plain);
          expect(memory.length).toBe(sealedSize(n, options, 'memory'));
          expect(plaintextSize(memory.length, splitFrame(memory))).toBe(n);
          const stream = await sealToBytes({ ...options, size: n }, plain);
          expect(stream.length).toBe(sealedSize(n, options));
        },
      ),
      { numRuns: 12 },
    );
  });

  it('expectedSealedSize: the same figure from the identities alone, before the signing keys exist', async () => {
    for (const options of optionShapes) {
      // The shapes above are built with `at()` and privatePolicy: Policy objects, in pg-wasm's key input type.
      const shape = {
        policy: options.policy!,
        pubSignPolicy: options.pubSignKey.policy as Policy,
        privSignPolicy: options.privSignKey?.policy as Policy | undefined,
      };
      for (const n of [0, 1, DEFAULT_SEGMENT_SIZE, 3 * DEFAULT_SEGMENT_SIZE + 5]) {
        expect(expectedSealedSize(n, shape)).toBe(sealedSize(n, options));
        expect(expectedSealedSize(n, shape, 'memory')).toBe(sealedSize(n, options, 'memory'));
      }
      expect((await sealToBytes({ ...options, size: 1000 }, content(1000))).length).toBe(
        expectedSealedSize(1000, shape),
      );
    }
    // A longer disclosed value is a longer header: an upper bound needs the longest value allowed.
    const longer = { ...at('alice'), con: [{ t: EMAIL, v: 'a-much-longer-name@example.com' }] };
    expect(expectedSealedSize(10, { policy: optionShapes[0]!.policy, pubSignPolicy: longer })).toBeGreaterThan(
      sealedSize(10, optionShapes[0]!),
    );
    expect(() => expectedSealedSize(10, { policy: {}, pubSignPolicy: at('alice') })).toThrow(
      expect.objectContaining({ code: 'INVALID_POLICY' }),
    );
  });

  it('checks the options as sealing does', () => {
    expect(() => sealedSize(10, { policy: {}, pubSignKey: signer(at('alice')) })).toThrow(
      expect.objectContaining({ code: 'INVALID_POLICY' }),
    );
    for (const bad of [-1, 1.5, Number.NaN, 2 ** 60])
      expect(() => sealedSize(bad, optionShapes[0]!)).toThrow(expect.objectContaining({ code: 'INVALID_INPUT' }));
    expect(() => sealedSize(2 ** 32, optionShapes[0]!, 'memory')).toThrow(
      expect.objectContaining({ code: 'TOO_LARGE' }),
    );
  });
});

describe('every length from 0 to 3 segments + 1, at a small segment size', () => {
  // The arithmetic sealedSize adds up is the same at any segment size; at 256 bytes every length up
  // to three segments and one byte can be sealed for real, which at the default 256 KiB it cannot.
  const SEGMENT = 256;

  async function sealAt(options: SealOptions, plain: Uint8Array): Promise<Uint8Array> {
    const n = BigInt(plain.length);
    const ctx = await prepareSeal(kem.mpk, options, { type: 'Streaming', segmentSize: SEGMENT, sizeHint: [n, n] });
    const out = collector();
    const sealer = new SegmentSealer({ ...ctx, hasher: inlineSegmentHasher(ctx.transcript) }, SEGMENT);
    await pumpSegments(chunkedSource(plain, 97).getReader(), out.writable.getWriter(), ctx.frame, sealer);
    return out.bytes();
  }

  it('the payload size, the stated size and the size the opener proves are all exact', async () => {
    const options = optionShapes[0]!;
    const signer = options.pubSignKey.policy as Policy;
    for (let n = 0; n <= 3 * SEGMENT + 1; n++) {
      const plain = content(n);
      const ct = await sealAt(options, plain);
      const frame = splitFrame(ct);
      expect(ct.length - frame.framingBytes, `payload of ${n} bytes`).toBe(
        streamPayloadSize(n, SEGMENT, signer, signer),
      );
      expect(plaintextSize(ct.length, frame), `stated size of ${n} bytes`).toBe(n);
      if (n % 37 === 0 || n >= 3 * SEGMENT - 1) {
        const opened = await (await StreamUnsealer.new(chunkedSource(ct), vk, { size: ct.length })).open('bob', bobUsk);
        expect(opened.size, `proven size of ${n} bytes`).toBe(n);
        expectSameBytes(await readAll(opened.readable), plain);
      }
    }
  });
});

describe('the size hint', () => {
  it('is written exactly when the length is stated, and (0, None) as the reference writes when not', async () => {
    const options = optionShapes[0]!;
    const stated = splitFrame(await sealToBytes({ ...options, size: 5 }, content(5)));
    const unstated = splitFrame(await sealToBytes(options, content(5)));
    expect(decodeHeader(stated.header).mode).toMatchObject({ sizeHint: [5n, 5n] });
    expect(decodeHeader(unstated.header).mode).toMatchObject({ sizeHint: [0n, undefined] });
    const ct = await sealToBytes(options, content(5));
    expect(plaintextSize(ct.length, splitFrame(ct))).toBeUndefined();
  });

  it('is not believed when it cannot fit the layout', async () => {
    const options = optionShapes[0]!;
    const ct = await sealToBytes({ ...options, size: 1000 }, content(1000));
    const frame = splitFrame(ct);
    expect(plaintextSize(frame.framingBytes + 50, frame)).toBeUndefined(); // no whole final segment
    expect(plaintextSize(ct.length - 900, frame)).toBeUndefined(); // the message would be longer than the regions
    expect(plaintextSize(ct.length + DEFAULT_SEGMENT_SIZE + 112, frame)).toBeUndefined(); // the prefix would not fit segment 0
    expect(plaintextSize(ct.length, frame)).toBe(1000);
  });

  it('a stream that carries more or fewer bytes than stated fails the seal and aborts the sink', async () => {
    for (const [stated, actual] of [
      [10, 11],
      [10, 9],
      [0, 3 * DEFAULT_SEGMENT_SIZE],
    ] as const) {
      const out = collector();
      await expect(
        sealStream(kem.mpk, { ...optionShapes[0]!, size: stated }, chunkedSource(content(actual)), out.writable),
      ).rejects.toMatchObject({ code: 'INVALID_INPUT', message: expect.stringMatching(/options\.size/) });
      expect(out.state()).toBe('aborted');
    }
    for (const bad of [-1, 0.5, '10', Number.POSITIVE_INFINITY]) {
      const out = collector();
      await expect(
        sealStream(kem.mpk, { ...optionShapes[0]!, size: bad as number }, chunkedSource(content(1)), out.writable),
      ).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    }
  });

  describe('with pg-wasm 0.5.10', () => {
    let pg: PgWasm;
    beforeAll(async () => {
      pg = await loadPgWasm();
    });

    it('opens a stream whose header states its size', async () => {
      for (const n of [0, 5, DEFAULT_SEGMENT_SIZE + 17]) {
        const plain = content(n);
        const ct = await sealToBytes({ ...optionShapes[1]!, size: n }, plain);
        const out = collector();
        const unsealer = await pg.StreamUnsealer.new(chunkedSource(ct, 70_000), vk);
        await unsealer.unseal('bob', bobUsk, out.writable);
        expectSameBytes(out.bytes(), plain);
      }
    });
  });
});

describe('StreamUnsealer.open: the plaintext as a stream that pulls its source', () => {
  const plain = content(12 * DEFAULT_SEGMENT_SIZE + 123);
  let ct: Uint8Array;
  beforeAll(async () => {
    ct = await sealToBytes(optionShapes[1]!, plain);
  });

  /** A source that counts what was pulled from it and how often it was cancelled. */
  function countingSource(bytes: Uint8Array, chunk = 65_536) {
    let pulled = 0;
    let cancelled: unknown;
    const readable = new ReadableStream<Uint8Array>(
      {
        pull(controller) {
          if (pulled >= bytes.length) return controller.close();
          const piece = bytes.slice(pulled, pulled + chunk);
          pulled += piece.length;
          controller.enqueue(piece);
        },
        cancel(reason) {
          cancelled = reason ?? 'cancelled';
        },
      },
      { highWaterMark: 0 },
    );
    return { readable, pulled: () => pulled, cancelled: () => cancelled };
  }

  it('gives the exact size once told the ciphertext size, and the same bytes as unseal', async () => {
    const source = countingSource(ct);
    const unsealer = await StreamUnsealer.new(source.readable, vk, { size: ct.length });
    const opened = await unsealer.open('bob', bobUsk);
    expect(opened.size).toBe(plain.length);
    expectSameBytes(await readAll(opened.readable), plain);
    await expect(opened.result).resolves.toMatchObject({ private: privatePolicy, bound: true });
  });

  it('without the ciphertext size: no size, same bytes', async () => {
    const opened = await (await StreamUnsealer.new(chunkedSource(ct), vk)).open('bob', bobUsk);
    expect(opened.size).toBeUndefined();
    expectSameBytes(await readAll(opened.readable), plain);
  });

  it('reads the source only as far as the reader asks (plus the segments in flight)', async () => {
    // Longer than what may be in flight: the opener's depth, 24 segments on Node's hashing thread.
    const long = await sealToBytes(optionShapes[1]!, content(48 * DEFAULT_SEGMENT_SIZE));
    const source = countingSource(long);
    const unsealer = await StreamUnsealer.new(source.readable, vk);
    const opened = await unsealer.open('bob', bobUsk);
    const reader = opened.readable.getReader();
    await reader.read();
    await new Promise((resolve) => setTimeout(resolve, 300));
    const wire = DEFAULT_SEGMENT_SIZE + 112;
    // One segment read, the most the hasher keeps in flight, and a chunk of slack: never the whole file.
    const inFlight = remoteInFlight(DEFAULT_SEGMENT_SIZE, OPEN_QUEUE_BYTES);
    expect(source.pulled()).toBeLessThanOrEqual(splitFrame(long).framingBytes + (inFlight + 2) * wire);
    expect(source.pulled()).toBeLessThan(long.length - 8 * wire);
    await reader.cancel(new Error('enough'));
    expect(source.cancelled()).toBeDefined();
    await expect(opened.result).rejects.toThrow('enough');
  });

  it('segmentsInFlight keeps at least that many segments read ahead of the reader (the service worker in WebKit)', async () => {
    // More than the 24 that Node's hashing thread asks for, so that the option is what decides.
    const long = await sealToBytes(optionShapes[1]!, content(64 * DEFAULT_SEGMENT_SIZE));
    const source = countingSource(long);
    const unsealer = await StreamUnsealer.new(source.readable, vk, { size: long.length, segmentsInFlight: 40 });
    const opened = await unsealer.open('bob', bobUsk);
    const reader = opened.readable.getReader();
    await reader.read();
    const wire = DEFAULT_SEGMENT_SIZE + 112;
    const framing = splitFrame(long).framingBytes;
    // The read-ahead runs in the background: wait for it (a busy machine may take a while), then
    // give it time to go too far before checking that it did not.
    for (const start = Date.now(); source.pulled() < framing + 40 * wire && Date.now() - start < 10_000;) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(source.pulled()).toBeGreaterThanOrEqual(framing + 40 * wire);
    expect(source.pulled()).toBeLessThanOrEqual(framing + 43 * wire);
    await reader.cancel(new Error('enough'));
    for (const bad of [-1, 1.5, 65, 'x']) {
      await expect(
        StreamUnsealer.new(chunkedSource(ct), vk, { segmentsInFlight: bad as number }),
      ).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    }
  });

  it('errors the stream with a typed error on a tampered segment; what it gave before is the only output', async () => {
    const bad = ct.slice();
    const at = bad.length - 3 * DEFAULT_SEGMENT_SIZE;
    bad[at] = bad[at]! ^ 1;
    const opened = await (await StreamUnsealer.new(chunkedSource(bad), vk)).open('bob', bobUsk);
    const reader = opened.readable.getReader();
    const given: Uint8Array[] = [];
    const failure = await (async () => {
      for (;;) {
        const read = await reader.read();
        if (read.done) return undefined;
        given.push(read.value);
      }
    })().catch((e: unknown) => e);
    expect(failure).toMatchObject({ code: 'TAMPERED' });
    await expect(opened.result).rejects.toMatchObject({ code: 'TAMPERED' });
    // Only whole segments before the damaged one came out, and they are the plaintext's start.
    const out = concat(given);
    expect(out.length).toBeLessThan(plain.length - 2 * DEFAULT_SEGMENT_SIZE);
    expectSameBytes(out, plain.subarray(0, out.length));
  });

  it('a source longer or shorter than the size it was said to have fails', async () => {
    // A size whose last segment would be shorter than a signature and a tag: no sealer writes it.
    const cut = splitFrame(ct).framingBytes + 50;
    await expect(StreamUnsealer.new(chunkedSource(ct), vk, { size: cut })).rejects.toMatchObject({
      code: 'TRUNCATED',
    });
    // A size that fits the layout but is one segment short: the stream delivers more than announced.
    const short = ct.length - (DEFAULT_SEGMENT_SIZE + 112);
    const opened = await (await StreamUnsealer.new(chunkedSource(ct), vk, { size: short })).open('bob', bobUsk);
    expect(opened.size).toBe(plain.length - DEFAULT_SEGMENT_SIZE);
    await expect(readAll(opened.readable)).rejects.toMatchObject({ code: 'SOURCE_FAILED' });
    for (const bad of [-1, 1.5, 'x']) {
      await expect(StreamUnsealer.new(chunkedSource(ct), vk, { size: bad as number })).rejects.toMatchObject({
        code: 'INVALID_INPUT',
      });
    }
  });

  it('a wrong id or key rejects open and leaves the source for a retry; a second open is INVALID_STATE', async () => {
    const unsealer = await StreamUnsealer.new(chunkedSource(ct), vk);
    await expect(unsealer.open('nobody', bobUsk)).rejects.toMatchObject({ code: 'UNKNOWN_RECIPIENT' });
    const opened = await unsealer.open('bob', bobUsk);
    await expect(unsealer.open('bob', bobUsk)).rejects.toMatchObject({ code: 'INVALID_STATE' });
    expectSameBytes(await readAll(opened.readable), plain);
  });

  it('the sizes agree for a file read from the disk-like source of readFrame', async () => {
    const frame = await readFrame((offset, length) => Promise.resolve(ct.subarray(offset, offset + length)));
    expect(frame.framingBytes).toBe(splitFrame(ct).framingBytes);
  });
});
