import type { BenchReply } from './bench.worker.js';

/**
 * A request/reply client for the benchmark's own workers (plain postMessage, replies shaped as
 * bench.worker.ts's BenchReply). Shared by the Chromium page (main.ts) and the cross-engine page
 * (engines.ts).
 */
export function workerClient<Request>(worker: Worker) {
  let nextId = 0;
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  worker.onmessage = (event: MessageEvent<BenchReply>) => {
    const reply = event.data;
    const waiter = pending.get(reply.id);
    pending.delete(reply.id);
    if (reply.ok) waiter?.resolve(reply.value);
    else waiter?.reject(new Error(reply.error));
  };
  return <T>(request: Request, transfer: Transferable[] = []): Promise<T> => {
    const id = nextId++;
    return new Promise<T>((resolve, reject) => {
      pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      worker.postMessage({ id, request }, transfer);
    });
  };
}
