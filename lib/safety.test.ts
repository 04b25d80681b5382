import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { chunkedSource, collector } from '../test/streams.js';
import { MAX_HEADER_BYTES, MAX_SIGNATURE_BYTES } from './frame.js';
import { DEFAULT_SEGMENT_SIZE, encodeHeader, type Mode } from './header.js';
import { StreamUnsealer, seal, sealStream, type Policy, type SealOptions } from './index.js';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from './keys.js';
import { hidePolicy } from './policy.js';
import { encodeSignatureExt } from './signatures.js';
import { headerSize, signatureExtSize } from './size.js';

/**
 * What a hostile or careless caller can do to a sealer or an unsealer: options that would seal a
 * file nobody can open (refused before a byte is written), sinks that fail while the source is
 * stalled (no hang), two readers of one stream (the second is refused, the first goes on).
 */

const EMAIL = 'pbdf.sidn-pbdf.email.email';
const bob: Policy = { ts: 1_700_000_000, con: [{ t: EMAIL, v: 'bob@example.com' }] };
const alice: Policy = { ts: 1_700_000_000, con: [{ t: EMAIL, v: 'alice@example.com' }] };
const kem = generateKemKeys();
const ibs = generateSigningKeys();
const keys = { mpk_b64: kem.mpk, vk_b64: ibs.vk, usk: { Bob: { usk_b64: extractUsk(kem.msk, bob) } } };
const pubSignKey = { key: extractSigningKey(ibs.sk, alice), policy: alice };
const base: SealOptions = { policy: { bob }, pubSignKey };
const plain = new TextEncoder().encode('hello');
const BOUND_MS = 3000;

/** Rejects with `code`, within BOUND_MS, and `sealStream` wrote nothing and aborted the sink. */
async function refusedBoth(options: unknown, code: string, message?: RegExp): Promise<void> {
  await expect(seal(keys.mpk_b64, options as SealOptions, plain)).rejects.toMatchObject({ code });
  const sink = collector();
  const started = Date.now();
  const error = await sealStream(keys.mpk_b64, options as SealOptions, chunkedSource(plain), sink.writable).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toMatchObject({ code });
  if (message) expect((error as Error).message).toMatch(message);
  expect(Date.now() - started).toBeLessThan(BOUND_MS);
  expect(sink.chunks).toEqual([]);
  expect(sink.state()).toBe('aborted');
}

describe('seal refuses what nobody could open, before a byte is written', () => {
  it('no recipients', async () => {
    await refusedBoth({ ...base, policy: {} }, 'INVALID_POLICY', /no recipients/);
    await refusedBoth({ ...base, policy: new Map() }, 'INVALID_POLICY', /no recipients/);
  });

  it('a policy given as an Array', async () => {
    await refusedBoth({ ...base, policy: [bob] }, 'INVALID_POLICY', /map/);
  });

  it('a recipient without attributes (the empty identity)', async () => {
    await refusedBoth({ ...base, policy: { bob, eve: { ts: 1, con: [] } } }, 'INVALID_POLICY', /"eve".*no attributes/);
  });

  it('a truthy or falsy skipEncryption that is not a boolean', async () => {
    for (const skipEncryption of [1, 'yes', {}, 0, '']) {
      await refusedBoth({ ...base, skipEncryption }, 'INVALID_POLICY', /skipEncryption/);
    }
  });

  it('lone surrogates in a recipient id, an attribute type or a value', async () => {
    await refusedBoth({ ...base, policy: { '\uD800a': bob } }, 'INVALID_POLICY', /recipient id.*lone surrogate/);
    await refusedBoth(
      { ...base, policy: { bob: { ts: 1, con: [{ t: 'x\uDC00' }] } } },
      'INVALID_POLICY',
      /attribute type/,
    );
    await refusedBoth(
      { ...base, policy: { bob: { ts: 1, con: [{ t: EMAIL, v: '\uDBFF' }] } } },
      'INVALID_POLICY',
      /attribute value/,
    );
  });

  it('ids are refused exactly when they are not well-formed Unicode (two such ids would collide)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.string({ unit: 'binary', maxLength: 6 }), async (id) => {
        const wellFormed = !/[\uD800-\uDFFF]/.test(id.replace(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g, ''));
        const outcome = await seal(keys.mpk_b64, { ...base, policy: { [id]: bob } }, plain).then(
          () => 'sealed',
          (e: { code?: string }) => e.code,
        );
        expect(outcome).toBe(wellFormed ? 'sealed' : 'INVALID_POLICY');
      }),
      { numRuns: 60 },
    );
  });

  it('a header over 1 MiB: TOO_LARGE, from the sizes alone', async () => {
    const many = Object.fromEntries(Array.from({ length: 3200 }, (_, i) => [`r${i}@example.com`, bob]));
    await refusedBoth({ ...base, policy: many }, 'TOO_LARGE', /header would be \d+ bytes/);
    const longId = { ['x'.repeat(MAX_HEADER_BYTES)]: bob };
    await refusedBoth({ ...base, policy: longId }, 'TOO_LARGE', /header would be/);
  });

  it("a signing policy whose header signature would exceed the readers' cap: TOO_LARGE", async () => {
    const huge: Policy = { ts: 1, con: [{ t: EMAIL, v: 'a'.repeat(MAX_SIGNATURE_BYTES) }] };
    const options = { policy: { bob }, pubSignKey: { key: extractSigningKey(ibs.sk, huge), policy: huge } };
    await refusedBoth(options, 'TOO_LARGE', /header signature would be/);
  });
});

describe('size arithmetic agrees with the encoders', () => {
  const text = fc.string({ unit: 'grapheme', maxLength: 12 });
  const attribute = fc
    .record({ t: text, v: fc.option(text, { nil: undefined }) })
    .map((a) => (a.v === undefined ? { t: a.t } : a));
  const policy = fc.record({
    ts: fc.integer({ min: 0, max: 2 ** 40 }),
    con: fc.array(attribute, { minLength: 1, maxLength: 4 }),
  });
  const mode: fc.Arbitrary<Mode> = fc.oneof(
    fc.integer({ min: 0, max: 2 ** 32 - 1 }).map((size) => ({ type: 'InMemory', size }) as const),
    fc
      .option(fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }), { nil: undefined })
      .map((upper) => ({ type: 'Streaming', segmentSize: DEFAULT_SEGMENT_SIZE, sizeHint: [0n, upper] }) as const),
  );

  it('headerSize = encodeHeader(...).length; signatureExtSize = encodeSignatureExt(...).length', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.tuple(text, policy), { minLength: 1, maxLength: 4, selector: ([id]) => id }),
        mode,
        policy,
        (entries, m, signer) => {
          const hidden = entries.map(([id, p]) => [id, hidePolicy(p)] as const);
          const recipients = new Map(hidden.map(([id, p]) => [id, { policy: p, capsule: new Uint8Array(284) }]));
          expect(headerSize(hidden, m)).toBe(encodeHeader({ recipients, iv: new Uint8Array(12), mode: m }).length);
          expect(signatureExtSize(signer)).toBe(encodeSignatureExt(new Uint8Array(96), signer).length);
        },
      ),
      { numRuns: 200 },
    );
  });
});

/** A source that delivers `first` and then never again (a stalled network or disk). */
function stalledSource(first: Uint8Array): { readable: ReadableStream<Uint8Array>; cancelled: Promise<unknown> } {
  let cancelled!: (reason: unknown) => void;
  const done = new Promise<unknown>((resolve) => (cancelled = resolve));
  let sent = false;
  const readable = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        if (!sent) {
          sent = true;
          controller.enqueue(first);
        }
        return new Promise(() => undefined); // never delivers again
      },
      cancel: (reason) => cancelled(reason),
    },
    { highWaterMark: 0 },
  );
  return { readable, cancelled: done };
}

/** A sink that accepts writes until `fail()` is called, then errors while idle (a dead upload). */
function dyingSink(): { writable: WritableStream<Uint8Array>; fail(): void; written(): number } {
  let controller!: WritableStreamDefaultController;
  let bytes = 0;
  const writable = new WritableStream<Uint8Array>({
    start: (c) => {
      controller = c;
    },
    write: (chunk) => {
      bytes += chunk.length;
    },
  });
  return { writable, fail: () => controller.error(new Error('connection lost')), written: () => bytes };
}

const within = <T>(promise: Promise<T>, ms = BOUND_MS): Promise<T> =>
  Promise.race([
    promise,
    new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`did not settle within ${ms} ms`)), ms)),
  ]);

describe('no hang when the sink dies while the source is stalled', () => {
  it('sealStream rejects with SINK_FAILED and cancels the source', async () => {
    const source = stalledSource(new Uint8Array(1000));
    const sink = dyingSink();
    const sealing = sealStream(keys.mpk_b64, base, source.readable, sink.writable);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(sink.written()).toBeGreaterThan(0); // the header went out; the source now waits
    sink.fail();
    await expect(within(sealing)).rejects.toMatchObject({ code: 'SINK_FAILED' });
    await expect(within(source.cancelled)).resolves.toMatchObject({ code: 'SINK_FAILED' });
  });

  it('StreamUnsealer.unseal rejects with SINK_FAILED and cancels the source', async () => {
    const sealed = collector();
    await sealStream(keys.mpk_b64, base, chunkedSource(new Uint8Array(3 * DEFAULT_SEGMENT_SIZE)), sealed.writable);
    const bytes = sealed.bytes();
    const prefix = bytes.subarray(0, bytes.length - DEFAULT_SEGMENT_SIZE); // the rest never comes
    const source = stalledSource(prefix);
    const unsealer = await StreamUnsealer.new(source.readable, keys.vk_b64);
    const sink = dyingSink();
    const opening = unsealer
      .unseal('bob', keys.usk.Bob.usk_b64, sink.writable)
      .catch((e: unknown) => Promise.reject(e));
    await new Promise((resolve) => setTimeout(resolve, 300));
    sink.fail();
    await expect(within(opening)).rejects.toMatchObject({ code: 'SINK_FAILED' });
    await expect(within(source.cancelled)).resolves.toBeDefined();
  });

  it('a source whose cancel never settles does not hold the failing seal', async () => {
    const readable = new ReadableStream<Uint8Array>({
      pull: () => new Promise(() => undefined),
      cancel: () => new Promise(() => undefined),
    });
    const sink = dyingSink();
    const sealing = sealStream(keys.mpk_b64, base, readable, sink.writable);
    await new Promise((resolve) => setTimeout(resolve, 100));
    sink.fail();
    await expect(within(sealing, 2000 + BOUND_MS)).rejects.toMatchObject({ code: 'SINK_FAILED' });
  });
});

describe('one StreamUnsealer, one reader', () => {
  it('a second concurrent unseal gets INVALID_STATE at once; the first succeeds', async () => {
    const content = new Uint8Array(2 * DEFAULT_SEGMENT_SIZE + 5).map((_, i) => i);
    const sealed = collector();
    await sealStream(keys.mpk_b64, base, chunkedSource(content), sealed.writable);
    const unsealer = await StreamUnsealer.new(chunkedSource(sealed.bytes(), 4096), keys.vk_b64);
    const first = collector();
    const second = collector();
    const a = unsealer.unseal('bob', keys.usk.Bob.usk_b64, first.writable);
    const b = unsealer.unseal('bob', keys.usk.Bob.usk_b64, second.writable);
    await expect(within(b, 200)).rejects.toMatchObject({ code: 'INVALID_STATE' });
    await expect(a).resolves.toMatchObject({ public: { con: alice.con } });
    expect(first.bytes()).toEqual(content);
    expect(second.chunks).toEqual([]);
    await expect(unsealer.unseal('bob', keys.usk.Bob.usk_b64, collector().writable)).rejects.toMatchObject({
      code: 'INVALID_STATE',
      message: expect.stringMatching(/already unsealed/),
    });
  });

  it('after a wrong recipient id the stream can still be unsealed', async () => {
    const sealed = collector();
    await sealStream(keys.mpk_b64, base, chunkedSource(plain), sealed.writable);
    const unsealer = await StreamUnsealer.new(chunkedSource(sealed.bytes()), keys.vk_b64);
    await expect(unsealer.unseal('mallory', keys.usk.Bob.usk_b64, collector().writable)).rejects.toMatchObject({
      code: 'UNKNOWN_RECIPIENT',
    });
    const out = collector();
    await unsealer.unseal('bob', keys.usk.Bob.usk_b64, out.writable);
    expect(out.bytes()).toEqual(plain);
  });
});

describe('a prepared user secret key (the caller keeps it, not the library)', () => {
  it('opens files in both modes, as often as the caller likes; anything else is INVALID_KEY', async () => {
    const { prepareUserSecretKey, Unsealer } = await import('./index.js');
    const prepared = prepareUserSecretKey(keys.usk.Bob.usk_b64);
    for (let i = 0; i < 2; i++) {
      const [got] = await (
        await Unsealer.new(await seal(keys.mpk_b64, base, plain), keys.vk_b64)
      ).unseal('bob', prepared);
      expect(got).toEqual(plain);
    }
    const sealed = collector();
    await sealStream(keys.mpk_b64, base, chunkedSource(plain), sealed.writable);
    const out = collector();
    await (await StreamUnsealer.new(chunkedSource(sealed.bytes()), keys.vk_b64)).unseal('bob', prepared, out.writable);
    expect(out.bytes()).toEqual(plain);
    const fake = {} as unknown as typeof prepared;
    await expect(
      (await Unsealer.new(await seal(keys.mpk_b64, base, plain), keys.vk_b64)).unseal('bob', fake),
    ).rejects.toMatchObject({ code: 'INVALID_KEY' });
  });
});
