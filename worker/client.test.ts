import { expose } from 'comlink';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { AuthenticationError, FormatError, InputError, PostGuardError } from '../lib/errors.js';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from '../lib/keys.js';
import type { SealOptions } from '../lib/seal.js';
import { REMOTE_QUEUE_BYTES } from '../lib/crypto/segment-hasher.js';
import { loadPgWasm, type PgWasm } from '../test/pgwasm.js';
import { chunkedSource, collector, concat as concatBytes, failingSource } from '../test/streams.js';
import { splitFrame } from '../lib/frame.js';
import { DEFAULT_SEGMENT_SIZE } from '../lib/index.js';
import { SEGMENT_OVERHEAD } from '../lib/segments.js';
import { PostGuardWorker } from './client.js';
import { acceptOn } from './transfer.js';
import { cryptoWorkerApi } from './worker-api.js';
import { WorkerChannel, type ChannelTarget } from './worker-channel.js';

/**
 * The client and the worker API over comlink, in Node: one end of a MessageChannel serves
 * worker-api.ts, the client wraps the other, with streams relayed over ports (port-stream.ts) as
 * in browsers. The real module worker in Chromium is tested in worker/test/crypto-worker.spec.ts;
 * the relay's own rules in port-stream.test.ts.
 */

const TS = 1_700_000_000;
const EMAIL = 'pbdf.sidn-pbdf.email.email';
const ALICE = 'alice@example.org';

let pgwasm: PgWasm;
let mpk: string;
let vk: string;
let usk: string;
let options: SealOptions;
const message = (n: number) => Uint8Array.from({ length: n }, (_, i) => (i * 13 + 5) & 255);
const MIB = 1_048_576;
/**
 * Most a stream through the worker reads ahead of a stalled sink: the sink's window (1 MiB + a
 * segment), the segments in flight in the worker (a sealer feeding a hashing thread queues up to
 * REMOTE_QUEUE_BYTES; otherwise 4) + the one being filled, the source's window (1 MiB + a batch +
 * a chunk), what the sink took before it failed: ~9 MiB.
 */
const IN_FLIGHT_BOUND = 4 * MIB + REMOTE_QUEUE_BYTES;

beforeAll(async () => {
  pgwasm = await loadPgWasm();
  const kem = generateKemKeys();
  const ibs = generateSigningKeys();
  mpk = kem.mpk;
  vk = ibs.vk;
  const alice = { ts: TS, con: [{ t: EMAIL, v: ALICE }] };
  usk = extractUsk(kem.msk, alice);
  const sender = { ts: TS, con: [{ t: EMAIL, v: 'bob@example.org' }] };
  options = { policy: { [ALICE]: alice }, pubSignKey: { key: extractSigningKey(ibs.sk, sender), policy: sender } };
});

function connect() {
  const { port1, port2 } = new MessageChannel();
  expose(cryptoWorkerApi(), port1);
  const pg = new PostGuardWorker({ endpoint: port2 as never });
  return { pg, close: () => (port1.close(), port2.close()) };
}

/**
 * As the page's PostGuardWorker and crypto.worker.ts connect in Firefox and WebKit: comlink and the
 * relayed streams share the worker's own channel (worker-channel.ts); a MessagePort stands in for
 * the Worker here, and the user agent is Firefox's (or the one given) while the client is made.
 */
const FIREFOX = 'Mozilla/5.0 (X11; Linux x86_64; rv:153.0) Gecko/20100101 Firefox/153.0';
const WEBKIT = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/60.5 Safari/605.1.15';
const CHROMIUM =
  'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36';

function connectOverChannel(userAgent = FIREFOX) {
  const { port1, port2 } = new MessageChannel();
  const channel = new WorkerChannel(port1 as unknown as ChannelTarget);
  acceptOn(channel);
  expose(cryptoWorkerApi(), channel.endpoint);
  const transferred: unknown[] = [];
  const post = port2.postMessage.bind(port2);
  port2.postMessage = ((message: unknown, transfer?: Transferable[]) => {
    transferred.push(...(transfer ?? []));
    post(message, transfer as never);
  }) as typeof port2.postMessage;
  vi.stubGlobal('navigator', { userAgent });
  let pg: PostGuardWorker;
  try {
    pg = new PostGuardWorker({ worker: port2 as unknown as Worker });
  } finally {
    vi.unstubAllGlobals();
  }
  return { pg, transferred, close: () => (port1.close(), port2.close()) };
}

describe("streams over the worker's own channel", () => {
  it('sealStream → StreamUnsealer, with no MessagePort sent', async () => {
    const { pg, transferred, close } = connectOverChannel();
    const plain = message(1_500_000);
    const sealed = collector();
    await pg.sealStream(mpk, options, chunkedSource(plain, 50_000), sealed.writable);
    const opened = collector();
    const su = await pg.StreamUnsealer.new(chunkedSource(sealed.bytes(), 33_333), vk);
    expect((await su.unseal(ALICE, usk, opened.writable)).public).toEqual(options.pubSignKey.policy);
    expect(opened.state()).toBe('closed');
    expect(Buffer.from(opened.bytes()).equals(plain)).toBe(true);
    su.free();
    expect(transferred.some((t) => t instanceof MessagePort)).toBe(false);
    close();
  });

  it.each([
    { engine: 'WebKit', userAgent: WEBKIT, ports: 0 },
    { engine: 'Chromium', userAgent: CHROMIUM, ports: 2 },
  ])(
    'in $engine a stream sends $ports MessagePorts (Chromium keeps a port of its own per stream)',
    async ({ userAgent, ports }) => {
      const { pg, transferred, close } = connectOverChannel(userAgent);
      const sealed = collector();
      await pg.sealStream(mpk, options, chunkedSource(message(100_000)), sealed.writable);
      expect(sealed.state()).toBe('closed');
      expect(transferred.filter((t) => t instanceof MessagePort)).toHaveLength(ports);
      close();
    },
  );

  it('a tampered stream: the promise rejects and the writable is aborted, both with TAMPERED', async () => {
    const { pg, close } = connectOverChannel();
    const sealed = collector();
    await pg.sealStream(mpk, options, chunkedSource(message(600_000)), sealed.writable);
    const ct = sealed.bytes();
    ct[ct.length - 5000]! ^= 1;
    const opened = collector();
    const su = await pg.StreamUnsealer.new(chunkedSource(ct), vk);
    await expect(su.unseal(ALICE, usk, opened.writable)).rejects.toMatchObject({ code: 'TAMPERED' });
    await expect.poll(() => opened.state()).toBe('aborted');
    expect(opened.abortReason()).toMatchObject({ code: 'TAMPERED' });
    close();
  });
});

describe('through comlink', () => {
  let pg: PostGuardWorker;
  let close: () => void;
  beforeAll(() => ({ pg, close } = connect()));
  afterAll(() => close());

  it('seal → Unsealer: inspect, identity, unseal', async () => {
    const plain = message(100_000);
    const ct = await pg.seal(mpk, options, plain);
    expect(plain).toEqual(message(100_000)); // the caller's buffer is untouched
    const u = await pg.Unsealer.new(ct, vk);
    expect([...(await u.inspect_header()).keys()]).toEqual([ALICE]);
    expect((await u.inspectHeader()).get(ALICE)).toEqual({ ts: TS, con: [{ t: EMAIL, v: '' }] });
    expect(await u.public_identity()).toEqual(options.pubSignKey.policy);
    const [out, sender] = await u.unseal(ALICE, usk);
    expect(out).toEqual(plain);
    expect(sender).toEqual({ public: options.pubSignKey.policy, contentSigner: 'public', bound: true });
    u.free();
  });

  it('sealStream → StreamUnsealer with streams in and out', async () => {
    const plain = message(700_000);
    const sealed = collector();
    await pg.sealStream(mpk, options, chunkedSource(plain, 50_000), sealed.writable);
    expect(sealed.state()).toBe('closed');
    const opened = collector();
    const su = await pg.StreamUnsealer.new(chunkedSource(sealed.bytes(), 33_333), vk);
    expect([...(await su.inspect_header()).keys()]).toEqual([ALICE]);
    expect(await su.unseal(ALICE, usk, opened.writable)).toEqual({
      public: options.pubSignKey.policy,
      contentSigner: 'public',
      bound: true,
    });
    expect(opened.state()).toBe('closed');
    expect(opened.bytes()).toEqual(plain);
    su.free();
  });

  it('opens what @e4a/pg-wasm sealed, and pg-wasm opens what the worker sealed', async () => {
    const plain = message(300_000);
    const theirs = collector();
    await pgwasm.sealStream(mpk, options, chunkedSource(plain), theirs.writable);
    const ours = collector();
    await (await pg.StreamUnsealer.new(chunkedSource(theirs.bytes()), vk)).unseal(ALICE, usk, ours.writable);
    expect(ours.bytes()).toEqual(plain);

    const sealed = await pg.seal(mpk, options, plain);
    const [back] = await (await pgwasm.Unsealer.new(sealed, vk)).unseal(ALICE, usk);
    expect(back).toEqual(plain);
  });

  it('errors keep their class and code', async () => {
    await expect(pg.Unsealer.new(new Uint8Array(64), vk)).rejects.toSatisfy(
      (e) => e instanceof FormatError && e.code === 'NOT_POSTGUARD',
    );
    const ct = await pg.seal(mpk, options, message(10));
    const u = await pg.Unsealer.new(ct, vk);
    await expect(u.unseal('mallory@example.org', usk)).rejects.toSatisfy(
      (e) => e instanceof InputError && e.code === 'UNKNOWN_RECIPIENT',
    );
    await expect(u.unseal(ALICE, 'AAAA')).rejects.toSatisfy((e) => e instanceof InputError && e.code === 'INVALID_KEY');
    await expect(pg.seal(mpk, { ...options, policy: undefined } as never, message(1))).rejects.toMatchObject({
      code: 'INVALID_POLICY',
    });
  });

  it('a tampered stream: the promise rejects and the writable is aborted, both with TAMPERED', async () => {
    const sealed = collector();
    await pg.sealStream(mpk, options, chunkedSource(message(600_000)), sealed.writable);
    const ct = sealed.bytes();
    ct[ct.length - 5000]! ^= 1;
    const opened = collector();
    const su = await pg.StreamUnsealer.new(chunkedSource(ct), vk);
    const error = await su.unseal(ALICE, usk, opened.writable).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AuthenticationError);
    expect(error).toMatchObject({ code: 'TAMPERED' });
    await expect.poll(() => opened.state()).toBe('aborted');
    expect(opened.abortReason()).toBeInstanceOf(AuthenticationError);
    expect(opened.abortReason()).toMatchObject({ code: 'TAMPERED' });
    // Segments before the bad one were delivered (authenticated); the rest never arrives.
    expect(opened.bytes().length).toBeLessThan(600_000);
  });

  it('a failing source is SOURCE_FAILED on both ends, and the sink never looks complete', async () => {
    const sealed = collector();
    const error = await pg
      .sealStream(mpk, options, failingSource(message(1000), new Error('disk on fire')), sealed.writable)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PostGuardError);
    expect(error).toMatchObject({ code: 'SOURCE_FAILED' });
    await expect.poll(() => sealed.state()).toBe('aborted');
    expect(sealed.abortReason()).toMatchObject({ code: 'SOURCE_FAILED' });
  });

  it('a sink that fails stops the seal with SINK_FAILED', async () => {
    let writes = 0;
    const sink = new WritableStream<Uint8Array>({
      write() {
        if (++writes === 2) throw new Error('quota exceeded');
      },
    });
    const error = await pg.sealStream(mpk, options, chunkedSource(message(2_000_000)), sink).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'SINK_FAILED' });
  });

  it("a sink's coded error reaches the worker's sealer as the cause of SINK_FAILED, and the source is cancelled", async () => {
    let cancelled: unknown;
    let offset = 0;
    const size = 64 * MIB;
    const source = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (offset >= size) return controller.close();
        controller.enqueue(new Uint8Array(65_536).fill(offset / 65_536));
        offset += 65_536;
      },
      cancel: (reason) => void (cancelled = reason),
    });
    let writes = 0;
    const sink = new WritableStream<Uint8Array>({
      write() {
        if (++writes === 3) throw new PostGuardError('SINK_FAILED', 'the disk is full');
      },
    });
    const error = await pg.sealStream(mpk, options, source, sink).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PostGuardError);
    expect(error).toMatchObject({ code: 'SINK_FAILED', cause: { code: 'SINK_FAILED', message: 'the disk is full' } });
    await expect.poll(() => cancelled).toBeInstanceOf(PostGuardError);
    expect(cancelled).toMatchObject({ code: 'SINK_FAILED' });
    // What was in flight: a window each way, the sealer's segments, a batch; not the whole source.
    expect(offset).toBeLessThan(IN_FLIGHT_BOUND);
  });

  it("the worker's cancel reaches the caller's source with the coded reason (a tampered segment)", async () => {
    const sealed = collector();
    await pg.sealStream(mpk, options, chunkedSource(new Uint8Array(8 * MIB).fill(7), MIB), sealed.writable);
    const ct = sealed.bytes();
    ct[400_000]! ^= 1;
    let cancelled: unknown;
    let offset = 0;
    const source = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (offset >= ct.length) return controller.close();
        controller.enqueue(ct.slice(offset, (offset += 65_536)));
      },
      cancel: (reason) => void (cancelled = reason),
    });
    const su = await pg.StreamUnsealer.new(source, vk);
    const opened = collector();
    await expect(su.unseal(ALICE, usk, opened.writable)).rejects.toMatchObject({ code: 'TAMPERED' });
    await expect.poll(() => cancelled).toBeInstanceOf(AuthenticationError);
    expect(cancelled).toMatchObject({ code: 'TAMPERED' });
    expect(offset).toBeLessThan(400_000 + IN_FLIGHT_BOUND);
  });

  it('a source chunk that is not bytes fails the seal with SOURCE_FAILED caused by INVALID_INPUT, on both ends', async () => {
    const source = new ReadableStream<unknown>({
      start(controller) {
        controller.enqueue(message(100));
        controller.enqueue('not bytes');
      },
    });
    const sealed = collector();
    const error = await pg
      .sealStream(mpk, options, source as ReadableStream<Uint8Array>, sealed.writable)
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'SOURCE_FAILED', cause: { code: 'INVALID_INPUT' } });
    expect((error as Error).cause).toBeInstanceOf(InputError);
    await expect.poll(() => sealed.state()).toBe('aborted');
    expect(sealed.abortReason()).toMatchObject({ code: 'SOURCE_FAILED' });
  });

  /** A source that yields `first` and then never delivers again; records why it was cancelled. */
  function stalledAfter(first: Uint8Array) {
    let cancelled: unknown;
    let given = false;
    const stream = new ReadableStream<Uint8Array>(
      {
        pull(controller) {
          if (!given) controller.enqueue(first);
          given = true;
          return new Promise<void>(() => undefined);
        },
        cancel: (reason) => void (cancelled = reason ?? 'no reason'),
      },
      { highWaterMark: 0 },
    );
    return { stream, cancelled: () => cancelled };
  }

  /** A sink that takes writes until `kill` errors it from outside, as a dropped connection does. */
  function killableSink() {
    let controller!: WritableStreamDefaultController;
    let writes = 0;
    const writable = new WritableStream<Uint8Array>({
      start: (c) => void (controller = c),
      write: () => void writes++,
    });
    return { writable, kill: (e: unknown) => controller.error(e), writes: () => writes };
  }

  /** Settles `p` within `ms`, or fails the test: what this suite is about is never waiting forever. */
  const within = <T>(ms: number, p: Promise<T>): Promise<T> =>
    Promise.race([
      p,
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`still pending after ${ms} ms`)), ms)),
    ]);

  it('the sink dies while the source is stalled: sealStream rejects with SINK_FAILED and cancels the source', async () => {
    const source = stalledAfter(message(300_000));
    const sink = killableSink();
    const sealing = pg.sealStream(mpk, options, source.stream, sink.writable).catch((e: unknown) => e);
    await expect.poll(() => sink.writes()).toBeGreaterThanOrEqual(2); // the frame and segment 0
    sink.kill(new Error('connection reset'));
    expect(await within(3000, sealing)).toMatchObject({ code: 'SINK_FAILED' });
    await expect.poll(() => source.cancelled()).toMatchObject({ code: 'SINK_FAILED' });
  });

  it('the sink dies while the ciphertext source is stalled: unseal rejects with SINK_FAILED and cancels the source', async () => {
    const sealed = collector();
    await pg.sealStream(mpk, options, chunkedSource(message(1_000_000)), sealed.writable);
    const source = stalledAfter(sealed.bytes().slice(0, 400_000));
    const su = await pg.StreamUnsealer.new(source.stream, vk);
    const sink = killableSink();
    const unsealing = su.unseal(ALICE, usk, sink.writable).catch((e: unknown) => e);
    await expect.poll(() => sink.writes()).toBeGreaterThanOrEqual(1); // segment 0, authenticated
    sink.kill(new Error('tab closed'));
    expect(await within(3000, unsealing)).toMatchObject({ code: 'SINK_FAILED' });
    await expect.poll(() => source.cancelled()).toMatchObject({ code: 'SINK_FAILED' });
  });

  it('a stalled source behind a slow sink: what is sealed keeps reaching the sink, and the seal completes when the source resumes', async () => {
    const plain = message(700_000);
    let release!: () => void;
    const resumed = new Promise<void>((resolve) => (release = resolve));
    let step = 0;
    const source = new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          if (step++ === 0) return controller.enqueue(plain.slice(0, 600_000));
          await resumed;
          controller.enqueue(plain.slice(600_000));
          controller.close();
        },
      },
      { highWaterMark: 0 },
    );
    const chunks: Uint8Array[] = [];
    const slow = new WritableStream<Uint8Array>({
      async write(chunk) {
        await new Promise((r) => setTimeout(r, 30));
        chunks.push(chunk.slice());
      },
    });
    const sealing = pg.sealStream(mpk, options, source, slow);
    // The frame and the two full segments of the first 600 kB arrive while the source is stalled.
    await expect.poll(() => chunks.length, { timeout: 5000 }).toBeGreaterThanOrEqual(3);
    release();
    await within(5000, sealing);
    const opened = collector();
    await (await pg.StreamUnsealer.new(chunkedSource(concatBytes(chunks)), vk)).unseal(ALICE, usk, opened.writable);
    expect(opened.bytes()).toEqual(plain);
  });

  it('a stream cut at a segment boundary is TRUNCATED through the worker, on the promise and on the sink', async () => {
    const sealed = collector();
    await pg.sealStream(mpk, options, chunkedSource(message(1_000_000)), sealed.writable);
    const ct = sealed.bytes();
    // Keep the framing and the full segments, drop the final one: what is left authenticates, then just ends.
    const framing = ct.length - splitFrame(ct).payload.length;
    const wire = DEFAULT_SEGMENT_SIZE + SEGMENT_OVERHEAD;
    const cut = ct.slice(0, framing + Math.floor((ct.length - framing) / wire) * wire);
    const su = await pg.StreamUnsealer.new(chunkedSource(cut), vk);
    const opened = collector();
    const error = await within(
      3000,
      su.unseal(ALICE, usk, opened.writable).catch((e: unknown) => e),
    );
    expect(error).toBeInstanceOf(FormatError);
    expect(error).toMatchObject({ code: 'TRUNCATED' });
    await expect.poll(() => opened.state()).toBe('aborted');
    expect(opened.abortReason()).toMatchObject({ code: 'TRUNCATED' });
  });

  it('chunks of any byte type and size, empty ones included, seal to what a Uint8Array stream seals to', async () => {
    const plain = message(600_000);
    const chunks: unknown[] = [];
    for (let offset = 0, i = 0; offset < plain.length; i++) {
      const n = [0, 1, 70_000, 333, 0, 400_000][i % 6]!;
      const part = plain.slice(offset, offset + n);
      chunks.push(i % 3 === 0 ? part.buffer : i % 3 === 1 ? new DataView(part.buffer) : part);
      offset += n;
    }
    const source = new ReadableStream<unknown>({
      pull: (controller) => (chunks.length > 0 ? controller.enqueue(chunks.shift()) : controller.close()),
    });
    const sealed = collector();
    await pg.sealStream(mpk, options, source as ReadableStream<Uint8Array>, sealed.writable);
    const opened = collector();
    await (await pg.StreamUnsealer.new(chunkedSource(sealed.bytes()), vk)).unseal(ALICE, usk, opened.writable);
    expect(opened.bytes()).toEqual(plain);
  });
});
