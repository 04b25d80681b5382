import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { collector } from '../test/streams.js';
import { DEFAULT_SEGMENT_SIZE, StreamUnsealer, sealStream, type SealOptions } from './index.js';
import { MAX_FINISHED_UNWRITTEN, pumpSegments } from './pump.js';
import { PIECE_BYTES } from './io.js';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from './keys.js';

/**
 * Finished segments leave the pump at once: a slow or stalled source does not hold back output
 * that is already sealed or verified (time to first byte, progress in a download).
 */

let mpk: string;
let vk: string;
let usk: string;
let options: SealOptions;

beforeAll(() => {
  const kem = generateKemKeys();
  const ibs = generateSigningKeys();
  const bob = { ts: 1, con: [{ t: 'pbdf.sidn-pbdf.email.email', v: 'bob@example.com' }] };
  mpk = kem.mpk;
  vk = ibs.vk;
  usk = extractUsk(kem.msk, bob);
  options = { policy: { bob }, pubSignKey: { key: extractSigningKey(ibs.sk, bob), policy: bob } };
});

/** Yields `first`, then waits for `release()` before yielding `rest` and closing. */
function gatedSource(first: Uint8Array, rest: Uint8Array) {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let step = 0;
  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (step++ === 0) return controller.enqueue(first);
      await gate;
      if (rest.length > 0) controller.enqueue(rest);
      controller.close();
    },
  });
  return { stream, release };
}

describe('pump', () => {
  it('writes a sealed segment while the source is still stalled', async () => {
    const plain = new Uint8Array(DEFAULT_SEGMENT_SIZE + 1000).fill(5);
    const { stream, release } = gatedSource(
      plain.subarray(0, DEFAULT_SEGMENT_SIZE),
      plain.subarray(DEFAULT_SEGMENT_SIZE),
    );
    const out = collector();
    const sealing = sealStream(mpk, options, stream, out.writable);
    // The frame and segment 0 arrive before the source delivers anything more.
    await vi.waitFor(() => expect(out.chunks.length).toBeGreaterThanOrEqual(2), { timeout: 5000 });
    expect(out.state()).toBe('open');
    release();
    await sealing;
    expect(out.state()).toBe('closed');
  });

  it('writes verified plaintext of segment 0 while the ciphertext source is still stalled', async () => {
    const plain = new Uint8Array(3 * DEFAULT_SEGMENT_SIZE).map((_, i) => i & 255);
    const sealed = collector();
    await sealStream(
      mpk,
      options,
      new ReadableStream({ start: (c) => (c.enqueue(plain), c.close()) }),
      sealed.writable,
    );
    const ct = sealed.bytes();
    const cut = 2000 + DEFAULT_SEGMENT_SIZE + 112; // the framing and a little more than segment 0
    const { stream, release } = gatedSource(ct.subarray(0, cut), ct.subarray(cut));
    const out = collector();
    const unsealing = (await StreamUnsealer.new(stream, vk)).unseal('bob', usk, out.writable);
    await vi.waitFor(() => expect(out.bytes().length).toBeGreaterThan(0), { timeout: 5000 });
    expect(out.bytes()).toEqual(plain.subarray(0, out.bytes().length));
    expect(out.state()).toBe('open');
    release();
    await unsealing;
    expect(out.bytes()).toEqual(plain);
  });
});

describe('a slow sink', () => {
  it('holds a deep queue to a few finished segments: what waits for the sink stays bounded', async () => {
    // Each chunk is one segment, finished at once; the sink takes nothing until released.
    let read = 0;
    const source = () => Promise.resolve(read < 100 ? new Uint8Array(1000).fill(read++) : undefined);
    const segmenter = {
      push: (chunk: Uint8Array) => [Promise.resolve(chunk.slice())],
      finish: () => [Promise.resolve(new Uint8Array(0))],
    };
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const written: number[] = [];
    const sink = new WritableStream<Uint8Array>({
      async write(chunk) {
        await gate;
        written.push(chunk[0]!);
      },
    });
    const pumping = pumpSegments(source, sink.getWriter(), undefined, segmenter, 24);
    await new Promise((resolve) => setTimeout(resolve, 50));
    // The one the sink is writing, the one its queue holds, the one waiting for room there, and the
    // finished ones up to one past the bound; with only the queue's depth it would have read 27.
    expect(read).toBeLessThanOrEqual(MAX_FINISHED_UNWRITTEN + 4);
    release();
    await pumping;
    expect(written).toEqual(Array.from({ length: 100 }, (_, i) => i));
  });
});

describe('memory', () => {
  setFlagsFromString('--expose_gc');
  const gc = runInNewContext('gc') as () => void;

  /** 64 KiB chunks up to `total`; every 128 chunks it collects garbage and records retained ArrayBuffer bytes. */
  function measuredSource(total: number, chunks: Uint8Array[] | undefined, samples: number[]) {
    let sent = 0;
    let i = 0;
    let pulls = 0;
    return new ReadableStream<Uint8Array>({
      pull(controller) {
        if (pulls++ % 128 === 0) {
          gc();
          samples.push(process.memoryUsage().arrayBuffers);
        }
        if (chunks ? i >= chunks.length : sent >= total) return controller.close();
        const chunk = chunks ? chunks[i++]! : new Uint8Array(65_536).fill(sent & 255);
        sent += chunk.length;
        controller.enqueue(chunk);
      },
    });
  }

  it('sealing and unsealing 96 MiB retain no chunks: growth stays far below the stream size', async () => {
    const total = 96 << 20;
    const sealSamples: number[] = [];
    const sealed: Uint8Array[] = [];
    let sealedBytes = 0;
    await sealStream(
      mpk,
      options,
      measuredSource(total, undefined, sealSamples),
      new WritableStream({
        write(c) {
          sealedBytes += c.length;
          if (sealed.length < 3) sealed.push(c.slice()); // keep only the head: the rest is counted
        },
      }),
    );
    expect(sealedBytes).toBeGreaterThan(total);
    expect(Math.max(...sealSamples) - sealSamples[0]!).toBeLessThan(24 << 20);

    // Unseal a ciphertext held outside the JS heap's accounting window: re-seal into 64 KiB chunks.
    const chunks: Uint8Array[] = [];
    await sealStream(
      mpk,
      options,
      measuredSource(total, undefined, []),
      new WritableStream({
        write(c) {
          for (let o = 0; o < c.length; o += 65_536) chunks.push(c.subarray(o, o + 65_536));
        },
      }),
    );
    gc();
    const openSamples: number[] = [];
    let plainBytes = 0;
    const u = await StreamUnsealer.new(measuredSource(0, chunks, openSamples), vk);
    await u.unseal('bob', usk, new WritableStream({ write: (c) => void (plainBytes += c.length) }));
    expect(plainBytes).toBe(total);
    expect(openSamples.length).toBeGreaterThan(10);
    expect(Math.max(...openSamples) - openSamples[0]!).toBeLessThan(24 << 20);
  });
});

describe('a huge chunk', () => {
  /** A segmenter that cuts 64 KiB segments and reports how many of its segments are unfinished. */
  function probeSegmenter() {
    const SEGMENT = 64 * 1024;
    let pending = 0;
    let maxPending = 0;
    let maxPush = 0;
    let buffered = new Uint8Array(0);
    const segment = (bytes: Uint8Array): Promise<Uint8Array> => {
      pending++;
      maxPending = Math.max(maxPending, pending);
      return new Promise((resolve) =>
        setTimeout(() => {
          pending--;
          resolve(bytes.slice());
        }, 0),
      );
    };
    return {
      stats: () => ({ maxPending, maxPush }),
      push(chunk: Uint8Array) {
        maxPush = Math.max(maxPush, chunk.length);
        const all = new Uint8Array(buffered.length + chunk.length);
        all.set(buffered);
        all.set(chunk, buffered.length);
        const out: Promise<Uint8Array>[] = [];
        let at = 0;
        for (; all.length - at > SEGMENT; at += SEGMENT) out.push(segment(all.subarray(at, at + SEGMENT)));
        buffered = all.slice(at);
        return out;
      },
      finish: () => [segment(buffered)],
    };
  }

  it('is fed in PIECE_BYTES pieces: segments in flight stay bounded, output is the input in order', async () => {
    const input = new Uint8Array(8 * PIECE_BYTES + 12345).map((_, i) => (i * 7) & 255);
    const segmenter = probeSegmenter();
    const out = collector();
    let sent = false;
    const source = () => Promise.resolve(sent ? undefined : ((sent = true), input));
    await pumpSegments(source, out.writable.getWriter(), undefined, segmenter, 4);
    const { maxPending, maxPush } = segmenter.stats();
    expect(maxPush).toBe(PIECE_BYTES);
    // One piece's segments plus the queue's allowance; a whole-chunk push would have made 129.
    expect(maxPending).toBeLessThanOrEqual(PIECE_BYTES / (64 * 1024) + 4);
    // toEqual walks megabytes element by element; Buffer.equals compares them at once.
    expect(Buffer.from(out.bytes()).equals(input)).toBe(true);
  });

  it('sealStream and StreamUnsealer take a whole file as one chunk', async () => {
    const plain = new Uint8Array(3 * PIECE_BYTES + 77).map((_, i) => (i * 13) & 255);
    const oneChunk = (bytes: Uint8Array) =>
      new ReadableStream<Uint8Array>({
        start(c) {
          c.enqueue(bytes);
          c.close();
        },
      });
    const sealed = collector();
    await sealStream(mpk, options, oneChunk(plain), sealed.writable);
    const opened = collector();
    const unsealer = await StreamUnsealer.new(oneChunk(sealed.bytes()), vk);
    await unsealer.unseal('bob', usk, opened.writable);
    expect(Buffer.from(opened.bytes()).equals(plain)).toBe(true);
  });
});
