import { encodeError, reviveError } from './errors.js';

/**
 * Streams over a MessagePort, for browsers that cannot transfer streams (Safari/WebKit as of 2026;
 * Chromium since 87 and Firefox since 103 can). One side keeps the real stream and answers on the
 * port; the other side gets a stream of its own that forwards to it. Flow control is explicit: a
 * readable is pulled one chunk at a time, and every write waits for the owner's acknowledgement,
 * so neither side buffers more than a chunk. Errors travel encoded (worker/errors.ts) and keep
 * their class and code.
 */

type ToReadableOwner = { t: 'pull' } | { t: 'cancel'; reason: unknown };
type FromReadableOwner = { t: 'chunk'; chunk: unknown } | { t: 'done' } | { t: 'error'; error: unknown };
type ToWritableOwner = { t: 'write'; chunk: unknown } | { t: 'close' } | { t: 'abort'; reason: unknown };
type FromWritableOwner = { t: 'ack' } | { t: 'error'; error: unknown };

/** Serves `readable` on a port; hand the returned port to the other side's `portToReadable`. */
export function readableToPort(readable: ReadableStream<unknown>): MessagePort {
  const { port1, port2 } = new MessageChannel();
  const reader = readable.getReader();
  let finished = false;
  const finish = (message?: FromReadableOwner) => {
    finished = true;
    if (message) port1.postMessage(message);
    port1.close();
  };
  port1.onmessage = async ({ data }: MessageEvent<ToReadableOwner>) => {
    if (finished) return;
    if (data.t === 'cancel') {
      finished = true;
      port1.close();
      await reader.cancel(reviveError(data.reason)).catch(() => undefined);
      return;
    }
    try {
      const { done, value } = await reader.read();
      if (done) finish({ t: 'done' });
      else port1.postMessage({ t: 'chunk', chunk: value } satisfies FromReadableOwner);
    } catch (error) {
      // A read failure, or a chunk structured clone cannot carry (DataCloneError).
      finish({ t: 'error', error: encodeError(error) });
      await reader.cancel(error).catch(() => undefined);
    }
  };
  return port2;
}

/** The readable served on `port` by `readableToPort`. */
export function portToReadable<T = Uint8Array>(port: MessagePort): ReadableStream<T> {
  let delivered: (() => void) | undefined;
  return new ReadableStream<T>(
    {
      start(controller) {
        port.onmessage = ({ data }: MessageEvent<FromReadableOwner>) => {
          if (data.t === 'chunk') controller.enqueue(data.chunk as T);
          else if (data.t === 'done') {
            controller.close();
            port.close();
          } else {
            controller.error(reviveError(data.error));
            port.close();
          }
          const resolve = delivered;
          delivered = undefined;
          resolve?.();
        };
      },
      pull() {
        return new Promise<void>((resolve) => {
          delivered = resolve;
          port.postMessage({ t: 'pull' } satisfies ToReadableOwner);
        });
      },
      cancel(reason) {
        port.postMessage({ t: 'cancel', reason: encodeError(reason) } satisfies ToReadableOwner);
        port.close();
        delivered?.();
      },
    },
    { highWaterMark: 1 },
  );
}

/**
 * Serves `writable` on a port; hand `port` to the other side's `portToWritable`. `settled` resolves
 * once `writable` is closed and rejects once it failed or was aborted.
 */
export function writableToPort(writable: WritableStream<unknown>): { port: MessagePort; settled: Promise<void> } {
  const { port1, port2 } = new MessageChannel();
  const writer = writable.getWriter();
  const settled = writer.closed;
  settled.catch(() => undefined);
  let finished = false;
  // Messages are handled strictly in order, each after the previous one settled.
  let queue = Promise.resolve();
  port1.onmessage = ({ data }: MessageEvent<ToWritableOwner>) => {
    queue = queue.then(async () => {
      if (finished) return;
      try {
        if (data.t === 'write') {
          await writer.write(data.chunk);
          port1.postMessage({ t: 'ack' } satisfies FromWritableOwner);
        } else if (data.t === 'close') {
          finished = true;
          await writer.close();
          port1.postMessage({ t: 'ack' } satisfies FromWritableOwner);
          port1.close();
        } else {
          finished = true;
          port1.close();
          await writer.abort(reviveError(data.reason)).catch(() => undefined);
        }
      } catch (error) {
        finished = true;
        port1.postMessage({ t: 'error', error: encodeError(error) } satisfies FromWritableOwner);
        port1.close();
      }
    });
  };
  return { port: port2, settled };
}

/** A writable that forwards to the one served on `port` by `writableToPort`. */
export function portToWritable<T = Uint8Array>(port: MessagePort): WritableStream<T> {
  let pending: { resolve: () => void; reject: (e: unknown) => void } | undefined;
  let failure: { error: unknown } | undefined;
  port.onmessage = ({ data }: MessageEvent<FromWritableOwner>) => {
    const waiting = pending;
    pending = undefined;
    if (data.t === 'ack') {
      waiting?.resolve();
    } else {
      failure = { error: reviveError(data.error) };
      port.close();
      waiting?.reject(failure.error);
    }
  };
  const send = (message: ToWritableOwner): Promise<void> =>
    new Promise((resolve, reject) => {
      if (failure) return reject(failure.error);
      pending = { resolve, reject };
      port.postMessage(message);
    });
  return new WritableStream<T>({
    write: (chunk) => send({ t: 'write', chunk }),
    close: async () => {
      await send({ t: 'close' });
      port.close();
    },
    abort: (reason) => {
      port.postMessage({ t: 'abort', reason: encodeError(reason) } satisfies ToWritableOwner);
      port.close();
    },
  });
}
