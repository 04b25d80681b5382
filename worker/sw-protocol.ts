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

/** What a page sends the service worker to register a download (`prepareDownload` builds it). */
export interface RegisterRequest {
  /** The ciphertext, in a form that crosses to the worker. */
  source: WireSource;
  /** The recipient to decrypt for, as the header lists it. */
  recipientId: string;
  /** User secret key (base64). Held in the worker's memory until the download ends or expires. */
  usk: string;
  /** The PKG's verification key (base64). */
  vk: string;
  /** The name the browser saves the plaintext under (Content-Disposition). */
  filename: string;
  /** Default application/octet-stream. */
  contentType?: string;
  /** attachment (save) by default; inline to preview. */
  disposition?: 'attachment' | 'inline';
  /** Ciphertext size in bytes, when the source does not tell (streams); enables Content-Length. */
  size?: number;
  /** How long the registration waits for its fetch. */
  ttlMs?: number;
  /**
   * Authenticate the whole file before the first byte is sent (default true). A file up to the
   * worker's hold limit is held in memory; a larger Blob or URL source is read twice (once to
   * verify, once to send; a URL is fetched twice). False streams at once: a failure then errors a
   * download that has started, which Firefox and WebKit leave on disk (worker/README.md).
   */
  verifyFirst?: boolean;
  /** The page acknowledges what it reads (PreparedDownload.fetch); the worker stays a window ahead. */
  paced?: boolean;
  /**
   * Serve Range requests (a <video> that seeks): the URL answers many requests until `ttlMs` (its
   * whole lifetime, not just until the first fetch) has passed. Only a Blob or URL source seeks;
   * a stream source is still served once, whole. Not with `paced`.
   */
  seekable?: boolean;
}

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
