/// <reference lib="webworker" />
import { loadShake128 } from '#shake';
import { HASH_WORKER_NAME, hashWorker, serveHashing, startHashWorker } from '../../lib/crypto/hash-worker.js';
import { RemoteHashing } from '../../lib/crypto/segment-hasher-remote.js';
import { StreamUnsealer, sealStream } from '../../lib/index.js';
import type { SealOptions } from '../../lib/seal.js';
import { portToReadable, portToWritable, spendChunksOnRead } from '../../worker/port-stream.js';
import type { BenchReply } from './bench.worker.js';
import { SEGMENT_PLAIN_BYTES, SampledChecksum, countingSink, fromChunks, generated } from './core.js';

/**
 * Where the crypto worker's time goes (bench/worker-phases.ts): the product's sealStream and
 * StreamUnsealer in a module worker that, like worker/crypto.worker.ts, runs its streams' SHAKE128
 * on a nested hashing worker started from its own script, measured in parts:
 *
 *   aes      WebCrypto AES-GCM alone, n in flight, and how much of each call runs inside the call
 *            (on this thread) rather than after it returned (on the engine's crypto thread)
 *   hash     segments through the nested hashing worker and back, n in flight (SHAKE128 there)
 *   local    sealStream / StreamUnsealer with source and sink in this worker: no relay
 *   echo     the relay alone (worker/port-stream.ts): the page's stream in, straight back out
 *   relay    sealStream / StreamUnsealer over the relay, as the crypto worker runs them, with
 *            AES-GCM and the hashing round trips timed
 *
 * Only for the benchmark. Errors are not coded.
 */

declare const self: DedicatedWorkerGlobalScope;

export interface PhaseKeys {
  mpk: string;
  vk: string;
  rid: string;
  usk: string;
  options: SealOptions;
}

export type PhaseRequest =
  | { op: 'init' }
  | { op: 'aes'; direction: 'encrypt' | 'decrypt'; inFlight: number; segments: number }
  | { op: 'hash'; inFlight: number; segments: number }
  | { op: 'shake'; segments: number }
  | { op: 'prepare'; keys: PhaseKeys; bytes: number }
  | { op: 'local'; direction: 'seal' | 'unseal'; keys: PhaseKeys; bytes: number }
  | { op: 'echo'; input: MessagePort; output: MessagePort; variant: Variant }
  | {
      op: 'relay';
      direction: 'seal' | 'unseal';
      keys: PhaseKeys;
      input: MessagePort;
      output: MessagePort;
      variant: Variant;
    };

/** What an A/B variant changes (unset: the product's setting). */
export interface Variant {
  /** The window this worker grants the page's sender (portToReadable). */
  windowBytes?: number;
  /** The page's batches (readableToPort). */
  batchBytes?: number;
  /** The window the page grants this worker's output (writableToPort). */
  outWindowBytes?: number;
  /** Segments in flight (the hasher's inFlight). */
  depth?: number;
}

/** Time accounted to one kind of wait, over a run. */
export interface Tally {
  calls: number;
  /** Inside the call, on this thread. */
  syncMs: number;
  /** From the call to its settling (includes the above). */
  latencyMs: number;
}

export interface PhaseRun {
  ms: number;
  bytes: number;
  aes?: Tally;
  hash?: Tally;
}

const tally = (): Tally => ({ calls: 0, syncMs: 0, latencyMs: 0 });

// ---- instrumentation: AES-GCM calls and hashing round trips, counted while `recording` ----

let aesTally: Tally | undefined;
let depth: number | undefined;
let hashTally: Tally | undefined;

const subtle = globalThis.crypto.subtle;
for (const op of ['encrypt', 'decrypt'] as const) {
  const original = subtle[op].bind(subtle);
  subtle[op] = ((algorithm: AesGcmParams, key: CryptoKey, data: BufferSource) => {
    const t = aesTally;
    if (t === undefined) return original(algorithm, key, data);
    const start = performance.now();
    const promise = original(algorithm, key, data);
    t.calls++;
    t.syncMs += performance.now() - start;
    const settle = () => (t.latencyMs += performance.now() - start);
    promise.then(settle, settle);
    return promise;
  }) as SubtleCrypto['encrypt'];
}

const open = RemoteHashing.prototype.open;
RemoteHashing.prototype.open = function (this: RemoteHashing, absorbed: Uint8Array) {
  const hasher = open.call(this, absorbed);
  if (depth !== undefined) {
    const d = depth;
    Object.defineProperty(hasher, 'inFlight', { value: () => d });
  }
  const absorb = hasher.absorbAndFork.bind(hasher);
  hasher.absorbAndFork = (buffer, start, end, tails) => {
    const t = hashTally;
    if (t === undefined) return absorb(buffer, start, end, tails);
    const begin = performance.now();
    const answer = absorb(buffer, start, end, tails);
    t.calls++;
    t.syncMs += performance.now() - begin;
    const settle = () => (t.latencyMs += performance.now() - begin);
    Promise.resolve(answer).then(settle, settle);
    return answer;
  };
  return hasher;
};

async function timed(work: () => Promise<number>): Promise<PhaseRun> {
  aesTally = tally();
  hashTally = tally();
  const start = performance.now();
  try {
    const bytes = await work();
    const ms = performance.now() - start;
    return { ms, bytes, aes: aesTally, hash: hashTally };
  } finally {
    aesTally = undefined;
    hashTally = undefined;
  }
}

// ---- the parts ----

async function aes(direction: 'encrypt' | 'decrypt', inFlight: number, segments: number): Promise<PhaseRun> {
  const key = await subtle.importKey('raw', new Uint8Array(16), 'AES-GCM', false, ['encrypt', 'decrypt']);
  const iv = new Uint8Array(12);
  const inputs: Uint8Array<ArrayBuffer>[] = [];
  for (let i = 0; i < 32; i++) {
    const plain = new Uint8Array(SEGMENT_PLAIN_BYTES).map((_, j) => (i + j) & 255);
    inputs.push(
      direction === 'encrypt' ? plain : new Uint8Array(await subtle.encrypt({ name: 'AES-GCM', iv }, key, plain)),
    );
  }
  const run = async (n: number) => {
    const queue: Promise<ArrayBuffer>[] = [];
    for (let i = 0; i < n; i++) {
      queue.push(subtle[direction]({ name: 'AES-GCM', iv }, key, inputs[i % 32]!));
      if (queue.length >= inFlight) await queue.shift();
    }
    await Promise.all(queue);
    return n * inputs[0]!.length;
  };
  await run(16);
  return timed(() => run(segments));
}

async function hash(inFlight: number, segments: number): Promise<PhaseRun> {
  const hashing = hashWorker();
  if (hashing === undefined) throw new Error('no hashing worker');
  const run = async (n: number) => {
    const hasher = hashing.open(new Uint8Array(32));
    const spares: Uint8Array[] = [];
    const queue: Promise<unknown>[] = [];
    const tail = new Uint8Array(40);
    for (let i = 0; i < n; i++) {
      const buffer = spares.pop() ?? new Uint8Array(SEGMENT_PLAIN_BYTES);
      queue.push(
        Promise.resolve(hasher.absorbAndFork(buffer, 0, SEGMENT_PLAIN_BYTES - 96, [tail])).then((f) =>
          spares.push(f.buffer),
        ),
      );
      if (queue.length >= inFlight) await queue.shift();
    }
    await Promise.all(queue);
    hasher.close();
    return n * (SEGMENT_PLAIN_BYTES - 96);
  };
  await run(16);
  return timed(() => run(segments));
}

/** SHAKE128 on this thread, as the hashing worker runs it: 256 KiB absorbed, forked and squeezed per segment. */
async function shake(segments: number): Promise<PhaseRun> {
  const create = await loadShake128();
  const segment = new Uint8Array(SEGMENT_PLAIN_BYTES - 96).map((_, i) => (i * 7) & 255);
  const tail = new Uint8Array(40);
  const run = async (n: number) => {
    const x = create();
    for (let i = 0; i < n; i++) {
      x.update(segment);
      x.clone().update(tail).digest(64);
    }
    return n * segment.length;
  };
  await run(16);
  return timed(() => run(segments));
}

let sealed: Uint8Array[] = [];
let plainChecksum = '';

async function prepare(keys: PhaseKeys, bytes: number): Promise<string> {
  const sum = new SampledChecksum();
  const kept: Uint8Array[] = [];
  const sink = countingSink(kept);
  await sealStream(keys.mpk, keys.options, generated(bytes, sum), sink.writable);
  await sink.closed;
  sealed = kept;
  plainChecksum = sum.value;
  return sum.value;
}

async function local(direction: 'seal' | 'unseal', keys: PhaseKeys, bytes: number): Promise<PhaseRun> {
  return timed(async () => {
    const sink = countingSink();
    if (direction === 'seal') {
      await sealStream(keys.mpk, keys.options, generated(bytes), sink.writable);
    } else {
      const unsealer = await StreamUnsealer.new(fromChunks(sealed), keys.vk);
      await unsealer.unseal(keys.rid, keys.usk, sink.writable);
      if (sink.report().checksum !== plainChecksum) throw new Error('unsealed the wrong bytes');
    }
    await sink.closed;
    return sink.report().bytes;
  });
}

async function echo(input: MessagePort, output: MessagePort, variant: Variant): Promise<PhaseRun> {
  return timed(async () => {
    let bytes = 0;
    const count = new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        bytes += chunk.byteLength;
        controller.enqueue(chunk);
      },
    });
    await portToReadable(input, { windowBytes: variant.windowBytes }).pipeThrough(count).pipeTo(portToWritable(output));
    return bytes;
  });
}

async function relay(
  direction: 'seal' | 'unseal',
  keys: PhaseKeys,
  input: MessagePort,
  output: MessagePort,
  variant: Variant,
): Promise<PhaseRun> {
  depth = variant.depth;
  return timed(async () => {
    const readable = portToReadable<Uint8Array>(input, { windowBytes: variant.windowBytes });
    const writable = portToWritable(output);
    if (direction === 'seal') {
      spendChunksOnRead(readable);
      await sealStream(keys.mpk, keys.options, readable, writable);
    } else {
      const unsealer = await StreamUnsealer.new(readable, keys.vk);
      await unsealer.unseal(keys.rid, keys.usk, writable);
    }
    return 0;
  }).finally(() => (depth = undefined));
}

async function handle(request: PhaseRequest): Promise<unknown> {
  switch (request.op) {
    case 'init': {
      await loadShake128();
      return startHashWorker(() => new Worker(self.location.href, { type: 'module', name: HASH_WORKER_NAME }));
    }
    case 'aes':
      return aes(request.direction, request.inFlight, request.segments);
    case 'hash':
      return hash(request.inFlight, request.segments);
    case 'shake':
      return shake(request.segments);
    case 'prepare':
      return prepare(request.keys, request.bytes);
    case 'local':
      return local(request.direction, request.keys, request.bytes);
    case 'echo':
      return echo(request.input, request.output, request.variant);
    case 'relay':
      return relay(request.direction, request.keys, request.input, request.output, request.variant);
  }
}

if (self.name === HASH_WORKER_NAME) {
  void loadShake128().then((createShake) => serveHashing(self, createShake));
} else {
  self.onmessage = (event: MessageEvent<{ id: number; request: PhaseRequest }>) => {
    const { id, request } = event.data;
    handle(request).then(
      (value) => self.postMessage({ id, ok: true, value } satisfies BenchReply),
      (error: unknown) =>
        self.postMessage({ id, ok: false, error: String((error as Error)?.stack ?? error) } satisfies BenchReply),
    );
  };
}
