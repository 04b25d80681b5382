/// <reference lib="webworker" />
import init, { StreamUnsealer as PgStreamUnsealer, sealStream as pgSealStream } from '@e4a/pg-wasm/web';
import { loadKeccakWasm } from '../../lib/crypto/keccak-wasm.js';
import { allLimits } from './core.js';
import { receiveReadable, sendWritable, type RelayMode, type RelayOptions } from './relay.js';

/**
 * The benchmark's second module worker: @e4a/pg-wasm's streaming calls off the main thread (so it
 * is compared with postguard-ts's crypto worker like for like: streams transferred in, chunks
 * structured-cloned across, the sink in the page), and the format's limits measured in a worker.
 * Plain postMessage with native stream transfer; no comlink, nothing of worker/.
 */

export type BenchRequest =
  | { op: 'init'; wasmUrl: string }
  | { op: 'sealStream'; mpk: string; options: unknown; readable: ReadableStream; writable: WritableStream }
  | { op: 'unseal'; vk: string; rid: string; usk: string; readable: ReadableStream; writable: WritableStream }
  /** The same two calls with the streams relayed by relay.ts (pg-wasm under the proposed plumbing). */
  | {
      op: 'unsealRelay';
      vk: string;
      rid: string;
      usk: string;
      input: MessagePort;
      output: MessagePort;
      relay: RelayOptions;
    }
  | { op: 'sealRelay'; mpk: string; options: unknown; input: MessagePort; output: MessagePort; relay: RelayOptions }
  | { op: 'limits'; segments: number; shakeBytes: number; inFlight: number[]; rounds: number }
  /** Plumbing alone: read a stream from the page to its end, or write `bytes` into one there. */
  | { op: 'drain'; readable: ReadableStream<Uint8Array> }
  | { op: 'drainRelay'; port: MessagePort }
  | { op: 'fill'; writable: WritableStream<Uint8Array>; bytes: number; chunkBytes: number }
  | { op: 'fillRelay'; port: MessagePort; bytes: number; chunkBytes: number; mode: RelayMode };

export type BenchReply = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: string };

async function handle(request: BenchRequest): Promise<unknown> {
  switch (request.op) {
    case 'init':
      await init({ module_or_path: request.wasmUrl });
      return undefined;
    case 'sealStream':
      await pgSealStream(request.mpk, request.options as never, request.readable, request.writable);
      return undefined;
    case 'unseal':
    case 'unsealRelay': {
      const relayed = request.op === 'unsealRelay';
      const start = performance.now();
      const unsealer = await PgStreamUnsealer.new(
        relayed ? receiveReadable(request.input) : request.readable,
        request.vk,
      );
      const newMs = performance.now() - start;
      await unsealer.unseal(
        request.rid,
        request.usk,
        relayed ? sendWritable(request.output, request.relay) : request.writable,
      );
      return { newMs };
    }
    case 'sealRelay':
      await pgSealStream(
        request.mpk,
        request.options as never,
        receiveReadable(request.input),
        sendWritable(request.output, request.relay),
      );
      return undefined;
    case 'limits': {
      const { segments, shakeBytes, inFlight, rounds } = request;
      return allLimits((await loadKeccakWasm()).createShake128, segments, shakeBytes, inFlight, rounds);
    }
    case 'drain': {
      const reader = request.readable.getReader();
      let bytes = 0;
      for (let r = await reader.read(); !r.done; r = await reader.read()) bytes += r.value.byteLength;
      return bytes;
    }
    case 'drainRelay': {
      const reader = receiveReadable(request.port).getReader();
      let bytes = 0;
      for (let r = await reader.read(); !r.done; r = await reader.read()) bytes += r.value.byteLength;
      return bytes;
    }
    case 'fill':
    case 'fillRelay': {
      const writable = request.op === 'fill' ? request.writable : sendWritable(request.port, { mode: request.mode });
      const writer = writable.getWriter();
      // Fresh buffers, as a decrypting pipeline hands out (so a transfer moves a whole buffer).
      for (let sent = 0; sent < request.bytes; sent += request.chunkBytes) {
        await writer.ready;
        void writer.write(new Uint8Array(Math.min(request.chunkBytes, request.bytes - sent))).catch(() => undefined);
      }
      await writer.close();
      return undefined;
    }
  }
}

self.onmessage = (event: MessageEvent<{ id: number; request: BenchRequest }>) => {
  const { id, request } = event.data;
  handle(request).then(
    (value) => self.postMessage({ id, ok: true, value } satisfies BenchReply),
    (error: unknown) =>
      self.postMessage({ id, ok: false, error: String((error as Error)?.stack ?? error) } satisfies BenchReply),
  );
};
