import pgInit, { StreamUnsealer as PgStreamUnsealer, sealStream as pgSealStream } from '@e4a/pg-wasm/web';
import { PostGuardWorker } from 'postguard-ts/worker';
import { prepareDownload, registerDecryptingServiceWorker } from 'postguard-ts/sw';
import type { BenchRequest } from './bench.worker.js';
import type { BenchKeys } from './main.js';
import { SampledChecksum, countingSink, fromChunks, generated, rechunk } from './core.js';
import { receiveWritable, sendReadable } from './relay.js';
import { workerClient } from './worker-client.js';
import type { PhaseKeys, PhaseRequest, PhaseRun, Variant } from './phases.worker.js';
import { readableToPort, writableToPort } from '../../worker/port-stream.js';
import { loadKeccakWasm } from '../../lib/crypto/keccak-wasm.js';
import { bestOf, segmentData } from '../shake-core.js';

/**
 * The page that bench/browser-engines.ts drives in Chromium, Firefox ESR and WebKitGTK, through
 * postguard-ts's public browser entries only (postguard-ts/worker, postguard-ts/sw), as an app uses
 * them, so that it keeps measuring the same thing while their insides are rebuilt.
 *
 * stream: our crypto worker (PostGuardWorker) sealing and unsealing beside @e4a/pg-wasm 0.5.10 in
 * a worker of this page (bench.worker.ts: streams transferred where the engine can transfer
 * them, else relayed by relay.ts) and on this thread. Sources and sinks live here for every case.
 *
 * sw: a sealed file (a Blob here) fetched through the decrypting service worker
 * (prepareDownload) beside the same plaintext fetched from a Blob URL; the body is read with a
 * reader and counted, never saved. Exposed as window.benchEngines.
 */

/**
 * ours: the crypto worker. pgwasm-worker: pg-wasm in bench.worker.ts. pgwasm-main: pg-wasm on this
 * thread. ours-ports (--with-ports): the crypto worker with each stream relayed over a MessagePort
 * of its own, as before worker/worker-channel.ts (a PostGuardWorker given the worker as an endpoint).
 */
export type StreamImpl = 'ours' | 'pgwasm-worker' | 'pgwasm-main' | 'ours-ports';
/**
 * blob: the plaintext's Blob URL. sw: through the service worker, its defaults (verifyFirst), the
 * page's crypto worker decrypting. sw-stream: verifyFirst false. The `-self` kinds: the same with
 * `offload: false`, the service worker decrypting on its own thread.
 */
export type DownloadKind = 'blob' | 'sw' | 'sw-stream' | 'sw-self' | 'sw-stream-self';

export interface StreamRun {
  readonly ms: number;
  /** Decrypt: from calling StreamUnsealer.new to the first plaintext byte in this page's sink. */
  readonly ttfbMs: number;
  readonly bytes: number;
  readonly checksum: string;
}

export interface DownloadRun {
  /** From the start (prepareDownload, or fetch for the Blob URL) to the body's end. */
  readonly ms: number;
  /** From the same start to the first body byte read. */
  readonly ttfbMs: number;
  /** prepareDownload alone (0 for the Blob URL). */
  readonly prepareMs: number;
  readonly bytes: number;
  readonly checksum: string;
  readonly status: number;
  /** What the service worker said of its phases (a measurement build's x-sw-timing header), if anything. */
  readonly timing?: string;
}

let keys: BenchKeys;
let ours: PostGuardWorker;
let oursPorts: PostGuardWorker | undefined;
let portsOwner: PostGuardWorker | undefined;
let callWorker: ReturnType<typeof workerClient<BenchRequest>>;
let transferable = false;
const ciphertexts = new Map<'full' | 'warm', Uint8Array[]>();
const WINDOW = 1024 * 1024;

/** Whether this engine can transfer a ReadableStream to a worker (Chromium and Firefox can; not every WebKit). */
function streamsTransfer(): boolean {
  try {
    const stream = new ReadableStream();
    const { port1, port2 } = new MessageChannel();
    port1.postMessage(stream, [stream as unknown as Transferable]);
    port1.close();
    port2.close();
    return true;
  } catch {
    return false;
  }
}

async function init(k: BenchKeys, wasmUrl: string, withPorts = false) {
  keys = k;
  transferable = streamsTransfer();
  ours = new PostGuardWorker();
  if (withPorts) {
    // Kept: comlink releases the worker's API when the PostGuardWorker that started it is collected.
    portsOwner = new PostGuardWorker();
    const worker = portsOwner.worker!;
    oursPorts = new PostGuardWorker({ worker, endpoint: worker });
  }
  callWorker = workerClient<BenchRequest>(
    new Worker(new URL('./bench.worker.ts', import.meta.url), { type: 'module', name: 'bench-pgwasm' }),
  );
  const [shake, ownThread] = await Promise.all([
    ours.shakeBackend(),
    ours.hashesOnOwnThread(),
    callWorker({ op: 'init', wasmUrl }),
    pgInit({ module_or_path: wasmUrl }),
  ]);
  return {
    userAgent: navigator.userAgent,
    shakeBackend: ownThread ? `${shake}, on a hashing worker` : shake,
    pgWasmWorker: transferable ? 'streams transferred' : 'streams relayed (relay.ts: no transferable streams here)',
  };
}

/** The pg-wasm worker's call with the page's streams: transferred, or relayed as relay.ts's batched copy mode. */
function pgWorkerStreams(source: ReadableStream<Uint8Array>, writable: WritableStream<Uint8Array>) {
  if (transferable) {
    return {
      streams: { readable: source, writable },
      transfer: [source as unknown as Transferable, writable as unknown as Transferable],
    };
  }
  const input = new MessageChannel();
  const output = new MessageChannel();
  void sendReadable(source, input.port1, { windowBytes: WINDOW, mode: 'copy', coalesceBytes: 256 * 1024 });
  void receiveWritable(output.port1, writable).catch(() => undefined);
  return {
    ports: { input: input.port2, output: output.port2, relay: { windowBytes: WINDOW, mode: 'own' as const } },
    transfer: [input.port2, output.port2],
  };
}

/** Seals `bytes` of generated plaintext once with our worker, kept here as `chunkBytes` chunks. */
async function prepare(which: 'full' | 'warm', bytes: number, chunkBytes: number) {
  const sum = new SampledChecksum();
  const kept: Uint8Array[] = [];
  const sink = countingSink(kept);
  await ours.sealStream(keys.mpk, keys.options, generated(bytes, sum), sink.writable);
  await sink.closed;
  ciphertexts.set(which, rechunk(kept, chunkBytes));
  return { plainChecksum: sum.value, ciphertextBytes: sink.report().bytes };
}

async function seal(impl: StreamImpl, bytes: number, chunkBytes: number): Promise<StreamRun> {
  const sum = new SampledChecksum();
  const source = generated(bytes, sum, chunkBytes);
  const sink = countingSink();
  const start = performance.now();
  if (impl === 'ours' || impl === 'ours-ports') {
    await (impl === 'ours' ? ours : oursPorts!).sealStream(keys.mpk, keys.options, source, sink.writable);
  } else if (impl === 'pgwasm-main') {
    await pgSealStream(keys.mpk, keys.options as never, source, sink.writable);
  } else {
    const via = pgWorkerStreams(source, sink.writable);
    await callWorker(
      via.streams
        ? { op: 'sealStream', mpk: keys.mpk, options: keys.options, ...via.streams }
        : { op: 'sealRelay', mpk: keys.mpk, options: keys.options, ...via.ports! },
      via.transfer,
    );
  }
  await sink.closed;
  const ms = performance.now() - start;
  // A seal: bytes is the ciphertext's size, checksum the plaintext's (what the source gave); no first byte.
  return { ms, ttfbMs: NaN, bytes: sink.report().bytes, checksum: sum.value };
}

async function decrypt(impl: StreamImpl, which: 'full' | 'warm'): Promise<StreamRun> {
  const chunks = ciphertexts.get(which);
  if (!chunks) throw new Error(`no ${which} ciphertext prepared`);
  const sink = countingSink();
  const source = fromChunks(chunks);
  const start = performance.now();
  if (impl === 'ours' || impl === 'ours-ports') {
    const unsealer = await (impl === 'ours' ? ours : oursPorts!).StreamUnsealer.new(source, keys.vk);
    await unsealer.unseal(keys.rid, keys.usk, sink.writable);
    unsealer.free();
  } else if (impl === 'pgwasm-main') {
    const unsealer = await PgStreamUnsealer.new(source, keys.vk);
    await unsealer.unseal(keys.rid, keys.usk, sink.writable);
  } else {
    const via = pgWorkerStreams(source, sink.writable);
    const ids = { vk: keys.vk, rid: keys.rid, usk: keys.usk };
    await callWorker(
      via.streams ? { op: 'unseal', ...ids, ...via.streams } : { op: 'unsealRelay', ...ids, ...via.ports! },
      via.transfer,
    );
  }
  await sink.closed;
  const ms = performance.now() - start;
  const report = sink.report();
  return { ms, ttfbMs: (report.firstWriteAt ?? NaN) - start, bytes: report.bytes, checksum: report.checksum };
}

function release(): void {
  ciphertexts.clear();
}

// ---- service worker ----

let plainBlob: Blob | undefined;
let sealedBlob: Blob | undefined;
let plainUrl: string | undefined;

/** Registers the decrypting service worker (as an app does) and waits until it controls this page. */
async function registerServiceWorker(): Promise<boolean> {
  await registerDecryptingServiceWorker('/postguard-sw.js');
  return navigator.serviceWorker.controller !== null;
}

/**
 * Makes the download's inputs: `bytes` of generated plaintext as a Blob (and its Blob URL), and
 * the same plaintext sealed by our crypto worker, as a Blob.
 */
async function downloadSetup(bytes: number) {
  downloadRelease();
  const sum = new SampledChecksum();
  const plain: Uint8Array[] = [];
  const reader = generated(bytes, sum).getReader();
  for (let r = await reader.read(); !r.done; r = await reader.read()) plain.push(r.value);
  const kept: Uint8Array[] = [];
  const sink = countingSink(kept);
  await ours.sealStream(keys.mpk, keys.options, fromChunks(plain), sink.writable);
  await sink.closed;
  plainBlob = new Blob(plain as BlobPart[], { type: 'application/octet-stream' });
  sealedBlob = new Blob(kept as BlobPart[], { type: 'application/octet-stream' });
  plainUrl = URL.createObjectURL(plainBlob);
  return { plainChecksum: sum.value, plainBytes: plainBlob.size, sealedBytes: sealedBlob.size };
}

async function download(kind: DownloadKind, filename = 'bench.bin'): Promise<DownloadRun> {
  if (!plainUrl || !sealedBlob) throw new Error('downloadSetup first');
  const start = performance.now();
  let prepareMs = 0;
  let response: Response;
  let done: Promise<unknown> | undefined;
  if (kind === 'blob') {
    response = await fetch(plainUrl);
  } else {
    const prepared = await prepareDownload({
      source: sealedBlob,
      recipientId: keys.rid,
      usk: keys.usk,
      vk: keys.vk,
      filename,
      ...(kind.startsWith('sw-stream') ? { verifyFirst: false } : {}),
      offload: !kind.endsWith('-self'),
    });
    prepareMs = performance.now() - start;
    done = prepared.done;
    response = await prepared.fetch();
  }
  if (!response.ok || response.body === null) throw new Error(`${kind}: HTTP ${response.status}`);
  const sum = new SampledChecksum();
  let firstAt: number | undefined;
  const reader = response.body.getReader();
  for (let r = await reader.read(); !r.done; r = await reader.read()) {
    if (r.value.byteLength > 0) firstAt ??= performance.now();
    sum.update(r.value);
  }
  const ms = performance.now() - start;
  await done;
  return {
    ms,
    ttfbMs: (firstAt ?? NaN) - start,
    prepareMs,
    bytes: sum.bytes,
    checksum: sum.value,
    status: response.status,
    ...(response.headers.get('x-sw-timing') ? { timing: response.headers.get('x-sw-timing')! } : {}),
  };
}

function downloadRelease(): void {
  if (plainUrl) URL.revokeObjectURL(plainUrl);
  plainUrl = undefined;
  plainBlob = undefined;
  sealedBlob = undefined;
}

// ---- the engine's limits ----

/**
 * SHAKE128 over `bytes` on this thread in the fastest form this engine runs (our WebAssembly
 * Keccak; the format's transcript is one hash in order, so no decrypter beats it on one thread),
 * with a fork and a 64-byte digest per 256 KiB segment as the streaming signatures need.
 */
async function shakeLimit(bytes: number, repeats: number): Promise<number> {
  const wasm = await loadKeccakWasm();
  return bestOf('wasm', wasm.createShake128, bytes, repeats, segmentData()).mbPerSecond;
}

let pipeFrame: HTMLIFrameElement | undefined;

/**
 * How the do-nothing service worker makes its body (public/pipe-sw.js says what each is): `pull` is
 * the decrypter's own form, the others what it could answer with instead.
 */
export type PipeForm =
  'pull' | 'push' | 'bytes' | 'byob' | 'transform' | 'blob' | 'blob-parts' | 'blob-stream' | 'buffer' | 'cache';

export interface PipeRun extends DownloadRun {
  /** For a body the service worker builds before it answers (a Blob, a buffer): the building alone. */
  readonly buildMs?: number;
}

/**
 * The service-worker pipe's own ceiling: `bytes` of zeros made by a service worker that does
 * nothing else (public/pipe-sw.js, scope /pipe/) in chunks of `chunk` bytes with `hwm` of them
 * queued, as a body of the form `form`, read in a frame it controls. A decrypting service worker
 * moves its plaintext through the same pipe, so it cannot beat this in the same form.
 */
async function pipeLimit(bytes: number, chunk = 256 * 1024, hwm = 0, form: PipeForm = 'pull'): Promise<PipeRun> {
  if (!pipeFrame) {
    const registration = await navigator.serviceWorker.register('/pipe-sw.js', { scope: '/pipe/' });
    const worker = registration.installing ?? registration.waiting ?? registration.active;
    if (worker && worker.state !== 'activated') {
      await new Promise<void>((resolve) =>
        worker.addEventListener('statechange', () => worker.state === 'activated' && resolve()),
      );
    }
    pipeFrame = document.createElement('iframe');
    pipeFrame.src = '/pipe/index.html';
    document.body.append(pipeFrame);
    await new Promise((resolve) => pipeFrame!.addEventListener('load', resolve, { once: true }));
  }
  type PipeWindow = Window & {
    pipeRun(
      n: number,
      chunk: number,
      hwm: number,
      form: PipeForm,
    ): Promise<DownloadRun & { controlled: boolean; buildMs?: number }>;
  };
  const run = await (pipeFrame.contentWindow as PipeWindow).pipeRun(bytes, chunk, hwm, form);
  if (!run.controlled) throw new Error('the pipe frame is not controlled by its service worker');
  return {
    ms: run.ms,
    ttfbMs: run.ttfbMs,
    prepareMs: 0,
    bytes: run.bytes,
    checksum: '',
    status: 200,
    ...(run.buildMs === undefined ? {} : { buildMs: run.buildMs }),
  };
}

// ---- where the crypto worker's time goes (bench/worker-phases.ts) ----

let callPhases: ReturnType<typeof workerClient<PhaseRequest>> | undefined;

/** Starts phases.worker.ts (with its nested hashing worker); true once that one is up. */
async function phasesInit(): Promise<boolean> {
  callPhases = workerClient<PhaseRequest>(
    new Worker(new URL('./phases.worker.ts', import.meta.url), { type: 'module', name: 'bench-phases' }),
  );
  return callPhases<boolean>({ op: 'init' });
}

type PhaseCall =
  | { op: 'aes'; direction: 'encrypt' | 'decrypt'; inFlight: number; segments: number }
  | { op: 'hash'; inFlight: number; segments: number }
  | { op: 'shake'; segments: number }
  | { op: 'prepare' | 'local-seal' | 'local-unseal'; bytes: number }
  | { op: 'echo' | 'relay-seal'; bytes: number; variant: Variant }
  | { op: 'relay-unseal'; variant: Variant };

/** One measurement in phases.worker.ts; the relayed ones with their source and sink in this page. */
async function phase(call: PhaseCall): Promise<PhaseRun | string> {
  if (!callPhases) throw new Error('phasesInit first');
  const k: PhaseKeys = { mpk: keys.mpk, vk: keys.vk, rid: keys.rid, usk: keys.usk, options: keys.options as never };
  switch (call.op) {
    case 'aes':
    case 'hash':
    case 'shake':
      return callPhases(call);
    case 'prepare':
      return callPhases({ op: 'prepare', keys: k, bytes: call.bytes });
    case 'local-seal':
    case 'local-unseal':
      return callPhases({
        op: 'local',
        direction: call.op === 'local-seal' ? 'seal' : 'unseal',
        keys: k,
        bytes: call.bytes,
      });
  }
  const chunks = ciphertexts.get('full');
  const source = call.op === 'relay-unseal' ? fromChunks(chunks ?? []) : generated(call.bytes);
  const sink = countingSink();
  const { variant } = call;
  const input = readableToPort(source, { batchBytes: variant.batchBytes });
  const { port: output } = writableToPort(sink.writable, { windowBytes: variant.outWindowBytes });
  const start = performance.now();
  const run =
    call.op === 'echo'
      ? await callPhases<PhaseRun>({ op: 'echo', input, output, variant }, [input, output])
      : await callPhases<PhaseRun>(
          { op: 'relay', direction: call.op === 'relay-seal' ? 'seal' : 'unseal', keys: k, input, output, variant },
          [input, output],
        );
  await sink.closed;
  return { ...run, ms: performance.now() - start, bytes: sink.report().bytes };
}

const benchEngines = {
  phasesInit,
  phase,
  shakeLimit,
  pipeLimit,
  init,
  prepare,
  seal,
  decrypt,
  release,
  registerServiceWorker,
  downloadSetup,
  download,
  downloadRelease,
};
export type EnginesBench = typeof benchEngines;
(globalThis as { benchEngines?: EnginesBench }).benchEngines = benchEngines;
