import pgInit, { StreamUnsealer as PgStreamUnsealer, sealStream as pgSealStream } from '@e4a/pg-wasm/web';
import { StreamUnsealer, sealStream } from '../../lib/index.js';
import { loadKeccakWasm } from '../../lib/crypto/keccak-wasm.js';
import { PostGuardWorker } from '../../worker/client.js';
import type { SealOptions } from '../../lib/seal.js';
import type { BenchRequest } from './bench.worker.js';
import type { RelayRequest } from './ours-relay.worker.js';
import { receiveWritable, sendReadable, type RelayMode } from './relay.js';
import { workerClient } from './worker-client.js';
import {
  CHUNK_BYTES,
  SampledChecksum,
  allLimits,
  countingSink,
  fromChunks,
  generated,
  rechunk,
  type LimitRun,
} from './core.js';

/**
 * The page that bench/browser-stream.ts drives. postguard-ts runs in its crypto worker
 * (PostGuardWorker, as the product does) or on this thread (lib/ imported directly);
 * @e4a/pg-wasm runs in bench.worker.ts or on this thread. Sources and sinks always live here,
 * so "worker" runs pay the same thread crossings for both libraries. Exposed as window.bench.
 */

export interface BenchKeys {
  mpk: string;
  vk: string;
  rid: string;
  usk: string;
  options: SealOptions;
}

export type Impl = 'ours' | 'pgwasm';
/**
 * worker: the product's setup (PostGuardWorker over its windowed relay; pg-wasm: bench.worker.ts, streams
 * transferred). Variants of ours, to measure plumbing changes: ahead: PostGuardWorker driving
 * ahead-crypto.worker.ts (the received streams buffered 1 MiB on the worker's side); relay: lib/ in ours-relay.worker.ts behind relay.ts with
 * chunks cloned; relay-copy: the same with input copied here and transferred, output transferred;
 * relay-batch: relay-copy with the input copied into 256 KiB batches; relay-aes: relay-batch with
 * AES-GCM on a helper thread (aes-offload.ts). main: this thread.
 */
export type Where = 'worker' | 'ahead' | 'relay' | 'relay-copy' | 'relay-batch' | 'relay-aes' | 'main';

/** What plumbing alone is timed: page to worker (in) or back (out), by transferred stream or relay.ts (by mode). */
export type Plumbing = 'in-transfer' | `in-relay-${RelayMode}` | 'out-transfer' | `out-relay-${RelayMode}`;

export interface DecryptRun {
  readonly ms: number;
  /** From calling StreamUnsealer.new to the first plaintext byte reaching the sink here. */
  readonly ttfbMs: number;
  /** StreamUnsealer.new alone (pg-wasm in its worker: timed there). */
  readonly newMs: number;
  readonly bytes: number;
  readonly checksum: string;
}

export interface SealRun {
  readonly ms: number;
  readonly plainChecksum: string;
  readonly ciphertextBytes: number;
}

let keys: BenchKeys;
let ours: PostGuardWorker;
/** Ciphertexts to open, as chunks held in this page: 'full' for the timed runs, 'warm' for warm-ups. */
const ciphertexts = new Map<'full' | 'warm', Uint8Array[]>();

let callWorker: ReturnType<typeof workerClient<BenchRequest>>;
let callRelay: ReturnType<typeof workerClient<RelayRequest>>;
let callRelayAes: ReturnType<typeof workerClient<RelayRequest>>;
/** Bytes the relay variants keep in flight each way (init may change it). */
let WINDOW = 1024 * 1024;
let ahead: PostGuardWorker;

async function init(k: BenchKeys, wasmUrl: string, windowBytes = WINDOW) {
  keys = k;
  WINDOW = windowBytes;
  callWorker = workerClient<BenchRequest>(
    new Worker(new URL('./bench.worker.ts', import.meta.url), { type: 'module', name: 'bench-pgwasm' }),
  );
  callRelay = workerClient<RelayRequest>(
    new Worker(new URL('./ours-relay.worker.ts', import.meta.url), { type: 'module', name: 'bench-ours-relay' }),
  );
  callRelayAes = workerClient<RelayRequest>(
    new Worker(new URL('./ours-relay.worker.ts', import.meta.url), { type: 'module', name: 'bench-ours-relay-aes' }),
  );
  ours = new PostGuardWorker();
  ahead = new PostGuardWorker({
    worker: new Worker(new URL('./ahead-crypto.worker.ts', import.meta.url), {
      type: 'module',
      name: 'bench-ours-ahead',
    }),
  });
  const [shake, ownThread] = await Promise.all([
    ours.shakeBackend(),
    // Absent in a --ref commit from before the hashing worker.
    'hashesOnOwnThread' in ours ? ours.hashesOnOwnThread() : false,
    ahead.shakeBackend(),
    callWorker({ op: 'init', wasmUrl }),
    callRelay({ op: 'warm', offloadAes: false }),
    callRelayAes({ op: 'warm', offloadAes: true }),
    pgInit({ module_or_path: wasmUrl }),
  ]);
  return { userAgent: navigator.userAgent, shakeBackend: ownThread ? `${shake}, on a hashing worker` : shake };
}

/**
 * The two ports of the relayed streams: the page keeps port1 of each, the worker gets port2.
 * pg-wasm's output goes 'own' (its chunks are fresh arrays; anything else is copied), ours 'transfer'.
 */
function relayed(
  where: Where,
  source: ReadableStream<Uint8Array>,
  writable: WritableStream<Uint8Array>,
  impl: Impl = 'ours',
) {
  const input = new MessageChannel();
  const output = new MessageChannel();
  const copy = where !== 'relay';
  const coalesceBytes = where === 'relay-batch' || where === 'relay-aes' ? 256 * 1024 : 0;
  void sendReadable(source, input.port1, { windowBytes: WINDOW, mode: copy ? 'copy' : 'clone', coalesceBytes });
  void receiveWritable(output.port1, writable).catch(() => undefined);
  return {
    input: input.port2,
    output: output.port2,
    relay: {
      windowBytes: WINDOW,
      mode: !copy ? ('clone' as const) : impl === 'pgwasm' ? ('own' as const) : ('transfer' as const),
    },
    transfer: [input.port2, output.port2],
  };
}

const worker = (where: Where) => (where === 'ahead' ? ahead : ours);

/** Seals `bytes` of generated plaintext once, with our worker, into `chunkBytes` chunks kept here. */
async function prepare(which: 'full' | 'warm', bytes: number, chunkBytes = CHUNK_BYTES) {
  const sum = new SampledChecksum();
  const kept: Uint8Array[] = [];
  const sink = countingSink(kept);
  await ours.sealStream(keys.mpk, keys.options, generated(bytes, sum), sink.writable);
  await sink.closed;
  ciphertexts.set(which, rechunk(kept, chunkBytes));
  return { plainChecksum: sum.value, ciphertextBytes: sink.report().bytes };
}

async function decrypt(impl: Impl, where: Where, which: 'full' | 'warm'): Promise<DecryptRun> {
  const chunks = ciphertexts.get(which);
  if (!chunks) throw new Error(`no ${which} ciphertext prepared`);
  const sink = countingSink();
  const source = fromChunks(chunks);
  let newMs: number;
  const start = performance.now();
  if (impl === 'pgwasm' && where === 'main') {
    const u = await PgStreamUnsealer.new(source, keys.vk);
    newMs = performance.now() - start;
    await u.unseal(keys.rid, keys.usk, sink.writable);
  } else if (impl === 'pgwasm' && where.startsWith('relay')) {
    const ports = relayed(where, source, sink.writable, impl);
    ({ newMs } = await callWorker<{ newMs: number }>(
      {
        op: 'unsealRelay',
        vk: keys.vk,
        rid: keys.rid,
        usk: keys.usk,
        input: ports.input,
        output: ports.output,
        relay: ports.relay,
      },
      ports.transfer,
    ));
  } else if (impl === 'pgwasm') {
    ({ newMs } = await callWorker<{ newMs: number }>(
      { op: 'unseal', vk: keys.vk, rid: keys.rid, usk: keys.usk, readable: source, writable: sink.writable },
      [source as unknown as Transferable, sink.writable as unknown as Transferable],
    ));
  } else if (where === 'main') {
    const u = await StreamUnsealer.new(source, keys.vk);
    newMs = performance.now() - start;
    await u.unseal(keys.rid, keys.usk, sink.writable);
  } else if (where.startsWith('relay')) {
    const ports = relayed(where, source, sink.writable);
    ({ newMs } = await (where === 'relay-aes' ? callRelayAes : callRelay)<{ newMs: number }>(
      {
        op: 'unseal',
        vk: keys.vk,
        rid: keys.rid,
        usk: keys.usk,
        input: ports.input,
        output: ports.output,
        relay: ports.relay,
      },
      ports.transfer,
    ));
  } else {
    const u = await worker(where).StreamUnsealer.new(source, keys.vk);
    newMs = performance.now() - start;
    await u.unseal(keys.rid, keys.usk, sink.writable);
    u.free();
  }
  await sink.closed;
  const ms = performance.now() - start;
  const report = sink.report();
  return { ms, ttfbMs: (report.firstWriteAt ?? NaN) - start, newMs, bytes: report.bytes, checksum: report.checksum };
}

async function seal(impl: Impl, where: Where, bytes: number, chunkBytes = CHUNK_BYTES): Promise<SealRun> {
  const sum = new SampledChecksum();
  const source = generated(bytes, sum, chunkBytes);
  const sink = countingSink();
  const start = performance.now();
  if (impl === 'pgwasm' && where === 'main') {
    await pgSealStream(keys.mpk, keys.options as never, source, sink.writable);
  } else if (impl === 'pgwasm' && where.startsWith('relay')) {
    const ports = relayed(where, source, sink.writable, impl);
    await callWorker(
      {
        op: 'sealRelay',
        mpk: keys.mpk,
        options: keys.options,
        input: ports.input,
        output: ports.output,
        relay: ports.relay,
      },
      ports.transfer,
    );
  } else if (impl === 'pgwasm') {
    await callWorker(
      { op: 'sealStream', mpk: keys.mpk, options: keys.options, readable: source, writable: sink.writable },
      [source as unknown as Transferable, sink.writable as unknown as Transferable],
    );
  } else if (where === 'main') {
    await sealStream(keys.mpk, keys.options, source, sink.writable);
  } else if (where.startsWith('relay')) {
    const ports = relayed(where, source, sink.writable);
    await (where === 'relay-aes' ? callRelayAes : callRelay)(
      {
        op: 'sealStream',
        mpk: keys.mpk,
        options: keys.options,
        input: ports.input,
        output: ports.output,
        relay: ports.relay,
      },
      ports.transfer,
    );
  } else {
    await worker(where).sealStream(keys.mpk, keys.options, source, sink.writable);
  }
  await sink.closed;
  return { ms: performance.now() - start, plainChecksum: sum.value, ciphertextBytes: sink.report().bytes };
}

/** The format's limits, measured in the bench worker (where the libraries run) or on this thread. */
async function limits(
  where: 'worker' | 'main',
  segments: number,
  shakeBytes: number,
  inFlight: number[],
  rounds: number,
): Promise<LimitRun[]> {
  if (where === 'worker') return callWorker<LimitRun[]>({ op: 'limits', segments, shakeBytes, inFlight, rounds });
  return allLimits((await loadKeccakWasm()).createShake128, segments, shakeBytes, inFlight, rounds);
}

/** Moves `bytes` between this page and the bench worker with no crypto at all; returns ms. */
async function plumbing(kind: Plumbing, bytes: number, chunkBytes: number): Promise<number> {
  const start = performance.now();
  if (kind === 'in-transfer') {
    const source = generated(bytes, undefined, chunkBytes);
    await callWorker({ op: 'drain', readable: source }, [source as unknown as Transferable]);
  } else if (kind.startsWith('in-relay-')) {
    const { port1, port2 } = new MessageChannel();
    const mode = kind.slice('in-relay-'.length) as RelayMode;
    void sendReadable(generated(bytes, undefined, chunkBytes), port1, { windowBytes: WINDOW, mode });
    await callWorker({ op: 'drainRelay', port: port2 }, [port2]);
  } else {
    const sink = countingSink();
    if (kind === 'out-transfer') {
      await callWorker({ op: 'fill', writable: sink.writable, bytes, chunkBytes }, [
        sink.writable as unknown as Transferable,
      ]);
    } else {
      const { port1, port2 } = new MessageChannel();
      void receiveWritable(port1, sink.writable);
      const mode = kind.slice('out-relay-'.length) as RelayMode;
      await callWorker({ op: 'fillRelay', port: port2, bytes, chunkBytes, mode }, [port2]);
    }
    await sink.closed;
    if (sink.report().bytes !== bytes) throw new Error(`${kind}: ${sink.report().bytes} of ${bytes} bytes arrived`);
  }
  return performance.now() - start;
}

/** Drops the held ciphertext (so a later phase does not carry 256 MiB it no longer needs). */
function release(which: 'full' | 'warm') {
  ciphertexts.delete(which);
}

const bench = { init, prepare, decrypt, seal, limits, plumbing, release };
export type Bench = typeof bench;
(globalThis as { bench?: Bench }).bench = bench;
