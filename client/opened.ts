import { bounded, linked, withDeadlineSignal, type DeadlineSignal } from '../lib/net/waits.js';
import type { CiphertextInspection } from '../lib/detached.js';
import { ErrorCode, PostGuardError } from '../lib/errors.js';
import type { Policy } from '../lib/policy.js';
import type { ByteSource, RangedUrl } from '../lib/net/sources.js';
import { senderReport, type SenderReport } from '../lib/sender.js';
import type { VerificationResult } from '../lib/signatures.js';
import type { ElementLike } from '../lib/web-types.js';
import type { ResolvedConfig } from './config.js';
import type { CryptoEngine } from './engine.js';
import { ClientError, ClientErrorCode, invalidInput } from './errors.js';
import { aborted } from './http.js';
import type { ClientPkg } from './pkg.js';
import type { SessionCallback } from './sign.js';
import type { ZipEntry, ZipReadable } from './zip-entries.js';
import type { IdentitySession } from '../lib/pkg/index.js';
import type { UserKeys, VerifyingKeys } from '../lib/unseal.js';

/** What `pg.open()` opens: an upload at the storage service, a URL, a Blob or File, or bytes. */
export type OpenInput =
  | { uuid: string; signal?: AbortSignal }
  | { url: string | URL; headers?: Record<string, string>; signal?: AbortSignal }
  | { blob: Blob; signal?: AbortSignal }
  | { data: Uint8Array; signal?: AbortSignal };

/** What `inspect()` read from the header (nothing else is fetched or decrypted). */
export interface InspectResult {
  /** The recipients' ids (e-mail addresses by convention), for `decrypt({ recipient })`. */
  recipients: string[];
  /** Recipient id → the hidden policy the key request is built from. */
  policies: Map<string, Policy>;
  /**
   * The sender the file **claims**, in the words to show. Its header signature verified under the
   * PKG's key, but only a full decryption proves who sealed the content (`decrypt()`'s `sender`).
   */
  sender: SenderReport;
}

/** How a decrypted file is delivered. */
export type DecryptOutput = 'save' | 'stream' | 'bytes' | 'entries';

/** What `decrypt()` takes: how the recipient proves who they are, and how the plaintext is delivered. */
export interface DecryptInput {
  /** Show the Yivi QR code and same-device link in this element (or CSS selector). */
  element?: string | ElementLike;
  /** Called with the identity session when a scan is needed, to show it yourself. */
  onSession?: (session: IdentitySession) => void;
  /** Or run the session yourself: the callback returns its JWT (pg-js's session callback). */
  session?: SessionCallback;
  /** Which recipient to decrypt as (`inspect().recipients`); needed when there are several. */
  recipient?: string;
  /** Reuse a key or session JWT of an earlier scan (until 04:00 by default): no new scan. Default false. */
  enableCache?: boolean;
  /**
   * `'save'` (default with a `serviceWorker` configured): straight to disk through the decrypting
   * service worker. `'stream'`: a ReadableStream. `'bytes'`: one Uint8Array (up to `maxBytes`).
   * `'entries'`: the bundle's files, each saved or read alone.
   */
  output?: DecryptOutput;
  /** The file name to save as (`'save'`). Default `postguard-files.zip` for a bundle, else `postguard-file`. */
  filename?: string;
  /** The largest plaintext `'bytes'` collects. 256 MiB. */
  maxBytes?: number;
  /** Plaintext bytes delivered so far. */
  onProgress?: (bytes: number) => void;
  /**
   * Aborts (`ABORTED`, within a second), at any point: the header read, the key session, the
   * download, the 'stream' output's readable. Default: the signal given to `open()`.
   */
  signal?: AbortSignal;
}

/** What `inspect()` takes. */
export interface InspectOptions {
  /** Aborts the header read (`ABORTED`). Default: the signal given to `open()`. */
  signal?: AbortSignal;
}

/** `'save'`: the file went to the browser's downloads. */
export interface SavedResult extends SealedUnder {
  /** Which output this is. */
  output: 'save';
  /** Who sealed it, as verified once the last byte authenticated. */
  sender: SenderReport;
}

/** `'stream'`: the plaintext, released segment by segment as each authenticates. */
export interface StreamResult extends SealedUnder {
  /** Which output this is. */
  output: 'stream';
  /** Errors with a ClientError if anything fails; closes only after the final segment authenticated. */
  readable: ReadableStream<Uint8Array>;
  /** Who sealed it: resolves once the stream was read to its end and verified. */
  sender: Promise<SenderReport>;
}

/** `'bytes'`: the whole plaintext. */
export interface BytesResult extends SealedUnder {
  /** Which output this is. */
  output: 'bytes';
  /** The whole plaintext (a bundle's ZIP for an upload). */
  plaintext: Uint8Array;
  /** Who sealed it, as the signatures proved. */
  sender: SenderReport;
}

/** One file of a bundle, read without unpacking the others. */
export interface BundleEntry {
  /**
   * A name safe to show and save under: the last path segment, without invisible characters
   * (controls, bidi and zero-width formatting, separators, blank fillers) and with whitespace runs
   * shown as one space. Two entries can share one (`a/x`, `b/x`): make it unique before saving both.
   */
  name: string;
  /** The name as the sender stored it (folders, `..`, anything): to show, never to save under. */
  path: string;
  /** Whether this client can read it (stored, not encrypted); `stream()` of another is BUNDLE_INVALID. */
  supported: boolean;
  /** Bytes. */
  size: number;
  /** Its bytes as a stream, CRC-checked at the end (the stream errors on a mismatch). */
  stream(): ReadableStream<Uint8Array>;
  /** Its bytes as a Blob (held in memory: for previews and small files). */
  blob(type?: string): Promise<Blob>;
}

/** `'entries'`: the bundle's files. */
export interface EntriesResult extends SealedUnder {
  /** Which output this is. */
  output: 'entries';
  /** The bundle's files, in the ZIP's order (empty folders left out; an entry flagged as a folder that carries data is listed). */
  entries: BundleEntry[];
  /**
   * The sender the file claims, worded for a part of it: each entry's segments authenticated under
   * the file's key, the sender's signatures over the whole not checked (read the whole for that).
   */
  sender: SenderReport;
}

/** What `decrypt()` resolves with, by `output`. */
export type DecryptResult = SavedResult | StreamResult | BytesResult | EntriesResult;

/** Which of the PKG's master keys the file was sealed under, when the PKG has a key set. */
export interface SealedUnder {
  /** The id of the PKG key (its key set's, `pg-pkg keys list`) whose user key opened the file. */
  keyId?: string;
}

export interface OpenedParts {
  config: ResolvedConfig;
  pkg: ClientPkg;
  engine: () => CryptoEngine;
  serviceWorker: string | URL | undefined;
}

const DEFAULT_MAX_BYTES = 256 * 1024 * 1024;

// What decrypt() runs is loaded when it runs (a dynamic import is a chunk of its own in a page's
// bundle): the header's inspection and random access are the library's crypto, the download and
// the service worker's registration are needed only for their outputs.
const detached = () => import('../lib/detached.js');
const downloads = () => import('../lib/net/resumable-download.js');
const serviceWorker = () => import('../worker/download.js');
const bundles = () => Promise.all([import('../lib/random-access.js'), import('./zip-entries.js')]);
const registrations = new Map<string, Promise<unknown>>();

/** A download's ways out: the caller's signal and the optional overall deadline, as one signal. */
interface Transfer extends DeadlineSignal {
  ms: number;
}

function transferOf(signal: AbortSignal | undefined, ms: number): Transfer {
  return { ...withDeadlineSignal(signal, ms), ms };
}

/** The library's codes that say the bytes could not be fetched (not that they were wrong). */
const FETCH_CODES: readonly string[] = [ErrorCode.SOURCE_FAILED, ErrorCode.TRUNCATED];

/**
 * Failures while opening, as the documented codes: TIMED_OUT for the deadline, ABORTED for the
 * caller's signal (whatever layer noticed it first), DOWNLOAD_FAILED when the bytes could not be
 * fetched (`remote` sources), else DECRYPTION_FAILED; the library's error is the cause.
 */
function failure(error: unknown, transfer: Transfer | undefined, remote = false): unknown {
  if (transfer?.expired() === true)
    return new ClientError(
      ClientErrorCode.TIMED_OUT,
      `the download did not finish within ${transfer.ms} ms (timeouts.transferMs)`,
      { cause: error },
    );
  if (transfer?.signal?.aborted === true)
    return error instanceof ClientError && error.code === ClientErrorCode.ABORTED
      ? error
      : aborted(transfer.signal.reason);
  if (error instanceof ClientError) return error;
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    if (e instanceof ClientError && e.code === ClientErrorCode.REDIRECT_REFUSED) return e;
    if (!(e instanceof PostGuardError)) continue;
    if (e.code === ErrorCode.CANCELLED) return aborted(error);
    if (remote && FETCH_CODES.includes(e.code))
      return new ClientError(ClientErrorCode.DOWNLOAD_FAILED, `the file could not be fetched: ${e.message}`, {
        cause: error,
      });
  }
  if (error instanceof PostGuardError)
    return new ClientError(ClientErrorCode.DECRYPTION_FAILED, `the file could not be opened: ${error.message}`, {
      cause: error,
    });
  return error;
}

/** `readable`, its error mapped by `map` (the 'stream' output errors with a ClientError). */
function mappedErrors(
  readable: ReadableStream<Uint8Array>,
  map: (error: unknown) => unknown,
): ReadableStream<Uint8Array> {
  const reader = readable.getReader();
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        let next: ReadableStreamReadResult<Uint8Array>;
        try {
          next = await reader.read();
        } catch (error) {
          throw map(error);
        }
        if (next.done) controller.close();
        else controller.enqueue(next.value);
      },
      cancel: (reason) => reader.cancel(reason),
    },
    { highWaterMark: 0 },
  );
}

/** The header read, shared by every caller while it runs; ended when the last one gives up. */
interface Inspection {
  promise: Promise<{ inspection: CiphertextInspection; vk: string }>;
  controller: AbortController;
  waiters: number;
  settled: boolean;
}

/**
 * A ciphertext to open, as `pg.open()` returns it: lazy, reusable. inspect() reads only its
 * header; decrypt() gets the recipient's key (a QR scan, or the cache) and delivers the plaintext
 * the way `output` asks, never holding a file in memory unless asked for bytes.
 */
export class Opened {
  private inspection: Inspection | undefined;

  /** Use `pg.open()`. @internal */
  constructor(
    private readonly input: OpenInput,
    private readonly parts: OpenedParts,
  ) {
    const kinds = ['uuid', 'url', 'blob', 'data'].filter((k) => k in input);
    if (kinds.length !== 1) throw invalidInput('open: give exactly one of uuid, url, blob, data');
    if ('uuid' in input && (typeof input.uuid !== 'string' || !/^[0-9a-f-]{36}$/i.test(input.uuid)))
      throw invalidInput('open: uuid must be an upload id (a UUID)');
    if ('blob' in input && !(input.blob instanceof Blob)) throw invalidInput('open: blob must be a Blob or File');
    if ('data' in input && !(input.data instanceof Uint8Array)) throw invalidInput('open: data must be a Uint8Array');
  }

  /** Reads the header: the recipients and the sender the file claims. */
  async inspect(options: InspectOptions = {}): Promise<InspectResult> {
    if (typeof options !== 'object' || options === null) throw invalidInput('inspect: expected an object');
    const { inspection } = await this.inspected(this.transfer(options.signal ?? this.input.signal));
    return {
      recipients: [...inspection.recipients.keys()],
      policies: new Map(inspection.recipients),
      sender: inspection.sender,
    };
  }

  /**
   * Decrypts for one recipient: their key from the cache, or a Yivi session shown in `element`
   * (or handed to `onSession`, or run by `session`), then the plaintext by `output`.
   */
  decrypt(options: DecryptInput & { output: 'save' }): Promise<SavedResult>;
  decrypt(options: DecryptInput & { output: 'stream' }): Promise<StreamResult>;
  decrypt(options: DecryptInput & { output: 'bytes' }): Promise<BytesResult>;
  decrypt(options: DecryptInput & { output: 'entries' }): Promise<EntriesResult>;
  decrypt(options?: DecryptInput): Promise<DecryptResult>;
  async decrypt(options: DecryptInput = {}): Promise<DecryptResult> {
    if (typeof options !== 'object' || options === null) throw invalidInput('decrypt: expected an object');
    const signal = options.signal ?? this.input.signal;
    const output = options.output ?? (this.parts.serviceWorker !== undefined ? 'save' : 'bytes');
    if (!['save', 'stream', 'bytes', 'entries'].includes(output))
      throw invalidInput('decrypt: output is one of save, stream, bytes, entries');
    if (output === 'save' && this.parts.serviceWorker === undefined) {
      throw new ClientError(
        ClientErrorCode.NO_SERVICE_WORKER,
        "decrypt: output 'save' needs the decrypting service worker: configure serviceWorker (postguard-ts/sw/script)",
      );
    }
    const { inspection, vk } = await this.inspected(this.transfer(signal));
    const recipientId = chooseRecipient(inspection.recipients, options.recipient);
    const keys = await this.parts.pkg.decryptionKey({
      recipientId,
      policy: inspection.recipients.get(recipientId)!,
      element: options.element,
      onSession: options.onSession,
      session: options.session,
      enableCache: options.enableCache,
      signal,
    });
    // The deadline counts from here: the time the scan took is the user's, not the download's.
    const transfer = this.transfer(signal);
    try {
      // With a key set, the one user key that opens this file is found from the header (a KEM
      // decapsulation per key tried), so every output below takes one key as before.
      const { usk, keyId } = await this.userKey(inspection, recipientId, keys);
      const under = keyId === undefined ? {} : { keyId };
      switch (output) {
        case 'save':
          return { ...(await this.save(recipientId, usk, vk, options, signal)), ...under };
        case 'entries':
          return { ...(await this.entries(recipientId, usk, vk, transfer)), ...under };
        case 'stream':
          return { ...(await this.stream(recipientId, usk, vk, options, transfer)), ...under };
        case 'bytes':
          return { ...(await this.bytes(recipientId, usk, vk, options, transfer)), ...under };
      }
    } catch (error) {
      // The service worker's save has no deadline of ours: only the caller's signal counts there.
      throw this.failure(error, output === 'save' ? transferOf(signal, 0) : transfer);
    }
    throw invalidInput('decrypt: unknown output');
  }

  private async userKey(
    inspection: CiphertextInspection,
    recipientId: string,
    keys: UserKeys,
  ): Promise<{ usk: string; keyId?: string }> {
    if (typeof keys === 'string') return { usk: keys };
    if (!Array.isArray(keys)) throw invalidInput('decrypt: the PKG gave no user key');
    const { userKeyForInspection } = await detached();
    const found = await userKeyForInspection(inspection, recipientId, keys);
    return { usk: found.key, keyId: found.id };
  }

  private transfer(signal: AbortSignal | undefined): Transfer {
    return transferOf(signal, this.parts.config.timeouts.transferMs);
  }

  private failure(error: unknown, transfer: Transfer | undefined): unknown {
    return failure(error, transfer, this.location() !== undefined);
  }

  /**
   * The header, read once for every caller: each waits with its own signal (and deadline), and
   * the read itself ends when `open()`'s signal fires or every caller waiting for it gave up.
   */
  private async inspected(transfer: Transfer): Promise<{ inspection: CiphertextInspection; vk: string }> {
    let run = this.inspection;
    if (run === undefined) {
      const link = linked(this.input.signal);
      const signal = link.controller.signal;
      const created: Inspection = {
        promise: (async () => {
          const vks: VerifyingKeys = await this.parts.pkg.verificationKeys(signal);
          const source = await this.headerSource(signal);
          const { inspectCiphertext } = await detached();
          const inspection = await inspectCiphertext(source, { vk: vks });
          // The one verifying key the header verified under goes on to the outputs.
          const vk = typeof vks === 'string' ? vks : (vks.find((c) => c.id === inspection.verifyingKeyId)?.key ?? '');
          return { inspection, vk };
        })(),
        controller: link.controller,
        waiters: 0,
        settled: false,
      };
      // A failure (the network, an abort) is not remembered: the next call tries again.
      created.promise
        .catch(() => {
          if (this.inspection === created) this.inspection = undefined;
        })
        .finally(() => {
          created.settled = true;
          link.release();
        });
      run = this.inspection = created;
    }
    const mine = run;
    mine.waiters += 1;
    try {
      return await bounded(mine.promise, transfer.signal, undefined, () => new PostGuardError(ErrorCode.CANCELLED, ''));
    } catch (error) {
      throw this.failure(error, transfer);
    } finally {
      mine.waiters -= 1;
      if (mine.waiters === 0 && !mine.settled) {
        mine.controller.abort(transfer.signal?.reason);
        if (this.inspection === mine) this.inspection = undefined;
      }
    }
  }

  /** The ciphertext's URL and request headers, for an upload id or a URL. */
  private location(): { url: string; headers: Record<string, string> } | undefined {
    const input = this.input;
    if ('uuid' in input) return { url: `${this.parts.config.storageUrl}/filedownload/${input.uuid}`, headers: {} };
    if ('url' in input) return { url: String(input.url), headers: input.headers ?? {} };
    return undefined;
  }

  private blob(): Blob | undefined {
    const input = this.input;
    if ('blob' in input) return input.blob;
    if ('data' in input) return new Blob([input.data as Uint8Array<ArrayBuffer>]);
    return undefined;
  }

  /** For the header only: a Blob is read by spans; a URL as a stream that inspection cancels after the header. */
  private async headerSource(signal: AbortSignal | undefined): Promise<Blob | ReadableStream<Uint8Array>> {
    const blob = this.blob();
    if (blob !== undefined) return blob;
    return (await this.download(signal)).readable;
  }

  private async download(
    signal: AbortSignal | undefined,
  ): Promise<{ readable: ReadableStream<Uint8Array>; size: number | undefined }> {
    const where = this.location()!;
    try {
      const { config } = this.parts;
      const { resumableDownload } = await downloads();
      return await resumableDownload(where.url, {
        fetch: config.fetch as typeof fetch,
        headers: where.headers,
        stallMs: config.timeouts.idleMs,
        backoff: { initialMs: config.retry.initialDelayMs, maxMs: config.retry.maxDelayMs },
        ...(signal === undefined ? {} : { signal }),
      });
    } catch (error) {
      const refused = failure(error, undefined);
      if (refused instanceof ClientError && refused.code === ClientErrorCode.REDIRECT_REFUSED) throw refused;
      if (error instanceof PostGuardError && error.code !== ErrorCode.CANCELLED) {
        throw new ClientError(ClientErrorCode.DOWNLOAD_FAILED, `the file could not be fetched: ${error.message}`, {
          cause: error,
          url: where.url,
        });
      }
      throw error;
    }
  }

  /** The whole ciphertext as a stream: a Blob's, or a download that resumes after a dropped connection. */
  private async ciphertext(signal: AbortSignal | undefined): Promise<ReadableStream<Uint8Array>> {
    const blob = this.blob();
    if (blob !== undefined) return blob.stream();
    return (await this.download(signal)).readable;
  }

  private async stream(
    recipientId: string,
    usk: string,
    vk: string,
    options: DecryptInput,
    transfer: Transfer,
  ): Promise<StreamResult> {
    const unsealer = await this.parts.engine().StreamUnsealer.new(await this.ciphertext(transfer.signal), vk);
    const pipe = new TransformStream<Uint8Array, Uint8Array>();
    let delivered = 0;
    const counted = pipe.readable.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          delivered += chunk.length;
          options.onProgress?.(delivered);
          controller.enqueue(chunk);
        },
      }),
    );
    const map = (error: unknown) => this.failure(error, transfer);
    const sender = unsealer.unseal(recipientId, usk, pipe.writable).then(
      (result: VerificationResult) => senderReport(result),
      (error: unknown) => Promise.reject(map(error)),
    );
    sender.catch(() => undefined);
    return { output: 'stream', readable: mappedErrors(counted, map), sender };
  }

  private async bytes(
    recipientId: string,
    usk: string,
    vk: string,
    options: DecryptInput,
    transfer: Transfer,
  ): Promise<BytesResult> {
    const max = options.maxBytes ?? DEFAULT_MAX_BYTES;
    const { readable, sender } = await this.stream(recipientId, usk, vk, options, transfer);
    const chunks: Uint8Array[] = [];
    let length = 0;
    const reader = readable.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      length += value.length;
      if (length > max) {
        await reader.cancel();
        throw new ClientError(
          ClientErrorCode.TOO_LARGE_FOR_MEMORY,
          `the plaintext is over ${max} bytes: decrypt it with output 'stream', 'save' or 'entries'`,
        );
      }
      chunks.push(value);
    }
    const plaintext = new Uint8Array(length);
    let at = 0;
    for (const c of chunks) {
      plaintext.set(c, at);
      at += c.length;
    }
    return { output: 'bytes', plaintext, sender: await sender };
  }

  private async save(
    recipientId: string,
    usk: string,
    vk: string,
    options: DecryptInput,
    signal: AbortSignal | undefined,
  ): Promise<SavedResult> {
    const script = String(this.parts.serviceWorker);
    const { prepareDownload, registerDecryptingServiceWorker, triggerDownload } = await serviceWorker();
    const registration = registrations.get(script) ?? registerDecryptingServiceWorker(script);
    registrations.set(script, registration);
    const untilAborted = <T>(work: Promise<T>) =>
      bounded(
        work,
        signal,
        undefined,
        () => aborted(),
        (s) => aborted(s.reason),
      );
    await untilAborted(registration);
    const where = this.location();
    const source = where?.url ?? this.blob()!;
    const bundle = 'uuid' in this.input;
    const download = await untilAborted(
      prepareDownload({
        source,
        ...(where === undefined || Object.keys(where.headers).length === 0 ? {} : { headers: where.headers }),
        recipientId,
        usk,
        vk,
        filename: options.filename ?? (bundle ? 'postguard-files.zip' : 'postguard-file'),
        ...(options.onProgress === undefined ? {} : { onProgress: options.onProgress }),
      }),
    );
    if (signal?.aborted) {
      download.revoke();
      throw aborted(signal.reason);
    }
    triggerDownload(download.url, download.done);
    // The caller's abort reaches the worker (a revoke ends the save from its source's first byte on).
    const revoke = () => download.revoke();
    signal?.addEventListener('abort', revoke, { once: true });
    try {
      return { output: 'save', sender: senderReport(await untilAborted(download.done)) };
    } finally {
      signal?.removeEventListener('abort', revoke);
    }
  }

  private async entries(recipientId: string, usk: string, vk: string, transfer: Transfer): Promise<EntriesResult> {
    const { signal } = transfer;
    const [{ blobSource, openRandomAccess }, zip] = await bundles();
    const where = this.location();
    const { fetch, timeouts } = this.parts.config;
    const source: ByteSource | RangedUrl =
      where === undefined
        ? blobSource(this.blob()!)
        : // Each ranged read has the idle window of lib/net (16 KiB per stallMs): a drip ends it.
          { url: where.url, headers: where.headers, fetch: fetch as typeof globalThis.fetch };
    const file = await openRandomAccess(source, {
      vk,
      recipientId,
      usk,
      stallMs: timeouts.idleMs,
      ...(signal === undefined ? {} : { signal }),
    });
    const readable = zip.zipFromRandomAccess(file);
    const listed = await zip.listZipEntries(readable, signal === undefined ? {} : { signal });
    // A folder is left out only when it carries nothing: an entry flagged as a folder that has data
    // is listed (a saved bundle has its bytes, so the list must show them too).
    const entries = listed
      .filter((e) => !e.directory || e.size > 0 || e.compressedSize > 0)
      .map((entry): BundleEntry => bundleEntry(readable, entry, zip.zipEntryStream));
    return { output: 'entries', entries, sender: file.claimedSender() };
  }
}

function bundleEntry(
  file: ZipReadable,
  entry: ZipEntry,
  zipEntryStream: (file: ZipReadable, entry: ZipEntry) => ReadableStream<Uint8Array>,
): BundleEntry {
  return {
    name: entry.name,
    path: entry.path,
    supported: entry.supported,
    size: entry.size,
    stream: () => zipEntryStream(file, entry),
    blob: async (type) =>
      new Response(zipEntryStream(file, entry)).blob().then((b) => (type === undefined ? b : new Blob([b], { type }))),
  };
}

/** pg-js's rule: the named recipient if the file has it; else the only one; else say which there are. */
export function chooseRecipient(recipients: Map<string, Policy>, wanted: string | undefined): string {
  const ids = [...recipients.keys()];
  if (wanted !== undefined) {
    if (recipients.has(wanted)) return wanted;
    throw new ClientError(
      ClientErrorCode.RECIPIENT_UNKNOWN,
      `${JSON.stringify(wanted)} is not a recipient of this file; it is for ${ids.map((id) => JSON.stringify(id)).join(', ')}`,
    );
  }
  if (ids.length === 1) return ids[0]!;
  throw new ClientError(
    ClientErrorCode.RECIPIENT_UNKNOWN,
    `this file has ${ids.length} recipients: choose one with decrypt({ recipient }) (${ids.map((id) => JSON.stringify(id)).join(', ')})`,
  );
}
