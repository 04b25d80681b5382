/// <reference lib="webworker" />
import { loadShake128 } from '#shake';
import { StreamUnsealer, sealStream } from '../../lib/index.js';
import type { SealOptions } from '../../lib/seal.js';
import type { BenchReply } from './bench.worker.js';
import { offloadAesGcm } from './aes-offload.js';
import { receiveReadable, sendWritable, type RelayOptions } from './relay.js';

/**
 * The proposed plumbing, measured: postguard-ts's sealStream / StreamUnsealer in a module worker
 * like the product's crypto worker, but with its streams relayed by relay.ts (a credit window over
 * a MessagePort) instead of transferred; optionally with AES-GCM on a helper thread. Only for the
 * benchmark: errors are not coded.
 */

export type RelayRequest =
  /** offloadAes: run AES-GCM in a helper worker (aes-offload.ts) from now on. */
  | { op: 'warm'; offloadAes: boolean }
  | { op: 'unseal'; vk: string; rid: string; usk: string; input: MessagePort; output: MessagePort; relay: RelayOptions }
  | {
      op: 'sealStream';
      mpk: string;
      options: SealOptions;
      input: MessagePort;
      output: MessagePort;
      relay: RelayOptions;
    };

async function handle(request: RelayRequest): Promise<unknown> {
  switch (request.op) {
    case 'warm':
      if (request.offloadAes) {
        offloadAesGcm(new Worker(new URL('./aes.worker.ts', import.meta.url), { type: 'module', name: 'bench-aes' }));
      }
      await loadShake128();
      return undefined;
    case 'unseal': {
      const start = performance.now();
      const unsealer = await StreamUnsealer.new(receiveReadable(request.input), request.vk);
      const newMs = performance.now() - start;
      await unsealer.unseal(request.rid, request.usk, sendWritable(request.output, request.relay));
      return { newMs };
    }
    case 'sealStream':
      await sealStream(
        request.mpk,
        request.options,
        receiveReadable(request.input),
        sendWritable(request.output, request.relay),
      );
      return undefined;
  }
}

self.onmessage = (event: MessageEvent<{ id: number; request: RelayRequest }>) => {
  const { id, request } = event.data;
  handle(request).then(
    (value) => self.postMessage({ id, ok: true, value } satisfies BenchReply),
    (error: unknown) =>
      self.postMessage({ id, ok: false, error: String((error as Error)?.stack ?? error) } satisfies BenchReply),
  );
};
