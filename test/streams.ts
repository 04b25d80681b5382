/** Stream helpers for tests: sources with chosen chunking, and collecting sinks. */

export function chunkedSource(bytes: Uint8Array, chunkSize = 65_536): ReadableStream<Uint8Array> {
  let offset = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (offset >= bytes.length) {
        controller.close();
        return;
      }
      const end = Math.min(bytes.length, offset + chunkSize);
      controller.enqueue(bytes.slice(offset, end));
      offset = end;
    },
  });
}

/** A source that yields `bytes` and then errors instead of closing. */
export function failingSource(
  bytes: Uint8Array,
  error: unknown = new Error('disk on fire'),
): ReadableStream<Uint8Array> {
  let sent = false;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (!sent) {
        sent = true;
        controller.enqueue(bytes.slice());
        return;
      }
      controller.error(error);
    },
  });
}

export interface Collector {
  writable: WritableStream<Uint8Array>;
  chunks: Uint8Array[];
  /** How the stream ended: 'open' while running, then 'closed' or 'aborted'. */
  state(): 'open' | 'closed' | 'aborted';
  abortReason(): unknown;
  bytes(): Uint8Array;
}

export function collector(): Collector {
  const chunks: Uint8Array[] = [];
  let state: 'open' | 'closed' | 'aborted' = 'open';
  let reason: unknown;
  const writable = new WritableStream<Uint8Array>({
    write(chunk) {
      chunks.push(chunk.slice());
    },
    close() {
      state = 'closed';
    },
    abort(r) {
      state = 'aborted';
      reason = r;
    },
  });
  return { writable, chunks, state: () => state, abortReason: () => reason, bytes: () => concat(chunks) };
}

export function concat(chunks: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let o = 0;
  for (const c of chunks) {
    out.set(c, o);
    o += c.length;
  }
  return out;
}

export async function readAll(readable: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  const reader = readable.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return concat(chunks);
    chunks.push(value);
  }
}
