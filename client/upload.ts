import { DEFAULT_STALL_MS, bounded } from '../lib/net/waits.js';
import type { ByteSource } from '../lib/net/sources.js';
import { ClientError, ClientErrorCode, invalidInput } from './errors.js';
import { aborted, throwIfAborted } from './http.js';
import { isUploadId, isUploadToken, StorageClient, type UploadSession } from './storage.js';

export { checkLimits, chunkSizeFor } from './limits.js';

/**
 * Sending a ciphertext that can be read again (a Blob, a file in the Origin Private File System, a
 * file on disk) to an upload session, from any offset: the same code starts an upload and resumes
 * one after a reload or a crash, because the bytes are the same both times. Re-sealing would not
 * give the same bytes, which is why a resumable upload keeps its ciphertext rather than its
 * plaintext.
 *
 * One chunk is read ahead while the previous one is sent, so at most two chunks are in memory.
 */

/** What {@link uploadCiphertext} sends, where, and how it reports. */
export interface UploadCiphertextOptions {
  /** The storage service's client. */
  storage: StorageClient;
  /** The upload: its `token` is moved on in place as each chunk is committed. */
  session: UploadSession;
  /**
   * The whole ciphertext. `read` must give bytes it will not write to again (a fresh array per
   * call), since a chunk is still being sent while the next one is read.
   */
  source: ByteSource;
  /** Where to start: 0 for a new upload, the service's `uploaded` for a resumed one. Default 0. */
  from?: number;
  /** Bytes per chunk PUT: see `chunkSizeFor` (at most the session's `maxChunkSize`). */
  chunkSize: number;
  /** The `X-PostGuard-Proof` for finalize (base64 of signChallenge over the session's challenge). */
  proof?: string;
  /** After each committed chunk (and once at the start) with the bytes stored so far and the total. */
  onProgress?: (uploadedBytes: number, totalBytes: number) => void;
  /**
   * After each committed chunk, before the next is sent, with what a resume needs: awaited, so a
   * journal written here is never behind the service by more than the chunk in flight.
   */
  onCommitted?: (state: { uploaded: number; token: string }) => void | Promise<void>;
  /** Aborts the upload (ABORTED); nothing is finalized. */
  signal?: AbortSignal;
  /** How long one read of the source may take before the upload fails (INPUT_FAILED). 30 000 ms. */
  stallMs?: number;
}

/** An upload found again at the storage service, ready for {@link uploadCiphertext} `from: uploaded`. */
export interface ResumedUpload {
  /** The session, with the service's current token (and `maxChunkSize` when given to resume). */
  session: UploadSession;
  /** Ciphertext bytes the service holds: continue from here. */
  uploaded: number;
}

/** How {@link resumeSession} checks and completes the session it returns. */
export interface ResumeOptions {
  /**
   * The ciphertext being uploaded. When given, the last chunk the service committed is sent again
   * through its replay path, which answers only when the bytes are the same: a journal that points
   * at other bytes (another sealing of the same files, say) fails here with INVALID_INPUT, before
   * anything is appended, rather than as a damaged file at the recipient. Costs one chunk's upload.
   */
  source?: ByteSource;
  /** The `maxChunkSize` init gave (the status call does not repeat it), put into the session. */
  maxChunkSize?: number;
  /** Bounds the reads of `source`, as in {@link UploadCiphertextOptions.stallMs}. */
  stallMs?: number;
}

const isCount = (value: unknown): value is number =>
  typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;

function checkSource(source: unknown): asserts source is ByteSource {
  const s = source as ByteSource | null;
  if (typeof s !== 'object' || s === null || typeof s.read !== 'function')
    throw invalidInput('source: expected a ByteSource, { size, read(offset, length, signal) }');
  if (!isCount(s.size)) throw invalidInput(`source: a size of ${String(s.size)} bytes cannot be`);
}

function checkStall(stallMs: unknown): number {
  if (stallMs === undefined) return DEFAULT_STALL_MS;
  if (typeof stallMs !== 'number' || !(stallMs > 0) || stallMs > 0x7fff_ffff)
    throw invalidInput('stallMs: expected a positive number of milliseconds');
  return stallMs;
}

/**
 * Reads `length` bytes at `offset`, bounded by the signal and a stall timeout: exactly those bytes,
 * or ABORTED, or INPUT_FAILED (the source failed, stalled, or gave something else). The source's
 * own read is told to stop (its signal) whichever way this ends early.
 */
async function readExactly(
  source: ByteSource,
  offset: number,
  length: number,
  signal: AbortSignal,
  stallMs: number,
): Promise<Uint8Array<ArrayBuffer>> {
  throwIfAborted(signal);
  const stop = new AbortController();
  const failed = (message: string, cause?: unknown) =>
    new ClientError(ClientErrorCode.INPUT_FAILED, `reading the ciphertext: ${message}`, { cause });
  let bytes: unknown;
  try {
    bytes = await bounded(
      Promise.resolve().then(() => source.read(offset, length, stop.signal)),
      signal,
      stallMs,
      () => failed(`${length} bytes at ${offset} did not come within ${stallMs} ms`),
      (s) => aborted(s.reason),
    );
  } catch (error) {
    if (error instanceof ClientError) throw error;
    throw failed(`${length} bytes at ${offset}: ${error instanceof Error ? error.message : String(error)}`, error);
  } finally {
    stop.abort();
  }
  if (!(bytes instanceof Uint8Array) || bytes.length !== length)
    throw failed(`${length} bytes at ${offset} were asked for, and something else came (the source changed?)`);
  // A view of a shared or resizable buffer cannot be a request body as it is.
  return bytes.buffer instanceof ArrayBuffer ? (bytes as Uint8Array<ArrayBuffer>) : new Uint8Array(bytes);
}

/** `error` carrying the upload's id and how far it got, as every upload failure does. */
export function located(error: unknown, uuid: string, uploaded: number): unknown {
  if (!(error instanceof ClientError) || (error.uuid === uuid && error.uploadedBytes === uploaded)) return error;
  return new ClientError(error.code, error.message, {
    ...(error.cause === undefined ? {} : { cause: error.cause }),
    ...(error.status === undefined ? {} : { status: error.status }),
    ...(error.url === undefined ? {} : { url: error.url }),
    uuid,
    uploadedBytes: uploaded,
  });
}

function checkOptions(o: UploadCiphertextOptions): { from: number; stallMs: number } {
  if (typeof o !== 'object' || o === null) throw invalidInput('uploadCiphertext: expected options');
  if (!(o.storage instanceof StorageClient)) throw invalidInput('storage: expected a StorageClient');
  const session = o.session as UploadSession | null;
  if (typeof session !== 'object' || session === null || !isUploadId(session.uuid) || !isUploadToken(session.token))
    throw invalidInput('session: expected an upload session, { uuid, token }');
  checkSource(o.source);
  const from = o.from ?? 0;
  if (!isCount(from) || from > o.source.size)
    throw invalidInput(`from: expected an offset from 0 to the source's ${o.source.size} bytes`);
  if (o.source.size === 0) throw invalidInput('source: an empty ciphertext cannot be uploaded');
  if (!isCount(o.chunkSize) || o.chunkSize === 0) throw invalidInput('chunkSize: expected a positive whole number');
  if (session.maxChunkSize !== undefined && o.chunkSize > session.maxChunkSize)
    throw invalidInput(`chunkSize: ${o.chunkSize} is over the service's ${session.maxChunkSize} bytes a chunk`);
  for (const name of ['onProgress', 'onCommitted'] as const) {
    if (o[name] !== undefined && typeof o[name] !== 'function') throw invalidInput(`${name}: expected a function`);
  }
  if (o.proof !== undefined && typeof o.proof !== 'string') throw invalidInput('proof: expected a base64 string');
  return { from, stallMs: checkStall(o.stallMs) };
}

/**
 * Sends `source` from `from` to its end in chunks of `chunkSize` (the last one shorter, never
 * empty), then finalizes with `proof`. Chunks are retried per the configuration's retry policy
 * (transport failures, 5xx, 408, 429; see StorageClient.putChunk); any other refusal ends the
 * upload with its typed error (UPLOAD_TOO_LARGE for 413, UPLOAD_EXPIRED for 404). Every error carries
 * the upload's `uuid` and the bytes committed (`uploadedBytes`), from which it can be resumed.
 */
export async function uploadCiphertext(options: UploadCiphertextOptions): Promise<void> {
  const { from, stallMs } = checkOptions(options);
  const { storage, session, source, chunkSize, onProgress, onCommitted, proof } = options;
  const total = source.size;
  // Ends the read ahead whichever way the upload ends.
  const reading = new AbortController();
  const signal = options.signal === undefined ? reading.signal : AbortSignal.any([options.signal, reading.signal]);
  let uploaded = from;
  let ahead: Promise<Uint8Array<ArrayBuffer>> | undefined;
  const readAt = (offset: number) => {
    const read = readExactly(source, offset, Math.min(chunkSize, total - offset), signal, stallMs);
    // Awaited in turn, or abandoned when the upload fails first.
    read.catch(() => undefined);
    return read;
  };
  try {
    onProgress?.(uploaded, total);
    ahead = uploaded < total ? readAt(uploaded) : undefined;
    while (ahead !== undefined) {
      const chunk = await ahead;
      const next = uploaded + chunk.length;
      ahead = next < total ? readAt(next) : undefined;
      session.token = await storage.putChunk(session, uploaded, chunk, options.signal);
      uploaded = next;
      await onCommitted?.({ uploaded, token: session.token });
      onProgress?.(uploaded, total);
    }
    throwIfAborted(options.signal);
    await storage.finalize(session, total, options.signal, proof);
  } catch (error) {
    // The caller's abort wins over whatever it broke on the way out.
    throw located(options.signal?.aborted ? aborted(options.signal.reason) : error, session.uuid, uploaded);
  } finally {
    reading.abort();
  }
}

/**
 * Finds an unfinished upload again after a reload or a crash, from its id and the recovery token
 * init gave: the session (with the service's current token) and the bytes it holds. Those bytes
 * are the service's count, not a journal's: when a chunk was committed but its answer was lost
 * (the crash came between the two), the service is one chunk further than the journal, its token
 * is the one after that chunk, and the upload continues from there; the bytes of that chunk need
 * not be sent again. With `options.source`, that last chunk is checked against the source through
 * the replay path (the token it was sent with, its offset), see {@link ResumeOptions.source}.
 *
 * UPLOAD_EXPIRED when the service no longer knows the upload or the token is not its own.
 */
export async function resumeSession(
  storage: StorageClient,
  uuid: string,
  recoveryToken: string,
  signal?: AbortSignal,
  options: ResumeOptions = {},
): Promise<ResumedUpload> {
  if (!(storage instanceof StorageClient)) throw invalidInput('storage: expected a StorageClient');
  if (typeof options !== 'object' || options === null) throw invalidInput('resumeSession: options must be an object');
  const { source, maxChunkSize } = options;
  if (maxChunkSize !== undefined && (!isCount(maxChunkSize) || maxChunkSize === 0))
    throw invalidInput('maxChunkSize: expected a positive whole number');
  if (source !== undefined) checkSource(source);
  const stallMs = checkStall(options.stallMs);
  const status = await storage.status(uuid, recoveryToken, signal);
  const session: UploadSession = { uuid, token: status.token, recoveryToken };
  if (maxChunkSize !== undefined) session.maxChunkSize = maxChunkSize;
  if (source !== undefined) {
    if (source.size < status.uploaded) {
      throw new ClientError(
        ClientErrorCode.INVALID_INPUT,
        `the source is ${source.size} bytes, and the storage service already holds ${status.uploaded} of this upload`,
        { uuid, uploadedBytes: status.uploaded },
      );
    }
    if (status.prevOffset !== undefined) await checkLastChunk(storage, session, status, source, stallMs, signal);
  }
  return { session, uploaded: status.uploaded };
}

/** Sends the service's last committed chunk again from `source`; the service says whether the bytes are the same. */
async function checkLastChunk(
  storage: StorageClient,
  session: UploadSession,
  status: { uploaded: number; token: string; prevToken?: string; prevOffset?: number },
  source: ByteSource,
  stallMs: number,
  signal: AbortSignal | undefined,
): Promise<void> {
  const offset = status.prevOffset!;
  const reading = new AbortController();
  const readSignal = signal === undefined ? reading.signal : AbortSignal.any([signal, reading.signal]);
  let token: string;
  try {
    const chunk = await readExactly(source, offset, status.uploaded - offset, readSignal, stallMs);
    // The replay must not be refused for a size the service accepted once.
    const replay: UploadSession = { uuid: session.uuid, token: status.prevToken! };
    token = await storage.putChunk(replay, offset, chunk, signal);
  } catch (error) {
    if (error instanceof ClientError && error.code === ClientErrorCode.STORAGE_REJECTED && error.status === 400) {
      throw new ClientError(
        ClientErrorCode.INVALID_INPUT,
        `the source is not the ciphertext this upload holds: the storage service's last chunk (bytes ${offset} to ${status.uploaded}) differs`,
        { cause: error, uuid: session.uuid, uploadedBytes: status.uploaded },
      );
    }
    throw located(error, session.uuid, status.uploaded);
  } finally {
    reading.abort();
  }
  if (token !== status.token) {
    throw new ClientError(
      ClientErrorCode.STORAGE_BAD_RESPONSE,
      'the storage service answered the replay of its last chunk with another token than its status gave',
      { uuid: session.uuid, uploadedBytes: status.uploaded },
    );
  }
}

/** What {@link ChunkFeed.next} gives: a sealed chunk, or where the upload must go on from the kept bytes. */
export type FeedItem = { chunk: Uint8Array<ArrayBuffer>; offset: number } | { from: number };

/**
 * Chunks handed from a sealer to an upload running beside it, in order, holding at most
 * `maxBytes` (and at least one chunk). A chunk that finds the feed full waits up to `waitMs` for
 * room: the sealer is paced by the upload while the upload keeps up, and runs on alone when the
 * upload stalls (a hung PUT, a retry's backoff), so that its bytes are kept, and resumable, in the
 * time sealing alone takes. From the first chunk that could not wait (and after {@link stop}),
 * nothing more is queued: the upload reads the rest from the kept bytes once they are committed.
 */
export class ChunkFeed {
  private readonly queue: Array<{ chunk: Uint8Array<ArrayBuffer>; offset: number }> = [];
  private queued = 0;
  private offered = 0;
  /** The offset from which chunks were dropped. */
  private droppedFrom: number | undefined;
  private ended = false;
  private failure: { error: unknown } | undefined;
  private wakeConsumer: (() => void) | undefined;
  private wakeProducer: (() => void) | undefined;

  constructor(
    private readonly maxBytes: number,
    private readonly waitMs: number,
  ) {}

  /** The next chunk in order (the sealer's), resolving when one is queued or wait has ended. */
  async offer(chunk: Uint8Array<ArrayBuffer>): Promise<void> {
    const offset = this.offered;
    this.offered += chunk.length;
    if (this.droppedFrom !== undefined || this.ended) return;
    if (this.queue.length > 0 && this.queued + chunk.length > this.maxBytes) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await new Promise<void>((resolve) => {
        this.wakeProducer = resolve;
        timer = setTimeout(resolve, this.waitMs);
      });
      clearTimeout(timer);
      this.wakeProducer = undefined;
      if (this.droppedFrom !== undefined) return;
      if (this.queue.length > 0 && this.queued + chunk.length > this.maxBytes) {
        this.droppedFrom = offset;
        this.wake();
        return;
      }
    }
    this.queue.push({ chunk, offset });
    this.queued += chunk.length;
    this.wake();
  }

  /** Sealing ended with every chunk offered. */
  end(): void {
    this.ended = true;
    this.wake();
  }

  /** Sealing failed: the consumer's next() throws `error`. */
  fail(error: unknown): void {
    this.failure ??= { error };
    this.wake();
  }

  /** The consumer stopped: the queue is dropped, and the sealer never waits again. */
  stop(): void {
    this.droppedFrom ??= this.queue[0]?.offset ?? this.offered;
    this.queue.length = 0;
    this.queued = 0;
    this.wake();
  }

  /**
   * The next chunk; or `{ from }`, the offset from which the rest must be read from the kept bytes
   * (after the sealer dropped chunks, or at the end: `from` is then the total). Throws what
   * {@link fail} was given, or ABORTED.
   */
  async next(signal: AbortSignal | undefined): Promise<FeedItem> {
    for (;;) {
      throwIfAborted(signal);
      if (this.failure !== undefined) throw this.failure.error;
      const item = this.queue.shift();
      if (item !== undefined) {
        this.queued -= item.chunk.length;
        this.wakeProducer?.();
        return item;
      }
      if (this.droppedFrom !== undefined) return { from: this.droppedFrom };
      if (this.ended) return { from: this.offered };
      await new Promise<void>((resolve) => {
        const onAbort = () => resolve();
        signal?.addEventListener('abort', onAbort, { once: true });
        this.wakeConsumer = () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        };
      });
      this.wakeConsumer = undefined;
    }
  }

  private wake(): void {
    this.wakeConsumer?.();
    this.wakeProducer?.();
  }
}
