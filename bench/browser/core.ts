/**
 * Pieces shared by the streaming benchmark's page (main.ts) and its worker (bench.worker.ts):
 * generated sources, counting sinks, a chunking-independent checksum, and the two limits of the
 * format (pipelined WebCrypto AES-GCM, the running SHAKE128 transcript). No DOM, no node:*.
 */
import { SEGMENT_BYTES, timeTranscript } from '../shake-core.js';
import type { XofFactory } from '../../lib/crypto/xof.js';

export const CHUNK_BYTES = 64 * 1024;
/** AES-GCM input of one sealed segment: 256 KiB of data and its 96-byte signature. */
export const SEGMENT_PLAIN_BYTES = 262_144 + 96;
/** A sealed segment on the wire: the above and the 16-byte tag. */
export const SEGMENT_WIRE_BYTES = SEGMENT_PLAIN_BYTES + 16;

/**
 * Every STRIDE-th byte of a stream, folded in order (FNV-1a style). It does not depend on how the
 * stream was cut into chunks, so a plaintext generator and any sink can agree on it, and it costs a
 * few thousand reads per 256 MiB instead of hashing everything inside a timed run.
 */
const STRIDE = 4093;

export class SampledChecksum {
  private offset = 0;
  private acc = 0x811c9dc5;

  update(chunk: Uint8Array): void {
    const end = this.offset + chunk.length;
    let p = Math.ceil(this.offset / STRIDE) * STRIDE;
    for (; p < end; p += STRIDE) this.acc = Math.imul(this.acc ^ chunk[p - this.offset]!, 0x01000193) >>> 0;
    this.offset = end;
  }

  get bytes(): number {
    return this.offset;
  }

  get value(): string {
    return `${this.offset}:${this.acc.toString(16).padStart(8, '0')}`;
  }
}

/** Deterministic plaintext, a fresh `chunkBytes` buffer per chunk, generated as it is read. */
const patterns = new Map<number, Uint8Array>();
const pattern = (chunkBytes: number) => {
  let p = patterns.get(chunkBytes);
  if (!p)
    patterns.set(chunkBytes, (p = Uint8Array.from({ length: chunkBytes + 251 }, (_, i) => (i * 2_654_435_761) >>> 24)));
  return p;
};

export function generated(total: number, sum?: SampledChecksum, chunkBytes = CHUNK_BYTES): ReadableStream<Uint8Array> {
  const source = pattern(chunkBytes);
  let offset = 0;
  let k = 0;
  return new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        if (offset >= total) {
          controller.close();
          return;
        }
        const n = Math.min(chunkBytes, total - offset);
        const start = k++ % 251;
        const bytes = source.slice(start, start + n);
        sum?.update(bytes);
        offset += n;
        controller.enqueue(bytes);
      },
    },
    { highWaterMark: 0 },
  );
}

/** A readable over chunks held in memory (the chunks are enqueued as they are, never copied here). */
export function fromChunks(chunks: readonly Uint8Array[]): ReadableStream<Uint8Array> {
  let i = 0;
  return new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        if (i >= chunks.length) controller.close();
        else controller.enqueue(chunks[i++]!);
      },
    },
    { highWaterMark: 0 },
  );
}

/** Cuts a chunk list into fresh `size`-byte chunks (the last may be shorter). */
export function rechunk(chunks: readonly Uint8Array[], size: number): Uint8Array[] {
  const out: Uint8Array[] = [];
  let buf = new Uint8Array(size);
  let fill = 0;
  for (const c of chunks) {
    let o = 0;
    while (o < c.length) {
      const take = Math.min(size - fill, c.length - o);
      buf.set(c.subarray(o, o + take), fill);
      fill += take;
      o += take;
      if (fill === size) {
        out.push(buf);
        buf = new Uint8Array(size);
        fill = 0;
      }
    }
  }
  if (fill > 0) out.push(buf.slice(0, fill));
  return out;
}

export interface SinkReport {
  readonly bytes: number;
  readonly checksum: string;
  /** performance.now() of the first non-empty write, if any. */
  readonly firstWriteAt: number | undefined;
}

/** A sink that counts, samples, and optionally keeps what it is given. */
export interface CountingSink {
  readonly writable: WritableStream<Uint8Array>;
  /** Resolves when the writable was closed here (after its last write). */
  readonly closed: Promise<void>;
  report(): SinkReport;
}

export function countingSink(keep?: Uint8Array[]): CountingSink {
  const sum = new SampledChecksum();
  let firstWriteAt: number | undefined;
  let markClosed!: () => void;
  const closed = new Promise<void>((resolve) => (markClosed = resolve));
  const writable = new WritableStream<Uint8Array>({
    write(chunk) {
      if (chunk.length > 0) firstWriteAt ??= performance.now();
      sum.update(chunk);
      keep?.push(chunk);
    },
    close: () => markClosed(),
  });
  return { writable, closed, report: () => ({ bytes: sum.bytes, checksum: sum.value, firstWriteAt }) };
}

export interface LimitRun {
  readonly name: string;
  readonly bytes: number;
  readonly ms: number;
  readonly mbPerSecond: number;
}

const mbps = (bytes: number, ms: number) => bytes / 1e6 / (ms / 1000);

/**
 * Raw WebCrypto AES-128-GCM over `segments` whole segments with up to `inFlight` calls
 * outstanding: the best the AES half of the format can do here. 'open' decrypts valid
 * 262 256-byte segments (and checks their tags), 'seal' encrypts 262 240 bytes; both cycle
 * through 32 distinct segments (8 MiB), so the data is not all in L2.
 */
export async function aesLimit(direction: 'open' | 'seal', inFlight: number, segments: number): Promise<LimitRun> {
  const subtle = globalThis.crypto.subtle;
  const key = await subtle.importKey('raw', new Uint8Array(16), 'AES-GCM', false, ['encrypt', 'decrypt']);
  const iv = new Uint8Array(12);
  const plains: Uint8Array<ArrayBuffer>[] = [];
  const sealed: Uint8Array<ArrayBuffer>[] = [];
  for (let i = 0; i < 32; i++) {
    plains.push(new Uint8Array(SEGMENT_PLAIN_BYTES).map((_, j) => (i + j) & 255));
    sealed.push(new Uint8Array(await subtle.encrypt({ name: 'AES-GCM', iv }, key, plains[i]!)));
  }
  let k = 0;
  const once = () =>
    direction === 'open'
      ? subtle.decrypt({ name: 'AES-GCM', iv }, key, sealed[k++ % 32]!)
      : subtle.encrypt({ name: 'AES-GCM', iv }, key, plains[k++ % 32]!);
  const run = async (n: number) => {
    const queue: Promise<ArrayBuffer>[] = [];
    for (let i = 0; i < n; i++) {
      queue.push(once());
      if (queue.length >= inFlight) await queue.shift();
    }
    await Promise.all(queue);
  };
  await run(Math.min(segments, 16));
  const start = performance.now();
  await run(segments);
  const ms = performance.now() - start;
  const bytes = segments * (direction === 'open' ? SEGMENT_WIRE_BYTES : SEGMENT_PLAIN_BYTES);
  return { name: `WebCrypto AES-128-GCM ${direction}, ${inFlight} in flight`, bytes, ms, mbPerSecond: mbps(bytes, ms) };
}

/**
 * AES-GCM open and the transcript hash of each segment, one after the other on this thread: in
 * Chromium WebCrypto runs AES-GCM synchronously inside the subtle.decrypt() call, so this (not the
 * slower of the two) is what a single thread can reach. A ring of 32 distinct segments (8 MiB)
 * keeps the data out of L2, as a stream's would be.
 */
export async function serialLimit(create: XofFactory, segments: number): Promise<LimitRun> {
  const subtle = globalThis.crypto.subtle;
  const key = await subtle.importKey('raw', new Uint8Array(16), 'AES-GCM', false, ['encrypt', 'decrypt']);
  const iv = new Uint8Array(12);
  const ring: Uint8Array<ArrayBuffer>[] = [];
  for (let i = 0; i < 32; i++) {
    const plain = new Uint8Array(SEGMENT_PLAIN_BYTES).map((_, j) => (i + j) & 255);
    ring.push(new Uint8Array(await subtle.encrypt({ name: 'AES-GCM', iv }, key, plain)));
  }
  const run = async (n: number) => {
    const transcript = create();
    let sink = 0;
    for (let i = 0; i < n; i++) {
      const plain = new Uint8Array(await subtle.decrypt({ name: 'AES-GCM', iv }, key, ring[i % ring.length]!));
      transcript.update(plain.subarray(0, SEGMENT_BYTES));
      sink ^= transcript.clone().digest(64)[0]!;
    }
    return sink;
  };
  await run(16);
  const start = performance.now();
  await run(segments);
  const ms = performance.now() - start;
  const bytes = segments * SEGMENT_WIRE_BYTES;
  return { name: 'AES-GCM open + SHAKE128, serial on one thread', bytes, ms, mbPerSecond: mbps(bytes, ms) };
}

/** The running transcript: 256 KiB absorbed per segment, each forked (clone) for a 64-byte digest. */
export function shakeLimit(name: string, create: XofFactory, totalBytes: number): LimitRun {
  const segment = new Uint8Array(SEGMENT_BYTES).map((_, i) => (i * 7) & 255);
  timeTranscript(name, create, 8 * SEGMENT_BYTES, segment);
  const run = timeTranscript(name, create, totalBytes, segment);
  return {
    name: `SHAKE128 ${name} (+clone, digest(64) per 256 KiB)`,
    bytes: run.bytes,
    ms: run.ms,
    mbPerSecond: run.mbPerSecond,
  };
}

/**
 * Every limit, best of `rounds`: each round runs all of them once, so a burst of load on this
 * shared machine spoils one round of each rather than every run of one. Best, not median: a
 * limit is what this browser can reach.
 */
export async function allLimits(
  shake: XofFactory,
  segments: number,
  shakeBytes: number,
  inFlight: number[],
  rounds: number,
): Promise<LimitRun[]> {
  const best = new Map<string, LimitRun>();
  const keep = (run: LimitRun) => {
    const seen = best.get(run.name);
    if (!seen || run.mbPerSecond > seen.mbPerSecond) best.set(run.name, run);
  };
  for (let r = 0; r < rounds; r++) {
    for (const direction of ['open', 'seal'] as const) {
      for (const n of inFlight) keep(await aesLimit(direction, n, segments));
    }
    keep(shakeLimit('wasm (ours)', shake, shakeBytes));
    keep(await serialLimit(shake, segments));
  }
  return [...best.values()];
}
