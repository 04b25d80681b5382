import { beforeAll, describe, expect, it } from 'vitest';
import { loadPgWasm, type PgWasm } from '../test/pgwasm.js';
import { chunkedSource, collector, concat, failingSource } from '../test/streams.js';
import {
  DEFAULT_SEGMENT_SIZE,
  PostGuardError,
  StreamUnsealer,
  Unsealer,
  seal,
  prepareUserSecretKey,
  sealStream,
  type PreparedUserSecretKey,
  type SealOptions,
} from './index.js';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from './keys.js';
import { SegmentSealer, SEGMENT_OVERHEAD } from './segments.js';
import { prepareSeal } from './seal.js';
import { pumpSegments } from './pump.js';
import { inlineSegmentHasher } from './crypto/segment-hasher.js';

/**
 * Every kind of bad input gets a PostGuardError with a stable code, promptly; streaming
 * failures abort the output stream so nothing looks complete.
 */

const TS = 1_700_000_000;
const EMAIL = 'pbdf.sidn-pbdf.email.email';
const bob = { ts: TS, con: [{ t: EMAIL, v: 'bob@example.com' }] };
const carol = { ts: TS, con: [{ t: EMAIL, v: 'carol@example.com' }] };

let pg: PgWasm;
let mpk: string;
let vk: string;
let otherVk: string;
let bobUsk: string;
let carolUsk: string;
let options: SealOptions;
let memoryCt: Uint8Array;
let streamCt: Uint8Array;
const plain = Uint8Array.from({ length: 3 * DEFAULT_SEGMENT_SIZE + 5000 }, (_, i) => i & 255);
const wire = DEFAULT_SEGMENT_SIZE + SEGMENT_OVERHEAD;

beforeAll(async () => {
  pg = await loadPgWasm();
  const kem = generateKemKeys();
  const ibs = generateSigningKeys();
  mpk = kem.mpk;
  vk = ibs.vk;
  otherVk = generateSigningKeys().vk;
  bobUsk = extractUsk(kem.msk, bob);
  carolUsk = extractUsk(kem.msk, carol);
  const alice = { ts: TS, con: [{ t: EMAIL, v: 'alice@example.com' }] };
  options = { policy: { bob, carol }, pubSignKey: { key: extractSigningKey(ibs.sk, alice), policy: alice } };
  memoryCt = await seal(mpk, options, Uint8Array.of(1, 2, 3, 4, 5));
  const out = collector();
  await sealStream(mpk, options, chunkedSource(plain), out.writable);
  streamCt = out.bytes();
});

const code = (c: string) => expect.objectContaining({ code: c });

async function openMemory(ct: Uint8Array, id = 'bob', usk: string | PreparedUserSecretKey = bobUsk, key = vk) {
  const u = await Unsealer.new(ct, key);
  return u.unseal(id, usk);
}

async function openStream(ct: Uint8Array | ReadableStream<Uint8Array>, id = 'bob', usk = bobUsk) {
  const out = collector();
  const source = ct instanceof Uint8Array ? chunkedSource(ct, 70_000) : ct;
  let error: unknown;
  try {
    const u = await StreamUnsealer.new(source, vk);
    await u.unseal(id, usk, out.writable);
  } catch (e) {
    error = e;
  }
  return { error, out };
}

/** Streamed failures must reject with a typed error and leave the sink aborted, not closed. */
async function expectStreamFailure(ct: Uint8Array | ReadableStream<Uint8Array>, expected: string | string[]) {
  const { error, out } = await openStream(ct);
  expect(error).toBeInstanceOf(PostGuardError);
  const codes = Array.isArray(expected) ? expected : [expected];
  expect(codes).toContain((error as PostGuardError).code);
  expect(out.state()).not.toBe('closed');
  return out;
}

const segmentsOf = (ct: Uint8Array) => {
  const u = new DataView(ct.buffer, ct.byteOffset);
  const headerEnd = 10 + u.getUint32(6);
  const payloadStart = headerEnd + 4 + u.getUint32(headerEnd);
  const segments: Uint8Array[] = [];
  for (let o = payloadStart; o < ct.length; o += wire) segments.push(ct.subarray(o, Math.min(ct.length, o + wire)));
  return { frame: ct.subarray(0, payloadStart), segments };
};

describe('preamble and framing', () => {
  it('wrong prelude', async () => {
    const ct = memoryCt.slice();
    ct[0] = 0x50;
    await expect(Unsealer.new(ct, vk)).rejects.toThrow(code('NOT_POSTGUARD'));
    await expectStreamFailure(ct, 'NOT_POSTGUARD');
  });

  it('wrong version', async () => {
    const ct = memoryCt.slice();
    ct[5] = 3;
    await expect(Unsealer.new(ct, vk)).rejects.toThrow(code('UNSUPPORTED_VERSION'));
    await expectStreamFailure(ct, 'UNSUPPORTED_VERSION');
  });

  it('header length over 1 MiB fails before reading it', async () => {
    const ct = memoryCt.slice(0, 10);
    new DataView(ct.buffer).setUint32(6, 1024 * 1024 + 1);
    await expect(Unsealer.new(ct, vk)).rejects.toThrow(code('HEADER_TOO_LARGE'));
    // The stream never ends: we must not try to read the announced length.
    const endless = new ReadableStream<Uint8Array>({ start: (c) => c.enqueue(ct), pull: () => new Promise(() => {}) });
    await expectStreamFailure(endless, 'HEADER_TOO_LARGE');
  });

  it('a signature length field of 4 GiB fails without allocating or reading', async () => {
    const h = new DataView(memoryCt.buffer).getUint32(6);
    const ct = memoryCt.slice(0, 14 + h);
    new DataView(ct.buffer).setUint32(10 + h, 0xffff_ffff);
    await expect(Unsealer.new(ct, vk)).rejects.toThrow(code('HEADER_TOO_LARGE'));
    const endless = new ReadableStream<Uint8Array>({ start: (c) => c.enqueue(ct), pull: () => new Promise(() => {}) });
    await expectStreamFailure(endless, 'HEADER_TOO_LARGE');
  });

  it('a ciphertext in the other mode', async () => {
    await expect(Unsealer.new(streamCt, vk)).rejects.toThrow(code('WRONG_MODE'));
    await expectStreamFailure(memoryCt, 'WRONG_MODE');
  });

  it('not bytes at all', async () => {
    await expect(Unsealer.new('hello' as unknown as Uint8Array, vk)).rejects.toThrow(code('INVALID_INPUT'));
    const strings = new ReadableStream({ start: (c) => (c.enqueue('not bytes'), c.close()) });
    await expectStreamFailure(strings as ReadableStream<Uint8Array>, 'INVALID_INPUT');
  });
});

describe('in-memory tampering', () => {
  // These two open a thousand damaged files with one key: parsed once (prepareUserSecretKey), as a
  // caller opening many files would, so the time goes to the damage and not to the key's curve checks.
  it('truncated at every length is rejected with a typed error', async () => {
    const prepared = prepareUserSecretKey(bobUsk);
    for (let n = 0; n < memoryCt.length; n++) {
      const error = await openMemory(memoryCt.subarray(0, n), 'bob', prepared).then(
        () => undefined,
        (e) => e,
      );
      expect(error, `cut at ${n}`).toBeInstanceOf(PostGuardError);
    }
  });

  it('a flipped bit in any byte is rejected with a typed error', async () => {
    const prepared = prepareUserSecretKey(bobUsk);
    for (let i = 0; i < memoryCt.length; i++) {
      const ct = memoryCt.slice();
      ct[i]! ^= 1 << (i % 8);
      const error = await openMemory(ct, 'bob', prepared).then(
        () => undefined,
        (e) => e,
      );
      expect(error, `flip in byte ${i}`).toBeInstanceOf(PostGuardError);
    }
  });

  it('appended bytes are rejected', async () => {
    await expect(openMemory(concat([memoryCt, Uint8Array.of(0)]))).rejects.toThrow(code('TAMPERED'));
  });

  it('payload changes are TAMPERED, header changes BAD_SIGNATURE', async () => {
    const payload = memoryCt.slice();
    payload[payload.length - 1]! ^= 0x80;
    await expect(openMemory(payload)).rejects.toThrow(code('TAMPERED'));
    const header = memoryCt.slice();
    header[40]! ^= 1;
    await expect(Unsealer.new(header, vk)).rejects.toThrow(code('BAD_SIGNATURE'));
  });
});

describe('keys and recipients', () => {
  it('wrong USK', async () => {
    await expect(openMemory(memoryCt, 'bob', carolUsk)).rejects.toThrow(code('WRONG_KEY'));
    const { error, out } = await openStream(streamCt, 'bob', carolUsk);
    expect(error).toEqual(code('WRONG_KEY'));
    expect(out.state()).toBe('aborted');
  });

  it('unknown recipient, and the unsealer stays usable afterwards', async () => {
    const u = await Unsealer.new(memoryCt, vk);
    await expect(u.unseal('mallory', bobUsk)).rejects.toThrow(code('UNKNOWN_RECIPIENT'));
    const [got] = await u.unseal('bob', bobUsk);
    expect([...got]).toEqual([1, 2, 3, 4, 5]);

    const s = await StreamUnsealer.new(chunkedSource(streamCt), vk);
    const first = collector();
    await expect(s.unseal('mallory', bobUsk, first.writable)).rejects.toThrow(code('UNKNOWN_RECIPIENT'));
    expect(first.state()).toBe('aborted');
    const second = collector();
    await s.unseal('carol', carolUsk, second.writable);
    expect(second.bytes()).toEqual(plain);
    await expect(s.unseal('bob', bobUsk, collector().writable)).rejects.toThrow(code('INVALID_STATE'));
  });

  it('wrong VK', async () => {
    await expect(Unsealer.new(memoryCt, otherVk)).rejects.toThrow(code('BAD_SIGNATURE'));
    await expect(StreamUnsealer.new(chunkedSource(streamCt), otherVk)).rejects.toThrow(code('BAD_SIGNATURE'));
  });

  it.each([
    ['mpk', 'AAAA'],
    ['mpk', '!'.repeat(896)],
    ['mpk', 'A'.repeat(896)],
    ['signing key', 'x'],
    ['signing key', 'A'.repeat(128)], // parses (zero scalar, identity point) but was not issued for the policy
  ])('malformed %s %#', async (which, bad) => {
    const opts =
      which === 'mpk'
        ? { mpk: bad, options }
        : { mpk, options: { ...options, pubSignKey: { ...options.pubSignKey, key: bad } } };
    await expect(seal(opts.mpk, opts.options, Uint8Array.of(1))).rejects.toThrow(code('INVALID_KEY'));
    const out = collector();
    await expect(sealStream(opts.mpk, opts.options, chunkedSource(Uint8Array.of(1)), out.writable)).rejects.toThrow(
      code('INVALID_KEY'),
    );
    expect(out.state()).toBe('aborted');
  });

  it.each([['AAAA'], ['='.repeat(768)], ['A'.repeat(768)], [42]])('malformed usk %#', async (bad) => {
    await expect(openMemory(memoryCt, 'bob', bad as string)).rejects.toThrow(code('INVALID_KEY'));
  });

  it.each([['AAAA'], ['A'.repeat(44)], [null]])('malformed vk %#', async (bad) => {
    await expect(Unsealer.new(memoryCt, bad as string)).rejects.toThrow(code('INVALID_KEY'));
  });

  it('a signing key issued for another policy', async () => {
    const mallory = { ts: TS, con: [{ t: EMAIL, v: 'mallory@example.com' }] };
    const swapped = { ...options, pubSignKey: { key: options.pubSignKey.key, policy: mallory } };
    await expect(seal(mpk, swapped, Uint8Array.of(1))).rejects.toThrow(code('INVALID_KEY'));
  });

  it('missing policy or pubSignKey', async () => {
    await expect(seal(mpk, { pubSignKey: options.pubSignKey }, Uint8Array.of(1))).rejects.toThrow(
      code('INVALID_POLICY'),
    );
    await expect(seal(mpk, { policy: { bob } } as unknown as SealOptions, Uint8Array.of(1))).rejects.toThrow(
      code('INVALID_POLICY'),
    );
  });
});

describe('streaming tampering', () => {
  it('reordered, dropped, duplicated and appended segments', async () => {
    const { frame, segments } = segmentsOf(streamCt);
    expect(segments.length).toBe(4);
    const [s0, s1, s2, s3] = segments as [Uint8Array, Uint8Array, Uint8Array, Uint8Array];
    await expectStreamFailure(concat([frame, s1, s0, s2, s3]), 'TAMPERED');
    await expectStreamFailure(concat([frame, s0, s2, s3]), 'TAMPERED');
    await expectStreamFailure(concat([frame, s0, s1, s1, s2, s3]), 'TAMPERED');
    await expectStreamFailure(concat([frame, s0, s1, s2, s3, Uint8Array.of(0)]), 'TAMPERED');
    await expectStreamFailure(concat([frame, s0, s1, s2, s3, s3]), 'TAMPERED');
    await expectStreamFailure(concat([frame, s0, s1, s2]), 'TRUNCATED');
    await expectStreamFailure(frame, 'TRUNCATED');
  });

  it('truncated anywhere: in the framing, at and inside segments', async () => {
    const { frame } = segmentsOf(streamCt);
    const cuts = [
      0,
      3,
      9,
      10,
      200,
      frame.length - 1,
      frame.length,
      frame.length + 1,
      frame.length + wire - 1,
      frame.length + wire,
      frame.length + wire + 111,
      frame.length + 2 * wire + 5000,
      streamCt.length - 1,
    ];
    for (const n of cuts) {
      await expectStreamFailure(streamCt.subarray(0, n), ['TRUNCATED', 'TAMPERED']);
    }
  });

  it('a flipped bit in the framing or anywhere in the payload', async () => {
    const { frame } = segmentsOf(streamCt);
    const positions = [
      0,
      4,
      7,
      12,
      100,
      frame.length - 1,
      frame.length,
      frame.length + 4,
      frame.length + wire - 1,
      frame.length + wire - 100,
      frame.length + wire,
      frame.length + 2 * wire + 17,
      streamCt.length - 16,
      streamCt.length - 1,
    ];
    for (const i of positions) {
      const ct = streamCt.slice();
      ct[i]! ^= 0x10;
      const { error, out } = await openStream(ct);
      expect(error, `flip at ${i}`).toBeInstanceOf(PostGuardError);
      expect(out.state()).not.toBe('closed');
    }
  });

  it('releases no plaintext past the failing segment, and marks the sink failed', async () => {
    const { frame, segments } = segmentsOf(streamCt);
    const bad = segments[2]!.slice();
    bad[1000]! ^= 1;
    const out = await expectStreamFailure(concat([frame, segments[0]!, segments[1]!, bad, segments[3]!]), 'TAMPERED');
    expect(out.state()).toBe('aborted');
    expect(out.abortReason()).toEqual(code('TAMPERED'));
    // Only verified segments reached the sink, and they are a prefix of the plaintext.
    const written = out.bytes();
    expect(written.length).toBeLessThanOrEqual(2 * DEFAULT_SEGMENT_SIZE);
    expect(written).toEqual(plain.subarray(0, written.length));
  });

  it('a source that errors during unseal aborts the sink with SOURCE_FAILED', async () => {
    const { error, out } = await openStream(failingSource(streamCt.subarray(0, streamCt.length - 10)));
    expect(error).toEqual(code('SOURCE_FAILED'));
    expect(out.state()).toBe('aborted');
  });

  it('a sink that fails during unseal cancels the source with SINK_FAILED', async () => {
    let cancelled: unknown;
    // Long enough that verified output is written while input remains: more than the opener keeps
    // in flight (24 segments on Node's hashing thread).
    const long = collector();
    await sealStream(mpk, options, chunkedSource(new Uint8Array(32 * DEFAULT_SEGMENT_SIZE)), long.writable);
    const source = chunkedSource(long.bytes()).getReader();
    const watched = new ReadableStream<Uint8Array>({
      async pull(c) {
        const r = await source.read();
        if (r.done) c.close();
        else c.enqueue(r.value);
      },
      cancel(reason) {
        cancelled = reason;
      },
    });
    const sink = new WritableStream<Uint8Array>({ write: () => Promise.reject(new Error('disk full')) });
    const u = await StreamUnsealer.new(watched, vk);
    await expect(u.unseal('bob', bobUsk, sink)).rejects.toThrow(code('SINK_FAILED'));
    expect(cancelled).toEqual(code('SINK_FAILED'));
  });
});

describe('sealing from a failing source', () => {
  it('fails, aborts the output, and what was written does not open (here or in pg-wasm)', async () => {
    const out = collector();
    const source = failingSource(plain.subarray(0, 2 * DEFAULT_SEGMENT_SIZE + 100));
    await expect(sealStream(mpk, options, source, out.writable)).rejects.toThrow(code('SOURCE_FAILED'));
    expect(out.state()).toBe('aborted');
    const partial = out.bytes();
    await expectStreamFailure(partial, ['TRUNCATED', 'TAMPERED']);
    const theirs = collector();
    const u = await pg.StreamUnsealer.new(chunkedSource(partial), vk);
    await expect(u.unseal('bob', bobUsk, theirs.writable)).rejects.toBeDefined();
  });

  it('rejects non-byte chunks with INVALID_INPUT', async () => {
    const out = collector();
    const numbers = new ReadableStream({ start: (c) => (c.enqueue([1, 2, 3]), c.close()) });
    await expect(sealStream(mpk, options, numbers as ReadableStream<Uint8Array>, out.writable)).rejects.toThrow(
      code('INVALID_INPUT'),
    );
    expect(out.state()).toBe('aborted');
  });
});

describe('segment sizes other than the default (crafted by a key holder)', () => {
  async function craft(segmentSize: number, message: Uint8Array): Promise<Uint8Array> {
    const ctx = await prepareSeal(mpk, options, { type: 'Streaming', segmentSize, sizeHint: [0n, undefined] });
    const out = collector();
    const source = chunkedSource(message, 777).getReader();
    const hasher = inlineSegmentHasher(ctx.transcript);
    await pumpSegments(source, out.writable.getWriter(), ctx.frame, new SegmentSealer({ ...ctx, hasher }, segmentSize));
    return out.bytes();
  }

  it('opens 1000-byte and 4 MiB segments, here and in pg-wasm', async () => {
    for (const size of [1000, 4 * 1024 * 1024]) {
      const ct = await craft(size, plain.subarray(0, 9999));
      const ours = collector();
      await (await StreamUnsealer.new(chunkedSource(ct), vk)).unseal('bob', bobUsk, ours.writable);
      expect(ours.bytes()).toEqual(plain.subarray(0, 9999));
      const theirs = collector();
      await (await pg.StreamUnsealer.new(chunkedSource(ct), vk)).unseal('carol', carolUsk, theirs.writable);
      expect(theirs.bytes()).toEqual(plain.subarray(0, 9999));
    }
  });

  it('rejects a validly signed header with a segment size over 4 MiB', async () => {
    const ct = await craft(4 * 1024 * 1024 + 1, plain.subarray(0, 10));
    await expectStreamFailure(ct, 'MALFORMED');
  });
});
