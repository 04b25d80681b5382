import type { CiphertextInspection } from '../lib/detached.js';
import { PostGuardError } from '../lib/errors.js';
import type { Policy } from '../lib/policy.js';
import type { ByteSource, RangedUrl } from '../lib/random-access.js';
import { senderReport, type SenderReport } from '../lib/sender.js';
import type { VerificationResult } from '../lib/signatures.js';
import type { ElementLike } from '../lib/web-types.js';
import type { ResolvedConfig } from './config.js';
import type { CryptoEngine } from './engine.js';
import { ClientError, ClientErrorCode, invalidInput } from './errors.js';
import type { ClientPkg } from './pkg.js';
import type { SessionCallback } from './sign.js';
import type { ZipEntry, ZipReadable } from './zip-entries.js';
import type { IdentitySession } from '../lib/pkg/index.js';

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
  /** Aborts (`ABORTED`). */
  signal?: AbortSignal;
}

/** `'save'`: the file went to the browser's downloads. */
export interface SavedResult {
  /** Which output this is. */
  output: 'save';
  /** Who sealed it, as verified once the last byte authenticated. */
  sender: SenderReport;
}

/** `'stream'`: the plaintext, released segment by segment as each authenticates. */
export interface StreamResult {
  /** Which output this is. */
  output: 'stream';
  /** Errors with a ClientError if anything fails; closes only after the final segment authenticated. */
  readable: ReadableStream<Uint8Array>;
  /** Who sealed it: resolves once the stream was read to its end and verified. */
  sender: Promise<SenderReport>;
}

/** `'bytes'`: the whole plaintext. */
export interface BytesResult {
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
   * A name safe to show and save under: the last path segment, without control or bidi
   * characters. Two entries can share one (`a/x`, `b/x`): make it unique before saving both.
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
export interface EntriesResult {
  /** Which output this is. */
  output: 'entries';
  /** The bundle's files, in the ZIP's order (folders left out). */
  entries: BundleEntry[];
  /**
   * The sender the file claims, worded for a part of it: each entry's segments authenticated under
   * the file's key, the sender's signatures over the whole not checked (read the whole for that).
   */
  sender: SenderReport;
}

/** What `decrypt()` resolves with, by `output`. */
export type DecryptResult = SavedResult | StreamResult | BytesResult | EntriesResult;

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
const downloads = () => import('../lib/resumable-download.js');
const serviceWorker = () => import('../worker/download.js');
const bundles = () => Promise.all([import('../lib/random-access.js'), import('./zip-entries.js')]);
const registrations = new Map<string, Promise<unknown>>();

/** Failures while opening, as one code with the library's error (and its own code) as the cause. */
function decryptionFailed(error: unknown): unknown {
  if (error instanceof ClientError) return error;
  if (error instanceof PostGuardError) {
    if (error.code === 'CANCELLED')
      return new ClientError(ClientErrorCode.ABORTED, 'the operation was aborted', { cause: error });
    return new ClientError(ClientErrorCode.DECRYPTION_FAILED, `the file could not be opened: ${error.message}`, {
      cause: error,
    });
  }
  return error;
}

/**
 * A ciphertext to open, as `pg.open()` returns it: lazy, reusable. inspect() reads only its
 * header; decrypt() gets the recipient's key (a QR scan, or the cache) and delivers the plaintext
 * the way `output` asks, never holding a file in memory unless asked for bytes.
 */
export class Opened {
  private inspection: Promise<{ inspection: CiphertextInspection; vk: string }> | undefined;

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
  async inspect(): Promise<InspectResult> {
    const { inspection } = await this.inspected();
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
    const { inspection, vk } = await this.inspected();
    const recipientId = chooseRecipient(inspection.recipients, options.recipient);
    const usk = await this.parts.pkg.decryptionKey({
      recipientId,
      policy: inspection.recipients.get(recipientId)!,
      element: options.element,
      onSession: options.onSession,
      session: options.session,
      enableCache: options.enableCache,
      signal,
    });
    try {
      switch (output) {
        case 'save':
          return await this.save(recipientId, usk, vk, options);
        case 'entries':
          return await this.entries(recipientId, usk, vk, signal);
        case 'stream':
          return await this.stream(recipientId, usk, vk, options, signal);
        case 'bytes':
          return await this.bytes(recipientId, usk, vk, options, signal);
      }
    } catch (error) {
      throw decryptionFailed(error);
    }
    throw invalidInput('decrypt: unknown output');
  }

  private inspected(): Promise<{ inspection: CiphertextInspection; vk: string }> {
    const run = async () => {
      const signal = this.input.signal;
      const vk = await this.parts.pkg.verificationKey(signal);
      const source = await this.headerSource(signal);
      try {
        const { inspectCiphertext } = await detached();
        return { inspection: await inspectCiphertext(source, { vk }), vk };
      } catch (error) {
        throw decryptionFailed(error);
      }
    };
    const pending = (this.inspection ??= run());
    // A failure (the network, an abort) is not remembered: the next call tries again.
    pending.catch(() => {
      if (this.inspection === pending) this.inspection = undefined;
    });
    return pending;
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
      const { resumableDownload } = await downloads();
      return await resumableDownload(where.url, {
        fetch: this.parts.config.fetch as typeof fetch,
        headers: where.headers,
        ...(signal === undefined ? {} : { signal }),
      });
    } catch (error) {
      if (error instanceof PostGuardError && error.code !== 'CANCELLED') {
        throw new ClientError(ClientErrorCode.DOWNLOAD_FAILED, `the file could not be fetched: ${error.message}`, {
          cause: error,
          url: where.url,
        });
      }
      throw decryptionFailed(error);
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
    signal: AbortSignal | undefined,
  ): Promise<StreamResult> {
    const unsealer = await this.parts.engine().StreamUnsealer.new(await this.ciphertext(signal), vk);
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
    const sender = unsealer.unseal(recipientId, usk, pipe.writable).then(
      (result: VerificationResult) => senderReport(result),
      (error: unknown) => Promise.reject(decryptionFailed(error)),
    );
    sender.catch(() => undefined);
    return { output: 'stream', readable: counted, sender };
  }

  private async bytes(
    recipientId: string,
    usk: string,
    vk: string,
    options: DecryptInput,
    signal: AbortSignal | undefined,
  ): Promise<BytesResult> {
    const max = options.maxBytes ?? DEFAULT_MAX_BYTES;
    const { readable, sender } = await this.stream(recipientId, usk, vk, options, signal);
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

  private async save(recipientId: string, usk: string, vk: string, options: DecryptInput): Promise<SavedResult> {
    const script = String(this.parts.serviceWorker);
    const { prepareDownload, registerDecryptingServiceWorker, triggerDownload } = await serviceWorker();
    const registration = registrations.get(script) ?? registerDecryptingServiceWorker(script);
    registrations.set(script, registration);
    await registration;
    const where = this.location();
    const source = where?.url ?? this.blob()!;
    const bundle = 'uuid' in this.input;
    const download = await prepareDownload({
      source,
      ...(where === undefined || Object.keys(where.headers).length === 0 ? {} : { headers: where.headers }),
      recipientId,
      usk,
      vk,
      filename: options.filename ?? (bundle ? 'postguard-files.zip' : 'postguard-file'),
      ...(options.onProgress === undefined ? {} : { onProgress: options.onProgress }),
    });
    triggerDownload(download.url, download.done);
    return { output: 'save', sender: senderReport(await download.done) };
  }

  private async entries(
    recipientId: string,
    usk: string,
    vk: string,
    signal: AbortSignal | undefined,
  ): Promise<EntriesResult> {
    const [{ blobSource, openRandomAccess }, zip] = await bundles();
    const where = this.location();
    const source: ByteSource | RangedUrl =
      where === undefined
        ? blobSource(this.blob()!)
        : { url: where.url, headers: where.headers, fetch: this.parts.config.fetch as typeof fetch };
    const file = await openRandomAccess(source, {
      vk,
      recipientId,
      usk,
      ...(signal === undefined ? {} : { signal }),
    });
    const readable = zip.zipFromRandomAccess(file);
    const listed = await zip.listZipEntries(readable, signal === undefined ? {} : { signal });
    const entries = listed
      .filter((e) => !e.directory)
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
