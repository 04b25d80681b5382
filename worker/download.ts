import type { Policy } from '../lib/policy.js';
import type { VerificationResult } from '../lib/signatures.js';
import { ErrorCode, PostGuardError } from '../lib/errors.js';
import { reviveError } from './errors.js';
import { pageDecrypterPort } from './page-decrypter.js';
import { readableToPort } from './port-stream.js';
import {
  MESSAGE_KEEPALIVE,
  MESSAGE_READ,
  MESSAGE_REGISTER,
  MESSAGE_REVOKE,
  type DownloadEvent,
  type DownloadFields,
  type RegisterRequest,
  type WireSource,
} from './sw-protocol.js';

/**
 * The page's side of the decrypting service worker (sw.ts): register the worker once, then hand
 * it a ciphertext and keys and get a URL whose response is the plaintext, decrypted as it streams.
 *
 *   await registerDecryptingServiceWorker('/postguard-sw.js');
 *   const dl = await prepareDownload({ source: blobOrUrlOrStream, recipientId, usk, vk, filename: 'report.pdf' });
 *   triggerDownload(dl.url, dl.done);           // a hidden iframe; or fetch(dl.url), or <iframe src> to preview
 *   const sender = await dl.done;               // rejects with the coded error if it failed
 */

export { DOWNLOAD_PATH } from './sw-protocol.js';
export type { RegisterRequest, DownloadFields } from './sw-protocol.js';

/** What `prepareDownload` decrypts, for whom, and how the response is served. */
export interface DownloadOptions extends DownloadFields {
  /** The ciphertext: a URL (fetched by the worker), a Blob/File, or a stream (relayed to the worker, port-stream.ts). */
  source: string | URL | Blob | ReadableStream<Uint8Array>;
  /** For a URL source: request headers (e.g. Authorization) and credentials mode. */
  headers?: Record<string, string>;
  /** For a URL source: the fetch's credentials mode. */
  credentials?: RequestCredentials;
  /** A range response of a seekable download has started (its bytes were not checked against the sender's signature). */
  onRange?: (range: ServedRange) => void;
  /** Plaintext bytes delivered so far (a few times a second). */
  onProgress?: (bytes: number) => void;
  /** Plaintext bytes authenticated so far, before the response starts (see `verifyFirst`). */
  onVerifying?: (bytes: number) => void;
  /** How long to wait for the service worker to accept the registration. 10 s. */
  registrationTimeoutMs?: number;
  /**
   * Let this page's crypto worker (a `PostGuardWorker` it started) decrypt a Blob or URL download
   * for the service worker, which then only moves plaintext; it takes over by itself if the page
   * goes away mid-file. Default false: measured, it was no faster (worker/README.md, "Where a
   * service-worker download's time goes").
   */
  offload?: boolean;
}

/** A range of the plaintext that a seekable download served without verifying the sender's signatures. */
export interface ServedRange {
  /** First and last byte (inclusive) of the plaintext, of `total`. */
  start: number;
  /** Last byte served (inclusive). */
  end: number;
  /** The plaintext's length. */
  total: number;
  /** Every segment authenticated under the file's key; the sender's signatures not verified. */
  verified: 'segments';
  /**
   * The sender the file's header names: a claim until a full (non-range) read verifies the
   * content's signatures. Show it with `claimedSenderReport(claimedSender, 'range')`.
   */
  claimedSender: Policy;
}

/** A registered download: its URL, and a promise of the verified sender. */
export interface PreparedDownload {
  /** The registration's random id, part of the URL. */
  id: string;
  /** Same-origin URL under the worker's scope; works once (a seekable one: until its lifetime ends). */
  url: string;
  /** Whether the URL answers Range requests and many requests (asked with `seekable`, and a Blob or URL source). */
  seekable: boolean;
  /**
   * The sender's verified identity once the last byte authenticated; rejects with a coded error.
   * Seekable: resolves when a full (non-range) response verified the whole file; rejects when any
   * response fails (TAMPERED in a range, ...), or with INVALID_STATE when the lifetime ends (or
   * `revoke()`) before a full response did.
   */
  done: Promise<VerificationResult>;
  /**
   * Forgets the registration, or ends its answer if it is being fetched (the worker stops reading
   * the source; `done` rejects with CANCELLED): what a caller's abort sends.
   */
  revoke(): void;
  /**
   * `fetch(url)`, whose body acknowledges to the worker what it has read (the `paced` protocol;
   * for a download prepared without `paced` it is a plain fetch).
   */
  fetch(init?: RequestInit): Promise<Response>;
}

/**
 * Whether a page's crypto worker decrypts its Blob and URL downloads unless told otherwise
 * (`offload`). Off: on the 2-core test machine it was never faster than the service worker
 * decrypting on its own thread, in any engine (worker/README.md).
 */
const OFFLOAD_BY_DEFAULT = false;

/** Longest silence from a worker answering a download (it sends a heartbeat every 10 s). */
const SILENCE_MS = 45_000;

/** How often a paced reader acknowledges: after this many bytes read. */
const ACK_EVERY = 256 * 1024;

/** `response` with a body that reports the bytes read so far on `port` as they are read. */
function acknowledging(response: Response, port: MessagePort): Response {
  if (response.body === null) return response;
  let read = 0;
  let acknowledged = 0;
  const ack = () => {
    acknowledged = read;
    try {
      port.postMessage({ type: MESSAGE_READ, bytes: read });
    } catch {
      // the download ended
    }
  };
  const counted = response.body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>(
      {
        transform(chunk, controller) {
          controller.enqueue(chunk);
          read += chunk.byteLength;
          if (read - acknowledged >= ACK_EVERY) ack();
        },
        flush: ack,
      },
      undefined,
      { highWaterMark: 0 },
    ),
  );
  return new Response(counted, { status: response.status, statusText: response.statusText, headers: response.headers });
}

function container(): ServiceWorkerContainer {
  if (typeof navigator === 'undefined' || !('serviceWorker' in navigator)) {
    throw new Error('service workers are not available here (they need a secure context: https or localhost)');
  }
  return navigator.serviceWorker;
}

/**
 * Registers the decrypting service worker and waits until it controls this page (it claims open
 * pages when it activates). `scriptUrl` is the built postguard-sw.js; its location sets the
 * default scope.
 */
export async function registerDecryptingServiceWorker(
  scriptUrl: string | URL,
  options: RegistrationOptions = {},
): Promise<ServiceWorkerRegistration> {
  const sw = container();
  const registration = await sw.register(scriptUrl, options);
  if (sw.controller === null) {
    await new Promise<void>((resolve) => sw.addEventListener('controllerchange', () => resolve(), { once: true }));
  }
  return registration;
}

async function activeWorker(): Promise<ServiceWorker> {
  const sw = container();
  const registration = await sw.ready;
  const worker = sw.controller ?? registration.active;
  if (worker === null) throw new Error('no active decrypting service worker');
  return worker;
}

let pendingDownloads = 0;
let keepAlive: ReturnType<typeof setInterval> | undefined;

/** Browsers stop idle service workers; a message now and then keeps a long download's worker up. */
function trackDownload(worker: ServiceWorker, done: Promise<unknown>): void {
  pendingDownloads++;
  keepAlive ??= setInterval(() => worker.postMessage({ type: MESSAGE_KEEPALIVE }), 20_000);
  void done
    .catch(() => undefined)
    .finally(() => {
      if (--pendingDownloads === 0 && keepAlive !== undefined) {
        clearInterval(keepAlive);
        keepAlive = undefined;
      }
    });
}

function wireSource(options: DownloadOptions): { source: WireSource; transfer: Transferable[] } {
  const { source } = options;
  if (typeof source === 'string' || source instanceof URL) {
    const url = new URL(String(source), globalThis.location?.href).href;
    const wire: WireSource = { kind: 'url', url };
    if (options.headers !== undefined) wire.headers = options.headers;
    if (options.credentials !== undefined) wire.credentials = options.credentials;
    return { source: wire, transfer: [] };
  }
  if (source instanceof Blob) return { source: { kind: 'blob', blob: source }, transfer: [] };
  if (source instanceof ReadableStream) {
    // Relayed rather than transferred: the stream crosses to another thread as it does to the crypto worker.
    const port = readableToPort(source);
    return { source: { kind: 'relay', port }, transfer: [port] };
  }
  throw new TypeError('source must be a URL, a Blob or a ReadableStream');
}

/** The registration message for `options`, and what it hands over (a relayed stream's port, the page's decrypter). */
async function registrationOf(
  options: DownloadOptions,
): Promise<{ request: RegisterRequest; transfer: Transferable[] }> {
  const { source, transfer } = wireSource(options);
  const request: RegisterRequest = {
    source,
    recipientId: options.recipientId,
    usk: options.usk,
    vk: options.vk,
    filename: options.filename,
  };
  if (options.contentType !== undefined) request.contentType = options.contentType;
  if (options.disposition !== undefined) request.disposition = options.disposition;
  if (options.size !== undefined) request.size = options.size;
  if (options.ttlMs !== undefined) request.ttlMs = options.ttlMs;
  if (options.verifyFirst !== undefined) request.verifyFirst = options.verifyFirst;
  if (options.paced !== undefined) request.paced = options.paced;
  if (options.seekable !== undefined) request.seekable = options.seekable;
  // A source the service worker can read again, should this page go away mid-file, is decrypted by
  // this page's crypto worker, if it has one: the service worker then only moves plaintext.
  const rereadable = source.kind === 'blob' || source.kind === 'url';
  const decrypter = rereadable && (options.offload ?? OFFLOAD_BY_DEFAULT) ? await pageDecrypterPort() : undefined;
  if (decrypter !== undefined) {
    request.decrypter = decrypter;
    transfer.push(decrypter);
  }
  return { request, transfer };
}

/**
 * This page's end of one registration: the worker's messages turned into the caller's callbacks,
 * `done` and `lifetime`, with a watchdog on the worker's silence. A browser may stop the worker in
 * the middle (a crash, a limit): then no message ever comes. Until the URL is fetched the
 * registration's lifetime bounds the silence; once it is being answered, the worker speaks at
 * least every 10 s (its heartbeat).
 */
class RegistrationWatch {
  readonly channel = new MessageChannel();
  readonly done: Promise<VerificationResult>;
  /** A seekable registration lives until the worker ends it (its lifetime, a failure, a revoke), whatever `done` did. */
  readonly lifetime: Promise<void>;
  private settle!: { resolve: (r: VerificationResult) => void; reject: (e: unknown) => void };
  private ended!: () => void;
  private watchdog: ReturnType<typeof setTimeout> | undefined;
  /** What the worker made of `seekable` (a stream source cannot seek: it is then a one-shot download). */
  private seekable: boolean;
  private readonly ttl: number;

  constructor(private readonly options: DownloadOptions) {
    this.done = new Promise<VerificationResult>((resolve, reject) => (this.settle = { resolve, reject }));
    this.done.catch(() => undefined);
    this.lifetime = new Promise<void>((resolve) => (this.ended = resolve));
    this.seekable = options.seekable === true;
    this.ttl = Math.min(60 * 60_000, options.ttlMs ?? (options.seekable === true ? 30 : 5) * 60_000);
    void this.done.catch(() => undefined).finally(() => clearTimeout(this.watchdog));
  }

  /** The worker's answer to the registration; later messages go to the callbacks. */
  registered(): Promise<{ id: string; url: string; seekable: boolean }> {
    return new Promise((resolve, reject) => {
      this.channel.port1.onmessage = ({ data }: MessageEvent<DownloadEvent>) => {
        // A seekable URL may sit unread between a video's requests for as long as it lives.
        if (data.type === 'registered' || !this.seekable)
          this.silence(data.type === 'registered' ? this.ttl + SILENCE_MS : SILENCE_MS);
        if (data.type !== 'registered') return this.event(data);
        if (data.ok) {
          this.seekable = data.seekable === true;
          return resolve({ id: data.id, url: data.url, seekable: this.seekable });
        }
        const error = reviveError(data.error);
        reject(error);
        this.settle.reject(error);
        this.channel.port1.close();
      };
    });
  }

  /** The worker says when a seekable registration's lifetime is over; this bounds it should the worker be gone. */
  boundLifetime(): void {
    // Each request the worker answers starts the lifetime again there, and its messages here.
    let bound = setTimeout(this.ended, this.ttl + SILENCE_MS);
    const previous = this.channel.port1.onmessage;
    this.channel.port1.onmessage = (event: MessageEvent<DownloadEvent>) => {
      clearTimeout(bound);
      bound = setTimeout(this.ended, this.ttl + SILENCE_MS);
      previous?.call(this.channel.port1, event);
    };
    void this.lifetime.then(() => clearTimeout(bound));
  }

  private event(data: Exclude<DownloadEvent, { type: 'registered' }>): void {
    const { options } = this;
    switch (data.type) {
      case 'verifying':
        options.onVerifying?.(data.bytes);
        break;
      case 'progress':
        options.onProgress?.(data.bytes);
        break;
      case 'done':
        options.onProgress?.(data.bytes);
        this.settle.resolve(data.result);
        // A seekable download goes on answering (and may still fail in a later range).
        if (!this.seekable) this.channel.port1.close();
        break;
      case 'range':
        options.onRange?.({
          start: data.start,
          end: data.end,
          total: data.total,
          verified: 'segments',
          claimedSender: data.sender,
        });
        break;
      case 'error':
        this.settle.reject(reviveError(data.error));
        this.channel.port1.close();
        this.ended();
        break;
    }
  }

  private silence(ms: number): void {
    clearTimeout(this.watchdog);
    this.watchdog = setTimeout(() => {
      this.settle.reject(
        new PostGuardError(
          ErrorCode.SOURCE_FAILED,
          `the service worker stopped answering (nothing for ${Math.round(ms / 1000)} s)`,
        ),
      );
      this.channel.port1.close();
      this.ended();
    }, ms);
  }
}

/** `registered`, or an error when the worker does not answer within `ms` (it may not be our decrypting worker). */
async function answeredWithin<T>(registered: Promise<T>, port: MessagePort, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      port.close();
      reject(
        new Error('the service worker did not answer the registration (is it the postguard-ts decrypting worker?)'),
      );
    }, ms);
  });
  return Promise.race([registered, timeout]).finally(() => clearTimeout(timer));
}

/** Registers a ciphertext with the service worker; fetch the returned URL to get the plaintext. */
export async function prepareDownload(options: DownloadOptions): Promise<PreparedDownload> {
  const worker = await activeWorker();
  const { request, transfer } = await registrationOf(options);
  const watch = new RegistrationWatch(options);
  const registered = watch.registered();
  worker.postMessage({ type: MESSAGE_REGISTER, request }, [watch.channel.port2, ...transfer]);
  const { id, url, seekable } = await answeredWithin(
    registered,
    watch.channel.port1,
    options.registrationTimeoutMs ?? 10_000,
  );
  if (seekable) watch.boundLifetime();
  trackDownload(worker, seekable ? watch.lifetime : watch.done);
  return {
    id,
    url,
    seekable,
    done: watch.done,
    revoke: () => worker.postMessage({ type: MESSAGE_REVOKE, id }),
    fetch: async (init) => {
      const response = await fetch(url, init);
      return options.paced === true && response.ok ? acknowledging(response, watch.channel.port1) : response;
    },
  };
}

/**
 * Starts a browser download of a prepared URL by navigating a hidden iframe to it: navigations are
 * what a service worker answers (Chromium hands an <a download> click straight to its download
 * manager, past the service worker). The response's Content-Disposition names the file. The frame
 * is removed once `until` settles (pass the download's `done`), or after a minute.
 */
export function triggerDownload(url: string, until?: Promise<unknown>, minimumMs = 30_000): void {
  const frame = document.createElement('iframe');
  frame.hidden = true;
  frame.src = url;
  document.body.append(frame);
  // A small file can be complete before the browser has turned the frame's navigation into a
  // download, and removing the frame then cancels it: keep the frame at least `minimumMs`.
  const lingering = new Promise((resolve) => setTimeout(resolve, minimumMs));
  void Promise.allSettled([until ?? lingering, lingering]).then(() => frame.remove());
}
