import { transferHandlers, type TransferHandler } from 'comlink';
import { encodeError, reviveError } from './errors.js';
import { portToReadable, portToWritable, readableToPort, writableToPort } from './port-stream.js';
import { relaySettings } from './relay-settings.js';

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

const readableHandler: TransferHandler<ReadableStream<unknown>, MessagePort> = {
  canHandle: (value): value is ReadableStream<unknown> =>
    typeof ReadableStream !== 'undefined' && value instanceof ReadableStream,
  serialize(stream) {
    const port = readableToPort(stream, { batchBytes: relaySettings().batchBytes });
    return [port, [port]];
  },
  deserialize: (port) => portToReadable(port, { windowBytes: relaySettings().windowBytes }),
};

const writableHandler: TransferHandler<WritableStream<Uint8Array>, MessagePort> = {
  canHandle: (value): value is WritableStream<Uint8Array> =>
    typeof WritableStream !== 'undefined' && value instanceof WritableStream,
  serialize(stream) {
    const { port, settled } = writableToPort(stream, { windowBytes: relaySettings().windowBytes });
    settlements.set(stream, settled);
    return [port, [port]];
  },
  deserialize: (port) => portToWritable(port),
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
