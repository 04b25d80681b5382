/**
 * A prototype of the plumbing change this benchmark proposes (it is not used by the product): a
 * stream relayed over a MessagePort with a credit window, so several chunks are in flight at once
 * instead of one round trip per chunk (Chromium's transferred streams, worker/port-stream.ts).
 * How a chunk crosses (`mode`): 'clone' (structured clone: a copy made on each side), 'copy' (the
 * sender copies it into a fresh buffer and transfers that: one copy, on the sending thread, which is
 * safe for any source), or 'transfer' (the chunk's own buffer is moved, views keep their offset: only
 * for writers that promise never to touch a written buffer again, as lib/'s segment output can),
 * or 'own' (transfer a chunk that spans its whole buffer, i.e. one made for this write, copy any
 * other view: for a writer such as pg-wasm whose chunks are fresh arrays, never views into its memory).
 * Errors travel as strings: enough for a benchmark, not for the product (which keeps codes).
 */

type Data = { t: 'chunk'; chunk: Uint8Array } | { t: 'done' } | { t: 'error'; message: string };
type Credit = { t: 'credit'; bytes: number } | { t: 'cancel'; message: string };

export type RelayMode = 'clone' | 'copy' | 'transfer' | 'own';

export interface RelayOptions {
  /** Bytes that may be sent but not yet consumed (default 1 MiB). */
  windowBytes?: number;
  /** Default 'clone'. */
  mode?: RelayMode;
  /** With mode 'copy': gather small chunks into buffers of this size (see sendReadable). */
  coalesceBytes?: number;
}

const DEFAULT_WINDOW = 1024 * 1024;

function post(port: MessagePort, chunk: Uint8Array, mode: RelayMode = 'clone'): void {
  if (mode === 'clone') {
    port.postMessage({ t: 'chunk', chunk } satisfies Data);
    return;
  }
  const whole = chunk.byteOffset === 0 && chunk.byteLength === chunk.buffer.byteLength;
  const own = mode === 'copy' || (mode === 'own' && !whole) ? chunk.slice() : chunk;
  port.postMessage({ t: 'chunk', chunk: own } satisfies Data, [own.buffer as ArrayBuffer]);
}

/**
 * Sends what `readable` yields over `port`, staying at most a window ahead of the receiver. With
 * `coalesceBytes` (mode 'copy' only), small chunks are copied into one buffer of up to that size
 * before they are sent, so the copy that makes a chunk transferable also cuts the message count;
 * a partial buffer is sent at once whenever the receiver has nothing left (it never waits for more
 * input while the other side starves).
 */
export function sendReadable(
  readable: ReadableStream<Uint8Array>,
  port: MessagePort,
  options: RelayOptions = {},
): Promise<void> {
  const windowBytes = options.windowBytes ?? DEFAULT_WINDOW;
  const coalesce = options.mode === 'copy' ? (options.coalesceBytes ?? 0) : 0;
  const reader = readable.getReader();
  let inFlight = 0;
  let wake: (() => void) | undefined;
  let cancelled = false;
  let batch: Uint8Array | undefined;
  let batchFill = 0;
  const flush = () => {
    if (!batch || batchFill === 0) return;
    const out = batchFill === batch.length ? batch : batch.slice(0, batchFill);
    inFlight += out.length;
    port.postMessage({ t: 'chunk', chunk: out } satisfies Data, [out.buffer as ArrayBuffer]);
    batch = undefined;
    batchFill = 0;
  };
  port.onmessage = ({ data }: MessageEvent<Credit>) => {
    if (data.t === 'credit') {
      inFlight -= data.bytes;
      if (inFlight === 0) flush();
    } else {
      cancelled = true;
      void reader.cancel(new Error(data.message)).catch(() => undefined);
    }
    wake?.();
    wake = undefined;
  };
  const append = (chunk: Uint8Array) => {
    let offset = 0;
    while (offset < chunk.length) {
      batch ??= new Uint8Array(coalesce);
      const take = Math.min(coalesce - batchFill, chunk.length - offset);
      batch.set(chunk.subarray(offset, offset + take), batchFill);
      batchFill += take;
      offset += take;
      if (batchFill === coalesce) flush();
    }
    if (inFlight === 0) flush();
  };
  return (async () => {
    try {
      for (;;) {
        while (inFlight >= windowBytes && !cancelled) await new Promise<void>((resolve) => (wake = resolve));
        if (cancelled) return;
        const { done, value } = await reader.read();
        if (done) break;
        if (coalesce > 0) append(value);
        else {
          inFlight += value.byteLength;
          post(port, value, options.mode);
        }
      }
      flush();
      port.postMessage({ t: 'done' } satisfies Data);
    } catch (error) {
      port.postMessage({ t: 'error', message: String(error) } satisfies Data);
    }
  })();
}

/** The receiving end of sendReadable: credit goes back as the consumer takes each chunk. */
export function receiveReadable(port: MessagePort): ReadableStream<Uint8Array> {
  const queue: Data[] = [];
  let wake: (() => void) | undefined;
  port.onmessage = ({ data }: MessageEvent<Data>) => {
    queue.push(data);
    wake?.();
    wake = undefined;
  };
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        while (queue.length === 0) await new Promise<void>((resolve) => (wake = resolve));
        const next = queue.shift()!;
        if (next.t === 'chunk') {
          controller.enqueue(next.chunk);
          port.postMessage({ t: 'credit', bytes: next.chunk.byteLength } satisfies Credit);
        } else if (next.t === 'done') {
          controller.close();
          port.close();
        } else {
          controller.error(new Error(next.message));
          port.close();
        }
      },
      cancel(reason) {
        port.postMessage({ t: 'cancel', message: String(reason) } satisfies Credit);
        port.close();
      },
    },
    { highWaterMark: 0 },
  );
}

/** A writable whose chunks go over `port` to receiveWritable, at most a window ahead of that sink. */
export function sendWritable(port: MessagePort, options: RelayOptions = {}): WritableStream<Uint8Array> {
  const windowBytes = options.windowBytes ?? DEFAULT_WINDOW;
  let inFlight = 0;
  let wake: (() => void) | undefined;
  let closed: (() => void) | undefined;
  let failure: Error | undefined;
  port.onmessage = ({ data }: MessageEvent<Credit | { t: 'closed' }>) => {
    if (data.t === 'credit') inFlight -= data.bytes;
    else if (data.t === 'closed') closed?.();
    else failure = new Error(data.message);
    wake?.();
    wake = undefined;
  };
  const room = async () => {
    while (inFlight >= windowBytes && !failure) await new Promise<void>((resolve) => (wake = resolve));
    if (failure) throw failure;
  };
  return new WritableStream<Uint8Array>({
    async write(chunk) {
      await room();
      inFlight += chunk.byteLength;
      post(port, chunk, options.mode);
    },
    async close() {
      const done = new Promise<void>((resolve) => (closed = resolve));
      port.postMessage({ t: 'done' } satisfies Data);
      await done;
      port.close();
    },
    abort(reason) {
      port.postMessage({ t: 'error', message: String(reason) } satisfies Data);
      port.close();
    },
  });
}

/** Writes what arrives on `port` into `writable`, in order, crediting each chunk once written. */
export function receiveWritable(port: MessagePort, writable: WritableStream<Uint8Array>): Promise<void> {
  const writer = writable.getWriter();
  let chain = Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    port.onmessage = ({ data }: MessageEvent<Data>) => {
      chain = chain.then(async () => {
        try {
          if (data.t === 'chunk') {
            await writer.write(data.chunk);
            port.postMessage({ t: 'credit', bytes: data.chunk.byteLength } satisfies Credit);
          } else if (data.t === 'done') {
            await writer.close();
            port.postMessage({ t: 'closed' });
            port.close();
            resolve();
          } else {
            await writer.abort(new Error(data.message));
            port.close();
            reject(new Error(data.message));
          }
        } catch (error) {
          port.postMessage({ t: 'cancel', message: String(error) } satisfies Credit);
          port.close();
          reject(error as Error);
        }
      });
    };
  });
}
