import type { UserKeys, VerifyingKeys } from '../lib/unseal.js';
import type { Policy } from '../lib/policy.js';
import type { VerificationResult } from '../lib/signatures.js';

/**
 * The messages between a page (download.ts) and the decrypting service worker (sw-core.ts).
 *
 *   page → worker (postMessage to the service worker, a reply port attached):
 *     {type: 'postguard:register', request: RegisterRequest}
 *   worker → page, on the reply port:
 *     {type: 'registered', ok: true, id, url, seekable} | {type: 'registered', ok: false, error}
 *     then {type: 'verifying', bytes}* (plaintext authenticated before the response), {type: 'progress', bytes}*
 *     (plaintext sent), {type: 'alive'} every 10 s while answering, and {type: 'done', bytes, result} or
 *     {type: 'error', error}
 *     A seekable registration answers many requests: {type: 'range', ...} for each range response
 *     (served without the sender's signature checked), {type: 'done'} for each full response that
 *     verified, and one {type: 'error'} that ends it (a failure, its lifetime over, or revoked).
 *   page → worker: {type: 'postguard:revoke', id}, {type: 'postguard:keepalive'}
 *   page → worker, on the reply port, for a `paced` download: {type: 'postguard:read', bytes} (read so far)
 *
 * Errors are WireErrors (errors.ts). The id is 128 random bits: knowing the URL is the only
 * credential a fetch needs, and it works once (a seekable one: until its lifetime ends).
 */

/** Where download URLs live under the service worker's scope: `<scope>pg-download/<id>/<filename>`. */
export const DOWNLOAD_PATH = 'pg-download/';
export const MESSAGE_REGISTER = 'postguard:register';
export const MESSAGE_REVOKE = 'postguard:revoke';
export const MESSAGE_KEEPALIVE = 'postguard:keepalive';
export const MESSAGE_READ = 'postguard:read';

export type WireSource =
  | { kind: 'url'; url: string; headers?: Record<string, string>; credentials?: RequestCredentials }
  | { kind: 'blob'; blob: Blob }
  /** A page's stream relayed over a MessagePort (port-stream.ts readableToPort): what download.ts sends. */
  | { kind: 'relay'; port: MessagePort }
  /**
   * A transferred ReadableStream: what pages built before the relay sent in browsers that transfer
   * streams (a worker that took over such a page still answers it). Their MessagePort fallback
   * ('port', one chunk per round trip) spoke another protocol and is refused as an unknown kind.
   */
  | { kind: 'stream'; stream: ReadableStream<Uint8Array> };

/**
 * What a download decrypts for whom, and how its response is served: the fields a page's
 * `prepareDownload` options (download.ts DownloadOptions) and the registration it sends the worker
 * (RegisterRequest) share, written once.
 */
export interface DownloadFields {
  /** The recipient to decrypt for, as the header lists it. */
  recipientId: string;
  /**
   * That recipient's user secret key (base64), e.g. from `PkgClient.decryptionKey`, or the user
   * keys of the PKG's key set (`decryptionKey().usks`: each is tried). Held in the worker's memory
   * until the download ends or expires.
   */
  usk: UserKeys;
  /** The PKG's verification key (base64), e.g. from `PkgClient.verificationKey`, or its key set (`verificationKeys()`). */
  vk: VerifyingKeys;
  /** The name the browser saves the plaintext under (the last part of the URL, and Content-Disposition). */
  filename: string;
  /** The response's Content-Type; default application/octet-stream. */
  contentType?: string;
  /** `attachment` (save; the default) or `inline` (preview, e.g. in an iframe). */
  disposition?: 'attachment' | 'inline';
  /** Ciphertext bytes, for a stream source (Blob and URL sources know theirs): enables Content-Length. */
  size?: number;
  /**
   * How long the URL waits to be fetched (default 5 minutes); for a `seekable` download, how long it
   * lives after its last request (default 30 minutes: a video that plays or seeks keeps it). At most 1 hour.
   */
  ttlMs?: number;
  /**
   * Authenticate the whole file before its first byte is sent (default true), so a damaged file
   * never becomes a download: a file up to 16 MiB is held in the worker's memory, a larger Blob or
   * URL source is read twice (a URL is fetched twice). A larger stream source cannot be read twice
   * and streams after its first 16 MiB verified. False streams at once: a failure then errors a
   * download that has started, which Firefox and WebKit leave on disk (worker/README.md).
   */
  verifyFirst?: boolean;
  /**
   * Read through `PreparedDownload.fetch`, which tells the worker what this page has read, so the
   * worker decrypts at most a window (4 MiB) ahead of a slow reader. Firefox and WebKit otherwise
   * drain the response into their own buffers as fast as it is decrypted. Only for a page that
   * reads the body itself: a paced URL handed to a navigation or a media element stops after the
   * window.
   */
  paced?: boolean;
  /**
   * Answer Range requests, so that a `<video>` or `<audio>` previewing the file can seek: the URL
   * then answers any number of requests until none came for `ttlMs` (or `revoke()`). A range is
   * decrypted from just the segments that hold it, each authenticated under the file's key, but
   * the sender's signatures are verified only by a full (non-range) response. Only a Blob or a URL
   * whose server answers ranges can seek; a stream source is served once, whole. Not with `paced`.
   */
  seekable?: boolean;
}

/** What a page sends the service worker to register a download (`prepareDownload` builds it). */
export interface RegisterRequest extends DownloadFields {
  /** The ciphertext, in a form that crosses to the worker. */
  source: WireSource;
  /**
   * A port to the page's crypto worker (its `decrypterPort`), sent by a page that has one, for a
   * Blob or URL source: the worker then leaves the decryption to it (sw-offload.ts).
   */
  decrypter?: MessagePort;
}

/**
 * The service worker ↔ a page's crypto worker, on the `decrypter` port of a registration
 * (sw-offload.ts the service worker's side, offload-serve.ts the crypto worker's):
 *
 *   service worker → crypto worker, a reply port attached: OffloadOpen
 *   crypto worker → service worker, on the reply port: {type: 'alive'} every OFFLOAD_ALIVE_MS from
 *     the start, {type: 'opened', ...} with the plaintext relayed on `plain` (port-stream.ts), then
 *     {type: 'done', result} once it was all read and verified, or {type: 'failed', error} at any point
 *   service worker → crypto worker, on the reply port: {type: 'cancel', reason}
 */
export interface OffloadOpen {
  type: 'open';
  /** The service worker's number for this job, named by a later `reopen`. */
  job: number;
  source: WireSource;
  size?: number;
  recipientId: string;
  usk: UserKeys;
  vk: VerifyingKeys;
  /** A URL's strong ETag from an earlier pass: the bytes must be the same (If-Match). */
  ifMatch?: string;
  /**
   * A Blob's second reading, after job `reopen` (on the same port) verified it completely: only
   * decrypt (StreamUnsealer.reopen). A crypto worker that no longer has that job authenticates in full.
   */
  reopen?: number;
}

export type OffloadEvent =
  | { type: 'alive' }
  | {
      type: 'opened';
      /** The plaintext's exact length, when the ciphertext's is known. */
      size: number | undefined;
      /** The header's bytes: a reading that takes over must find the very same header. */
      header: Uint8Array;
      etag?: string;
      plain: MessagePort;
    }
  | { type: 'done'; result: VerificationResult }
  | { type: 'failed'; error: unknown };

/** How often a crypto worker running a job says it is there; the service worker waits OFFLOAD_SILENCE_MS. */
export const OFFLOAD_ALIVE_MS = 500;

export type RegisterReply =
  /** `seekable`: the URL answers Range requests and stays valid for its lifetime. */
  | { type: 'registered'; ok: true; id: string; url: string; seekable: boolean }
  | { type: 'registered'; ok: false; error: unknown };

export type DownloadEvent =
  | RegisterReply
  | { type: 'verifying'; bytes: number }
  /** Sent every 10 s while the fetch is being answered, whatever the body's reader does. */
  | { type: 'alive' }
  | { type: 'progress'; bytes: number }
  | { type: 'done'; bytes: number; result: VerificationResult }
  /**
   * A range response of a seekable registration has started: message bytes start..end of total.
   * Its segments are authenticated as they are sent (a failure errors its body and ends the
   * registration with {type: 'error'}); the sender's signatures are not verified for a range.
   */
  | { type: 'range'; start: number; end: number; total: number; sender: Policy }
  | { type: 'error'; error: unknown };
