import { transferHandlers, type TransferHandler } from 'comlink';
import { encodeError, reviveError } from './errors.js';
import {
  portToReadable,
  portToWritable,
  readableToPort,
  serveReadable,
  serveWritable,
  writableToPort,
} from './port-stream.js';
import { relaySettings } from './relay-settings.js';
import { isChannelWire, type ChannelWire, type RelayPort, type WorkerChannel } from './worker-channel.js';

/**
 * comlink transfer handlers, installed on both sides of every channel (page, crypto worker):
 *
 * - 'throw' (comlink's own, replaced): errors cross as WireErrors and are rebuilt with their class
 *   and `code` (PostGuardError, PkgClientError), instead of comlink's bare Error.
 * - 'pg-readable' / 'pg-writable': a ReadableStream or WritableStream argument (or return value)
 *   stays where it is and is relayed over a MessagePort with a credit window (port-stream.ts), in
 *   every browser. The relay is faster than a natively transferred stream (which crosses one
 *   structured-cloned chunk per round trip) and keeps errors, abort and cancel reasons coded. Its
 *   batch and window are the engine's (relay-settings.ts: larger in WebKit).
 *   A call made inside `sendingOn(channel, ...)` (the page's PostGuardWorker) relays its streams
 *   over the worker's own channel instead (worker-channel.ts: a MessagePort is slow in Firefox);
 *   the worker accepts them on the channel it was given with `acceptOn`.
 *
 * Who owns the chunks. A readable handed over is read by the relay, which copies every chunk: the
 * caller's source may reuse its buffers. A writable handed over becomes, on the receiving side,
 * portToWritable, which TRANSFERS the buffer of every chunk written to it. The receiving side is the
 * crypto worker, whose writers are the library's sealStream and StreamUnsealer.unseal, and the rule
 * that makes this safe is theirs: lib/ never touches a buffer after writing it to a WritableStream,
 * and writes each buffer once. sealStream writes the frame (a fresh array from encodeFrame) and then
 * each segment's fresh WebCrypto output; StreamUnsealer writes one subarray of each segment's fresh
 * WebCrypto output (lib/segments.ts SegmentSealer.seal / SegmentOpener.open, written by
 * lib/pump.ts). A change in lib/ that writes a buffer it later reuses, or two views of one buffer,
 * must copy before writing (the second view of a transferred buffer fails with INVALID_STATE rather
 * than arrive empty). The whole buffer moves: for StreamUnsealer that includes, around the plaintext
 * view, the segment's signature and in segment 0 the signer's policy prefix, which the same caller
 * gets in the VerificationResult anyway.
 */

/**
 * Sent writables, by the caller's stream: when each one ended on this side. A call that hands a
 * writable over awaits this to keep "resolved means your sink is closed", and on failure to let
 * the abort reach the sink before the promise rejects.
 */
const settlements = new WeakMap<WritableStream<unknown>, Promise<void>>();

/** When a writable that was sent to another realm ended here (undefined if it was never sent). */
export const sentWritableSettled = (writable: WritableStream<unknown>): Promise<void> | undefined =>
  settlements.get(writable);

/** The channel the call being made now relays its streams over (set by sendingOn for one synchronous call). */
let outbound: WorkerChannel | undefined;
/** The channel this realm accepts relayed streams on (the crypto worker's own, set by acceptOn). */
let inbound: WorkerChannel | undefined;

/**
 * Makes the comlink call `call` with its stream arguments relayed over `channel`. comlink serializes
 * the arguments while the call is being made, before it returns its promise, so the channel is
 * in effect for exactly that call.
 */
export function sendingOn<T>(channel: WorkerChannel | undefined, call: () => T): T {
  outbound = channel;
  try {
    return call();
  } finally {
    outbound = undefined;
  }
}

/** Lets streams relayed over `channel` (this worker's own, from the page's PostGuardWorker) arrive here. */
export function acceptOn(channel: WorkerChannel): void {
  inbound = channel;
}

type StreamWire = MessagePort | ChannelWire;

function arrivingPort(wire: StreamWire): RelayPort {
  if (!isChannelWire(wire)) return wire;
  if (inbound === undefined) throw new Error('a stream was relayed over a worker channel this realm does not accept');
  return inbound.accept(wire.__pgRelay);
}

const readableHandler: TransferHandler<ReadableStream<unknown>, StreamWire> = {
  canHandle: (value): value is ReadableStream<unknown> =>
    typeof ReadableStream !== 'undefined' && value instanceof ReadableStream,
  serialize(stream) {
    const batch = { batchBytes: relaySettings().batchBytes };
    if (outbound !== undefined) {
      const port = outbound.open();
      serveReadable(stream, port, batch);
      return [{ __pgRelay: port.id }, []];
    }
    const port = readableToPort(stream, batch);
    return [port, [port]];
  },
  deserialize: (wire) => portToReadable(arrivingPort(wire), { windowBytes: relaySettings().windowBytes }),
};

const writableHandler: TransferHandler<WritableStream<Uint8Array>, StreamWire> = {
  canHandle: (value): value is WritableStream<Uint8Array> =>
    typeof WritableStream !== 'undefined' && value instanceof WritableStream,
  serialize(stream) {
    const window = { windowBytes: relaySettings().windowBytes };
    if (outbound !== undefined) {
      const port = outbound.open();
      settlements.set(stream, serveWritable(stream, port, window));
      return [{ __pgRelay: port.id }, []];
    }
    const { port, settled } = writableToPort(stream, window);
    settlements.set(stream, settled);
    return [port, [port]];
  },
  deserialize: (wire) => portToWritable(arrivingPort(wire)),
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
