import { ErrorCode, InputError, PostGuardError, truncated } from './errors.js';

/**
 * Byte-exact reads from a ReadableStream of byte chunks, for parsing the framing of a
 * streamed ciphertext. Whatever was read past the framing is handed on with the rest
 * of the stream.
 */

/** Accepts the byte chunk types a stream may carry; anything else is a caller error. */
export function asBytes(chunk: unknown): Uint8Array {
  if (chunk instanceof Uint8Array) return chunk;
  if (ArrayBuffer.isView(chunk)) return new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  if (chunk instanceof ArrayBuffer) return new Uint8Array(chunk);
  throw new InputError(ErrorCode.INVALID_INPUT, `stream chunks must be Uint8Array, got ${describe(chunk)}`);
}

const describe = (v: unknown): string =>
  v === null ? 'null' : typeof v === 'object' ? (v.constructor?.name ?? 'object') : typeof v;

export class StreamReader {
  private readonly reader: ReadableStreamDefaultReader<unknown>;
  private pending: Uint8Array[] = [];
  private pendingBytes = 0;
  private done = false;

  constructor(readable: ReadableStream<unknown>) {
    this.reader = readable.getReader();
  }

  /** Reads exactly `n` bytes; `what` names them in the TRUNCATED error at end of stream. */
  async readExact(n: number, what: string): Promise<Uint8Array> {
    while (this.pendingBytes < n) {
      if (!(await this.pull())) throw truncated(what);
    }
    return this.shift(n);
  }

  /** Up to `n` bytes; fewer only at the end of the stream (then `end` is true). */
  async readUpTo(n: number): Promise<{ bytes: Uint8Array; end: boolean }> {
    while (this.pendingBytes < n && (await this.pull())) {
      /* keep pulling */
    }
    const take = Math.min(n, this.pendingBytes);
    return { bytes: this.shift(take), end: this.pendingBytes === 0 && this.done };
  }

  /** Whether the stream has ended with nothing left to read. */
  async atEnd(): Promise<boolean> {
    while (this.pendingBytes === 0) {
      if (!(await this.pull())) return true;
    }
    return false;
  }

  /** The remaining bytes as chunks: what was buffered first, then the rest of the stream. */
  chunkSource(): ChunkSource {
    return async () => {
      if (this.pendingBytes === 0 && !(await this.pull())) return undefined;
      const chunk = this.pending.shift();
      if (chunk === undefined) return new Uint8Array(0);
      this.pendingBytes -= chunk.length;
      return chunk;
    };
  }

  async cancel(reason?: unknown): Promise<void> {
    this.pending = [];
    this.pendingBytes = 0;
    await this.reader.cancel(reason).catch(() => undefined);
  }

  releaseLock(): void {
    this.reader.releaseLock();
  }

  private async pull(): Promise<boolean> {
    if (this.done) return false;
    let result: ReadableStreamReadResult<unknown>;
    try {
      result = await this.reader.read();
    } catch (cause) {
      throw new PostGuardError(ErrorCode.SOURCE_FAILED, `the input stream failed: ${String(cause)}`, { cause });
    }
    const { done, value } = result;
    if (done) {
      this.done = true;
      return false;
    }
    const bytes = asBytes(value);
    if (bytes.length > 0) {
      this.pending.push(bytes);
      this.pendingBytes += bytes.length;
    }
    return true;
  }

  private shift(n: number): Uint8Array {
    if (n === 0) return new Uint8Array(0);
    const first = this.pending[0]!;
    if (first.length === n) {
      this.pending.shift();
      this.pendingBytes -= n;
      return first;
    }
    if (first.length > n) {
      this.pending[0] = first.subarray(n);
      this.pendingBytes -= n;
      return first.subarray(0, n);
    }
    const out = new Uint8Array(n);
    let filled = 0;
    while (filled < n) {
      const head = this.pending[0]!;
      const take = Math.min(head.length, n - filled);
      out.set(head.subarray(0, take), filled);
      filled += take;
      if (take === head.length) this.pending.shift();
      else this.pending[0] = head.subarray(take);
    }
    this.pendingBytes -= n;
    return out;
  }
}

/** The next chunk of a byte source, or undefined at its end. */
export type ChunkSource = () => Promise<Uint8Array | undefined>;

/** A stream reader's chunks as a ChunkSource; a read that fails is SOURCE_FAILED. */
export function readerSource(reader: ReadableStreamDefaultReader<unknown>): ChunkSource {
  return async () => {
    let result: ReadableStreamReadResult<unknown>;
    try {
      result = await reader.read();
    } catch (cause) {
      throw new PostGuardError(ErrorCode.SOURCE_FAILED, `the input stream failed: ${String(cause)}`, { cause });
    }
    return result.done ? undefined : asBytes(result.value);
  };
}

/**
 * A source may hand over one huge chunk (a whole file as one Uint8Array). It is fed to the
 * segmenter in pieces of this size, waiting for room in the queue between pieces, so the segments
 * in flight stay bounded and the event loop gets a turn, however large the chunk.
 */
export const PIECE_BYTES = 1 << 20;

/** How long a failing pipeline waits for its source's cancel and its sink's abort to finish. */
export const ABORT_GRACE_MS = 2000;
