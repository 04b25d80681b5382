/// <reference lib="webworker" />
import { expose, transferHandlers, type TransferHandler } from 'comlink';
import { loadShake128 } from '#shake';
import { encodeError, reviveError } from '../../worker/errors.js';
import { cryptoWorkerApi } from '../../worker/worker-api.js';
import '../../worker/transfer.js';

/**
 * The product's crypto worker (worker/crypto.worker.ts) with one change, to measure it: the
 * streams it receives are buffered on its side. The readable reads ahead (up to READ_AHEAD bytes)
 * and the writable accepts writes behind (up to WRITE_BEHIND bytes), so the one-chunk-per-round-trip
 * exchange of a transferred stream overlaps the crypto instead of stalling it. The page side is
 * untouched: PostGuardWorker({worker}) drives this worker as it drives the real one.
 */

const READ_AHEAD = 1024 * 1024;
const WRITE_BEHIND = READ_AHEAD;
const bytes = { size: (chunk: Uint8Array) => chunk.byteLength };

function aheadReadable(inner: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  const reader = inner.getReader();
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        let result: ReadableStreamReadResult<Uint8Array>;
        try {
          result = await reader.read();
        } catch (error) {
          controller.error(reviveError(error));
          return;
        }
        if (result.done) controller.close();
        else controller.enqueue(result.value);
      },
      cancel: (reason) => reader.cancel(encodeError(reason)).catch(() => undefined),
    },
    { highWaterMark: READ_AHEAD, ...bytes },
  );
}

function behindWritable(inner: WritableStream<Uint8Array>): WritableStream<Uint8Array> {
  const writer = inner.getWriter();
  const mapped = async (step: () => Promise<void>) => {
    try {
      await step();
    } catch (error) {
      throw reviveError(error);
    }
  };
  return new WritableStream<Uint8Array>(
    {
      write: (chunk) =>
        mapped(async () => {
          await writer.ready;
          writer.write(chunk).catch(() => undefined);
        }),
      close: () => mapped(() => writer.close()),
      abort: (reason) => writer.abort(encodeError(reason)).catch(() => undefined),
    },
    { highWaterMark: WRITE_BEHIND, ...bytes },
  );
}

type Wire<S> = { via: 'transfer'; stream: S } | { via: 'port'; port: MessagePort };

// Same wire format as worker/transfer.ts; only what this side builds from a received stream differs.
const readable = transferHandlers.get('pg-readable') as TransferHandler<
  ReadableStream<Uint8Array>,
  Wire<ReadableStream<Uint8Array>>
>;
const writable = transferHandlers.get('pg-writable') as TransferHandler<
  WritableStream<Uint8Array>,
  Wire<WritableStream<Uint8Array>>
>;
const aheadHandler: TransferHandler<ReadableStream<Uint8Array>, Wire<ReadableStream<Uint8Array>>> = {
  ...readable,
  deserialize: (wire) => (wire.via === 'transfer' ? aheadReadable(wire.stream) : readable.deserialize(wire)),
};
const behindHandler: TransferHandler<WritableStream<Uint8Array>, Wire<WritableStream<Uint8Array>>> = {
  ...writable,
  deserialize: (wire) => (wire.via === 'transfer' ? behindWritable(wire.stream) : writable.deserialize(wire)),
};
transferHandlers.set('pg-readable', aheadHandler as TransferHandler<unknown, unknown>);
transferHandlers.set('pg-writable', behindHandler as TransferHandler<unknown, unknown>);

void loadShake128();
expose(cryptoWorkerApi());
