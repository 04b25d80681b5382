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

/**
 * The decrypting service worker's saves as the demo's worker sees them (save-tracker.ts), so a
 * page loaded again (a reload during "Save all") finds a save that is still running instead of
 * starting a second copy:
 *
 *   page → worker: {type: 'postguard-demo:saves', source}, a reply port attached: `source` is the
 *                  end of the ciphertext's URL (`/filedownload/<uuid>`)
 *   worker → page: {type: 'save', save: TrackedSave | null} now, then again on each change of a
 *                  save still running, until it ends (done or failed)
 */
export const MESSAGE_SAVES = 'postguard-demo:saves';

/** A save of a ciphertext URL through the decrypting service worker. */
export interface TrackedSave {
  /** The name it is saved under. */
  filename: string;
  /**
   * 'waiting' (registered, not fetched yet), 'verifying' (authenticated before the download
   * starts), 'saving' (the browser is writing the download), 'done', 'failed'.
   */
  state: 'waiting' | 'verifying' | 'saving' | 'done' | 'failed';
  /** Plaintext bytes authenticated ('verifying') or delivered to the download. */
  bytes: number;
  /** 'done': the verified sender, as the decrypter reported it (a VerificationResult). */
  result?: unknown;
  /** 'failed': why, in the decrypter's words. */
  error?: string;
}

export interface SavesReply {
  type: 'save';
  save: TrackedSave | null;
}
