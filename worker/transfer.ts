import { transferHandlers, type TransferHandler } from 'comlink';
import { encodeError, reviveError } from './errors.js';
import { portToReadable, portToWritable, readableToPort, writableToPort } from './port-stream.js';

/**
 * comlink transfer handlers, installed on both sides of every channel (page, crypto worker):
 *
 * - 'throw' (comlink's own, replaced): errors cross as WireErrors and are rebuilt with their class
 *   and `code` (PostGuardError, PkgClientError), instead of comlink's bare Error.
 * - 'pg-readable' / 'pg-writable': a ReadableStream or WritableStream argument (or return value)
 *   is transferred, not copied: the stream moves to the other realm and its chunks flow there
 *   directly. Where streams are not transferable (WebKit) it is served over a MessagePort instead
 *   (port-stream.ts). Either way errors and abort/cancel reasons keep their code: each side puts a
 *   thin relay in front of the stream that encodes what leaves and revives what arrives.
 */

export type StreamTransport = 'transfer' | 'port';

let detected: boolean | undefined;

/** Whether this realm can postMessage-transfer ReadableStream and WritableStream. */
export function canTransferStreams(): boolean {
  if (detected === undefined) {
    const { port1, port2 } = new MessageChannel();
    try {
      const readable = new ReadableStream();
      const writable = new WritableStream();
      port1.postMessage([readable, writable], [readable, writable] as unknown as Transferable[]);
      detected = true;
    } catch {
      detected = false;
    } finally {
      port1.close();
      port2.close();
    }
  }
  return detected;
}

let forced: StreamTransport | undefined;

/** Forces one transport (tests, or an app that knows better); undefined goes back to detection. */
export function setStreamTransport(transport: StreamTransport | undefined): void {
  forced = transport;
}

export const streamTransport = (): StreamTransport => forced ?? (canTransferStreams() ? 'transfer' : 'port');

type MapError = (error: unknown) => unknown;

/** A readable that reads `inner`, passing its errors through `mapError` and cancel reasons through `mapReason`. */
function relayReadable<T>(inner: ReadableStream<T>, mapError: MapError, mapReason: MapError): ReadableStream<T> {
  const reader = inner.getReader();
  return new ReadableStream<T>(
    {
      async pull(controller) {
        let result: ReadableStreamReadResult<T>;
        try {
          result = await reader.read();
        } catch (error) {
          controller.error(mapError(error));
          return;
        }
        if (result.done) controller.close();
        else controller.enqueue(result.value);
      },
      cancel: (reason) => reader.cancel(mapReason(reason)).catch(() => undefined),
    },
    { highWaterMark: 0 },
  );
}

/**
 * A writable that writes to `inner`, passing its errors through `mapError` and abort reasons
 * through `mapReason`. Writes are pipelined as far as `inner` lets them (its `ready`); a failed
 * write is reported by the next write or by close, as any writer would see it.
 */
function relayWritable<T>(inner: WritableStream<T>, mapError: MapError, mapReason: MapError): WritableStream<T> {
  return relayWritableSettled(inner, mapError, mapReason).stream;
}

/** relayWritable, and when `inner` ended: resolves once it is closed, rejects once it failed or was aborted. */
function relayWritableSettled<T>(
  inner: WritableStream<T>,
  mapError: MapError,
  mapReason: MapError,
): { stream: WritableStream<T>; settled: Promise<void> } {
  const writer = inner.getWriter();
  const settled = writer.closed;
  settled.catch(() => undefined);
  const mapped = async (step: () => Promise<void>) => {
    try {
      await step();
    } catch (error) {
      throw mapError(error);
    }
  };
  const stream = new WritableStream<T>({
    write: (chunk) =>
      mapped(async () => {
        await writer.ready;
        writer.write(chunk).catch(() => undefined);
      }),
    close: () => mapped(() => writer.close()),
    abort: (reason) => writer.abort(mapReason(reason)).catch(() => undefined),
  });
  return { stream, settled };
}

/**
 * Sent writables, by the caller's stream: when each one ended on this side. Over a transfer, the
 * other realm's close() resolves when its message is sent, before this side's sink has closed;
 * a call that hands a writable over awaits this to keep "resolved means the sink is closed".
 */
const settlements = new WeakMap<WritableStream<unknown>, Promise<void>>();

/** When a writable that was sent to another realm ended here (undefined if it was never sent). */
export const sentWritableSettled = (writable: WritableStream<unknown>): Promise<void> | undefined => settlements.get(writable);

type WireStream<S> = { via: 'transfer'; stream: S } | { via: 'port'; port: MessagePort };

const readableHandler: TransferHandler<ReadableStream<unknown>, WireStream<ReadableStream<unknown>>> = {
  canHandle: (value): value is ReadableStream<unknown> => typeof ReadableStream !== 'undefined' && value instanceof ReadableStream,
  serialize(stream) {
    if (streamTransport() === 'port') {
      const port = readableToPort(stream);
      return [{ via: 'port', port }, [port]];
    }
    const relay = relayReadable(stream, encodeError, reviveError);
    return [{ via: 'transfer', stream: relay }, [relay as unknown as Transferable]];
  },
  deserialize: (wire) =>
    wire.via === 'port' ? portToReadable(wire.port) : relayReadable(wire.stream, reviveError, encodeError),
};

const writableHandler: TransferHandler<WritableStream<unknown>, WireStream<WritableStream<unknown>>> = {
  canHandle: (value): value is WritableStream<unknown> => typeof WritableStream !== 'undefined' && value instanceof WritableStream,
  serialize(stream) {
    if (streamTransport() === 'port') {
      const { port, settled } = writableToPort(stream);
      settlements.set(stream, settled);
      return [{ via: 'port', port }, [port]];
    }
    const relay = relayWritableSettled(stream, encodeError, reviveError);
    settlements.set(stream, relay.settled);
    return [{ via: 'transfer', stream: relay.stream }, [relay.stream as unknown as Transferable]];
  },
  deserialize: (wire) =>
    wire.via === 'port' ? portToWritable(wire.port) : relayWritable(wire.stream, reviveError, encodeError),
};

let installed = false;

/** Installs the handlers in this realm's comlink (idempotent; importing client or worker does it). */
export function installTransferHandlers(): void {
  if (installed) return;
  installed = true;
  const comlinkThrow = transferHandlers.get('throw');
  if (comlinkThrow === undefined) throw new Error('comlink has no "throw" transfer handler to replace');
  transferHandlers.set('throw', {
    canHandle: comlinkThrow.canHandle,
    serialize: (thrown: unknown) => [encodeError((thrown as { value: unknown }).value), []],
    deserialize: (wire: unknown) => {
      throw reviveError(wire);
    },
  } as TransferHandler<unknown, unknown>);
  transferHandlers.set('pg-readable', readableHandler as TransferHandler<unknown, unknown>);
  transferHandlers.set('pg-writable', writableHandler as TransferHandler<unknown, unknown>);
}

installTransferHandlers();
