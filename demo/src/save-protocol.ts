/**
 * The messages between a page (save.ts) and the demo's service worker (save-sw.ts) for saving a
 * stream the page produces (a ciphertext being sealed) as a browser download, without holding it:
 *
 *   page → worker: {type: 'postguard-demo:save', request: SaveRequest}, a reply port attached
 *   worker → page: {type: 'registered', ok: true, url} | {type: 'registered', ok: false, message}
 *                  then {type: 'done', bytes} once the last byte went into the response body,
 *                  or {type: 'error', message} if the stream failed or the download was cancelled
 *
 * The URL is single-use and expires when it is not fetched in time.
 */

export const SAVE_PATH = 'pg-save/';
export const MESSAGE_SAVE = 'postguard-demo:save';

export type SaveSource =
  /** A transferred ReadableStream. */
  | { kind: 'stream'; stream: ReadableStream<Uint8Array> }
  /** A stream served over a MessagePort (worker/port-stream.ts), where streams cannot be transferred. */
  | { kind: 'port'; port: MessagePort };

export interface SaveRequest {
  source: SaveSource;
  filename: string;
  /** Default application/octet-stream. */
  contentType?: string;
}

export type SaveEvent =
  | { type: 'registered'; ok: true; id: string; url: string }
  | { type: 'registered'; ok: false; message: string }
  | { type: 'done'; bytes: number }
  | { type: 'error'; message: string };
