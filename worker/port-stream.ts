import { ErrorCode, PostGuardError } from '../lib/errors.js';
import { asBytes } from '../lib/io.js';
import { encodeError, reviveError } from './errors.js';
import type { RelayPort } from './worker-channel.js';

/**
 * Byte streams between threads (page ↔ crypto worker, page → service worker), relayed over a
 * MessagePort. Natively transferred streams carry one chunk per cross-thread round trip and
 * structured-clone every chunk on both sides; measured in Chromium that plumbing, not the crypto,
 * halved throughput. This relay instead:
 *
 * - lets the sender run ahead: the receiver grants a window of bytes (1 MiB) and hands credit back
 *   as its consumer takes chunks, so many chunks are in flight at once, never more than the window
 *   (plus the one chunk that crossed it);
 * - moves buffers instead of cloning them. A sender that does not own its chunks (a caller's
 *   ReadableStream: readableToPort) copies each one into 256 KiB buffers right after reading it, so
 *   the source may reuse its chunk at once, and transfers those. A partly filled buffer goes out at
 *   once whenever the receiver has taken everything sent so far: batching never makes it wait.
 *   A sender that owns its chunks (a writable the library writes: portToWritable) transfers their
 *   buffers as they are;
 * - keeps errors coded (worker/errors.ts) both ways: a source error or an abort reaches the other
 *   side as the same class with the same `code`, and so do a consumer's cancel and a sink's failure.
 *
 * The two halves: a Sender (readableToPort, portToWritable) and a Receiver (portToReadable,
 * writableToPort). One side of every pair lives in each thread. The port is a MessagePort, or one
 * multiplexed over a worker's own channel (worker-channel.ts: the crypto worker's streams, since a
 * MessagePort is slow in Firefox); `serveReadable` and `serveWritable` take the page's end of either.
 */

/** Bytes the receiver lets the sender have in flight: sent, not yet taken by its consumer. */
export const WINDOW_BYTES = 1 << 20;
/** Size of the buffers a copying sender gathers chunks into. */
export const BATCH_BYTES = 256 << 10;

/** Sender → receiver. */
type Data = { t: 'bytes'; chunk: Uint8Array } | { t: 'end' } | { t: 'error'; error: unknown };
/**
 * Receiver → sender. 'window' comes once, first; 'closed' only from writableToPort, after its sink
 * closed; 'spent' only from a portToReadable whose consumer said it is done with each chunk once it
 * asks for the next (spendChunksOnRead): the batch's buffer comes back for the next batch.
 */
type Control =
  | { t: 'window'; bytes: number }
  | { t: 'taken'; bytes: number }
  | { t: 'closed' }
  | { t: 'cancel'; reason: unknown }
  | { t: 'spent'; buffer: ArrayBuffer };

/**
 * Batches a copying sender keeps for reuse. A fresh 256 KiB buffer per batch cost the page more
 * than the copy into it (fresh memory is zeroed and faulted in page by page): 300 ms of a 64 MiB
 * seal in Chromium. The window holds four batches; two more cover the ones on their way back.
 */
const MAX_SPARE_BATCHES = 6;

/** How readableToPort batches what it sends. */
export interface SenderOptions {
  /** Size of the buffers chunks are copied into (readableToPort). */
  batchBytes?: number;
  /**
   * The readable's chunks are fresh buffers no one touches again (the library's plaintext, as
   * portToWritable's writers): their buffers are transferred as they are, not copied into batches.
   */
  owned?: boolean;
}

/** How much portToReadable lets its sender have in flight. */
export interface ReceiverOptions {
  /** Bytes the sender may have in flight. */
  windowBytes?: number;
}

/**
 * Buffers a Sender has transferred. A transferred buffer is detached here (every view of it reads
 * as empty), so a second chunk over the same buffer would silently lose its bytes: it fails instead.
 */
const moved = new WeakSet<ArrayBufferLike>();

const ignore = () => undefined;

class Sender {
  /** 0 until the receiver has granted its window. */
  private window = 0;
  /** Bytes sent that the receiver's consumer has not taken yet. */
  private outstanding = 0;
  /** Chunks ready to go, waiting for room in the window. */
  private readonly outbox: Uint8Array[] = [];
  private batch: Uint8Array | undefined;
  private fill = 0;
  /** Batch buffers the receiver gave back (copying senders only). */
  private readonly spares: ArrayBuffer[] = [];
  private closedByReceiver = false;
  private finished = false;
  /** Why the receiver stopped (its consumer cancelled, its sink failed); set once. */
  stopped: { reason: unknown } | undefined;
  private recheck: (() => void) | undefined;

  constructor(
    private readonly port: RelayPort,
    /** Copy chunks (the caller may reuse them) or transfer their buffers (the writer gave them up). */
    private readonly copy: boolean,
    private readonly batchBytes: number,
    private readonly onStop: (reason: unknown) => void,
  ) {
    port.onmessage = ({ data }: MessageEvent<Control>) => this.control(data);
  }

  private control(message: Control): void {
    if (this.stopped) return;
    switch (message.t) {
      case 'window':
        this.window = message.bytes;
        break;
      case 'taken':
        this.outstanding -= message.bytes;
        break;
      case 'closed':
        this.closedByReceiver = true;
        break;
      case 'spent': {
        const { buffer } = message;
        // Only a whole batch, and never more than a few: what comes back is still the other side's word.
        if (this.copy && buffer instanceof ArrayBuffer && buffer.byteLength === this.batchBytes) {
          if (this.spares.length < MAX_SPARE_BATCHES) this.spares.push(buffer);
        }
        return;
      }
      case 'cancel':
        this.stop(reviveError(message.reason));
        return;
    }
    if (!this.finished) this.pump();
    this.recheck?.();
  }

  /** Resolves once everything queued has gone and the window has room; rejects once stopped or aborted. */
  ready(signal?: AbortSignal): Promise<void> {
    return this.until(() => this.outbox.length === 0 && this.outstanding < this.window, signal);
  }

  /** Queues `chunk` (copying it at once, or taking its buffer) and sends what the window allows. */
  add(chunk: Uint8Array): void {
    if (!this.copy) {
      if (moved.has(chunk.buffer)) {
        throw new PostGuardError(
          ErrorCode.INVALID_STATE,
          'a chunk over an already transferred buffer was written to a relayed stream',
        );
      }
      if (chunk.byteLength > 0) this.outbox.push(chunk);
    } else {
      for (let offset = 0; offset < chunk.byteLength;) {
        this.batch ??= new Uint8Array(this.spares.pop() ?? new ArrayBuffer(this.batchBytes));
        const take = Math.min(this.batchBytes - this.fill, chunk.byteLength - offset);
        this.batch.set(chunk.subarray(offset, offset + take), this.fill);
        this.fill += take;
        offset += take;
        if (this.fill === this.batchBytes) this.queueBatch();
      }
    }
    this.pump();
  }

  /** Sends everything left, then the end; with `confirm`, waits until the receiver's sink has closed. */
  async end(confirm: boolean): Promise<void> {
    this.queueBatch();
    this.pump();
    await this.until(() => this.outbox.length === 0);
    this.finished = true;
    this.port.postMessage({ t: 'end' } satisfies Data);
    if (confirm) await this.until(() => this.closedByReceiver);
    this.port.close();
  }

  /** Fails the receiving side with `error` (coded) and stops. */
  fail(error: unknown): void {
    if (this.stopped || this.finished) return;
    this.finished = true;
    this.port.postMessage({ t: 'error', error: encodeError(error) } satisfies Data);
    this.port.close();
  }

  private stop(reason: unknown): void {
    this.stopped = { reason };
    this.outbox.length = 0;
    this.batch = undefined;
    this.spares.length = 0;
    this.port.close();
    this.onStop(reason);
    this.recheck?.();
  }

  private queueBatch(): void {
    if (this.batch === undefined || this.fill === 0) return;
    // A part-filled batch is cut to size so that a consumer keeping chunks keeps no slack.
    this.outbox.push(this.fill === this.batch.length ? this.batch : this.batch.slice(0, this.fill));
    this.batch = undefined;
    this.fill = 0;
  }

  private pump(): void {
    // A receiver that has taken everything gets what is gathered so far: batching never makes it wait.
    if (this.outbox.length === 0 && this.outstanding === 0 && this.window > 0) this.queueBatch();
    while (this.outbox.length > 0 && this.outstanding < this.window) this.post(this.outbox.shift()!);
  }

  private post(chunk: Uint8Array): void {
    this.outstanding += chunk.byteLength;
    const { buffer } = chunk;
    try {
      this.port.postMessage({ t: 'bytes', chunk } satisfies Data, [buffer as ArrayBuffer]);
      moved.add(buffer);
    } catch {
      // Not transferable (a SharedArrayBuffer, WebAssembly memory): send a copy instead.
      const own = chunk.slice();
      this.port.postMessage({ t: 'bytes', chunk: own } satisfies Data, [own.buffer]);
    }
  }

  /** Waits until `done()` holds, re-checked after every message from the receiver. */
  private until(done: () => boolean, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const check = () => {
        if (this.stopped) reject(this.stopped.reason);
        else if (signal?.aborted) reject(signal.reason);
        else if (!done()) return;
        else resolve();
        this.recheck = undefined;
        signal?.removeEventListener('abort', check);
      };
      this.recheck = check;
      signal?.addEventListener('abort', check);
      check();
    });
  }
}

class Receiver {
  private readonly queue: Data[] = [];
  private arrived: (() => void) | undefined;
  /** Bytes received and bytes handed back as credit: their difference may never reach the window. */
  private received = 0;
  private taken = 0;
  private done = false;

  constructor(
    private readonly port: RelayPort,
    private readonly window: number,
  ) {
    port.onmessage = ({ data }: MessageEvent<Data>) => this.data(data);
    port.postMessage({ t: 'window', bytes: window } satisfies Control);
  }

  private data(message: Data): void {
    if (this.done) return;
    const broken = this.broken(message);
    if (broken === undefined) {
      if (message.t === 'bytes') this.received += message.chunk.byteLength;
      this.queue.push(message);
    } else {
      // What arrived before is still delivered, then this error; the sender is told to stop.
      const error = new PostGuardError(
        ErrorCode.INVALID_STATE,
        `the stream relay's sender broke the protocol: ${broken}`,
      );
      this.post({ t: 'cancel', reason: encodeError(error) });
      this.done = true;
      this.port.close();
      this.queue.push({ t: 'error', error: encodeError(error) });
    }
    this.arrived?.();
    this.arrived = undefined;
  }

  /** What is wrong with a message from the sender, if anything. */
  private broken(message: Data): string | undefined {
    switch (message?.t) {
      case 'bytes':
        if (!(message.chunk instanceof Uint8Array)) return 'bytes that are not a Uint8Array';
        // The sender sends only while it has credit, so this cannot reach the window (see Sender.pump).
        if (this.received - this.taken >= this.window) return 'bytes beyond the window it was granted';
        return undefined;
      case 'end':
      case 'error':
        return undefined;
      default:
        return 'an unknown message';
    }
  }

  /** The next message from the sender, in order. */
  async next(): Promise<Data> {
    while (this.queue.length === 0) {
      // Closed from this side (a cancel): nothing more will come, so a waiting reader must not wait on.
      if (this.done)
        return {
          t: 'error',
          error: encodeError(new PostGuardError(ErrorCode.INVALID_STATE, 'the stream relay was closed')),
        };
      await new Promise<void>((resolve) => (this.arrived = resolve));
    }
    return this.queue.shift()!;
  }

  /** The consumer took `bytes`: the sender may send that much more. */
  took(bytes: number): void {
    this.taken += bytes;
    this.post({ t: 'taken', bytes });
  }

  /** Hands a chunk's buffer back to the sender for reuse (the consumer is done with it). */
  giveBack(buffer: ArrayBuffer): void {
    if (!this.done) this.port.postMessage({ t: 'spent', buffer } satisfies Control, [buffer]);
  }

  /** Stops the sender with `reason` (coded). */
  cancel(reason: unknown): void {
    this.post({ t: 'cancel', reason: encodeError(reason) });
    this.close();
  }

  /** The sink closed after the end (writableToPort): the sender's close() may resolve. */
  confirmClose(): void {
    this.post({ t: 'closed' });
    this.close();
  }

  close(): void {
    this.done = true;
    this.queue.length = 0;
    this.port.close();
    this.arrived?.();
    this.arrived = undefined;
  }

  private post(message: Control): void {
    if (!this.done) this.port.postMessage(message);
  }
}

/**
 * Serves `readable` on a port: hand the returned port to the other thread's portToReadable. Chunks
 * are read only as the receiver grants room, copied into batches at once (so the source may reuse
 * a chunk as soon as it is asked for the next) and transferred. Chunks must be bytes (a typed array,
 * DataView or ArrayBuffer); anything else fails both sides with INVALID_INPUT.
 */
export function readableToPort(readable: ReadableStream<unknown>, options: SenderOptions = {}): MessagePort {
  const { port1, port2 } = new MessageChannel();
  serveReadable(readable, port1, options);
  return port2;
}

/** readableToPort on a port of the caller's: `port`'s other end goes to portToReadable. */
export function serveReadable(readable: ReadableStream<unknown>, port: RelayPort, options: SenderOptions = {}): void {
  const reader = readable.getReader();
  const sender = new Sender(port, options.owned !== true, options.batchBytes ?? BATCH_BYTES, (reason) => {
    // Also ends a read that is waiting on a slow source.
    reader.cancel(reason).catch(ignore);
  });
  void (async () => {
    try {
      for (;;) {
        await sender.ready();
        const { done, value } = await reader.read();
        if (done) break;
        sender.add(asBytes(value));
      }
      await sender.end(false);
    } catch (error) {
      if (sender.stopped) return;
      sender.fail(error);
      await reader.cancel(error).catch(ignore);
    }
  })();
}

/** Relayed readables whose consumer may hand chunks back: the switch that lets it (spendChunksOnRead). */
const spendable = new WeakMap<ReadableStream<unknown>, () => void>();

/**
 * Tells the relay behind `readable` (a portToReadable) that its consumer is done with each chunk
 * once it asks for the next one: each chunk's buffer then goes back to the sender to carry a later
 * batch, and the consumer must not touch a chunk after its next read. Returns false (and changes
 * nothing) for any other readable. For a consumer that copies what it reads at once, as
 * sealStream does (lib/segments.ts SegmentSealer.push copies into its region before it reads on).
 */
export function spendChunksOnRead(readable: ReadableStream<unknown>): boolean {
  const enable = spendable.get(readable);
  enable?.();
  return enable !== undefined;
}

/** The readable served on `port` by readableToPort: chunks are Uint8Arrays this thread owns. */
export function portToReadable<T = Uint8Array>(port: RelayPort, options: ReceiverOptions = {}): ReadableStream<T> {
  const receiver = new Receiver(port, options.windowBytes ?? WINDOW_BYTES);
  let spend = false;
  /** The chunk handed out last, while it may still go back. */
  let last: Uint8Array | undefined;
  const readable = new ReadableStream<T>(
    {
      async pull(controller) {
        // A read asks for the next chunk: a consumer that spends chunks on read is done with the last.
        const whole = last !== undefined && last.byteLength > 0 && last.byteLength === last.buffer.byteLength;
        if (spend && whole) {
          receiver.giveBack(last!.buffer as ArrayBuffer);
        }
        last = undefined;
        const message = await receiver.next();
        if (message.t === 'bytes') {
          last = message.chunk;
          controller.enqueue(message.chunk as T);
          receiver.took(message.chunk.byteLength);
        } else if (message.t === 'end') {
          controller.close();
          receiver.close();
        } else {
          controller.error(reviveError(message.error));
          receiver.close();
        }
      },
      cancel: (reason) => receiver.cancel(reason),
    },
    // Pulled only while a read waits: what is not yet read stays with the sender (backpressure).
    { highWaterMark: 0 },
  );
  spendable.set(readable, () => (spend = true));
  return readable;
}

/**
 * Serves `writable` on a port: hand `port` to the other thread's portToWritable. Chunks are written
 * one after the other; each is credited back once its write finished, so a slow sink holds the
 * sender to the window. `settled` resolves once `writable` is closed and rejects once it failed or
 * was aborted.
 */
export function writableToPort(
  writable: WritableStream<Uint8Array>,
  options: ReceiverOptions = {},
): { port: MessagePort; settled: Promise<void> } {
  const { port1, port2 } = new MessageChannel();
  return { port: port2, settled: serveWritable(writable, port1, options) };
}

/** writableToPort on a port of the caller's: `port`'s other end goes to portToWritable. */
export function serveWritable(
  writable: WritableStream<Uint8Array>,
  port: RelayPort,
  options: ReceiverOptions = {},
): Promise<void> {
  const writer = writable.getWriter();
  const settled = writer.closed;
  const receiver = new Receiver(port, options.windowBytes ?? WINDOW_BYTES);
  // A sink can fail between writes (a connection that drops while the sender waits on its source):
  // the sender hears it now, not at a next write that may never come. After the relay ended this
  // is a no-op.
  settled.catch((error: unknown) => receiver.cancel(error));
  void (async () => {
    for (;;) {
      const message = await receiver.next();
      try {
        if (message.t === 'bytes') {
          await writer.write(message.chunk);
          receiver.took(message.chunk.byteLength);
        } else if (message.t === 'end') {
          await writer.close();
          receiver.confirmClose();
          return;
        } else {
          receiver.close();
          await writer.abort(reviveError(message.error)).catch(ignore);
          return;
        }
      } catch (error) {
        // The sink failed: the sender's next write (or its close) fails with this error.
        receiver.cancel(error);
        return;
      }
    }
  })();
  return settled;
}

/**
 * A writable that forwards to the one served on `port` by writableToPort. Writing a chunk hands
 * its buffer over: the buffer is transferred (detached here), not copied. Only give this to a
 * writer that never touches a buffer again once written, and never writes two chunks over one
 * buffer (the second fails with INVALID_STATE rather than arrive empty). postguard-ts's sealStream
 * and StreamUnsealer are such writers: see transfer.ts. close() resolves once the other side's sink
 * has closed; if that sink fails, writes and close() fail with its (coded) error.
 */
export function portToWritable(port: RelayPort): WritableStream<Uint8Array> {
  let sender!: Sender;
  return new WritableStream<Uint8Array>({
    start(controller) {
      sender = new Sender(port, false, 0, (reason) => controller.error(reason));
    },
    async write(chunk, controller) {
      const failing = (step: () => void) => {
        try {
          step();
        } catch (error) {
          sender.fail(error);
          throw error;
        }
      };
      let bytes!: Uint8Array;
      failing(() => (bytes = asBytes(chunk)));
      await sender.ready(controller.signal);
      failing(() => sender.add(bytes));
    },
    close: () => sender.end(true),
    abort: (reason) => sender.fail(reason),
  });
}
