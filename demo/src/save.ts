import { readableToPort, triggerDownload } from 'postguard-ts/sw';
import { MESSAGE_SAVE, type SaveEvent, type SaveRequest, type SaveSource } from './save-protocol.js';

/**
 * Saving a stream the page produces (the ciphertext of sealStream) as a file download.
 *
 * The choice, in order:
 *   1. The service worker (save-sw.ts): the bytes go page → service worker → the browser's download
 *      manager, which writes them to disk as they come. Memory stays flat at any size, the browser
 *      shows a normal download (with its progress and a failed state if sealing fails), and it works
 *      in every browser with service workers (all current ones, on https or localhost).
 *   2. Without a service worker (a private window in some browsers, plain http on a LAN address):
 *      each chunk becomes a Blob as it arrives and the file is offered once complete. Chromium
 *      keeps large Blobs on disk, other browsers may hold them in memory; either way the JS heap
 *      stays flat, but the file appears only at the end.
 * The File System Access API (showSaveFilePicker) would also stream, but only in Chromium and only
 * after a save dialog: the service worker covers the same browsers and more without a dialog.
 */

export type SaveMethod = 'service-worker' | 'blob';

export interface SaveTarget {
  /** Write the file here (hand it to sealStream); closing it completes the download. */
  writable: WritableStream<Uint8Array>;
  /** Bytes saved, once the browser has received them all; rejects if the stream failed. */
  done: Promise<number>;
  method: SaveMethod;
}

export interface SaveOptions {
  contentType?: string;
  /** Bytes written so far. */
  onBytes?: (bytes: number) => void;
  /** Force a method (tests); default: the service worker when one controls the page. */
  method?: SaveMethod;
}

function counting(onBytes: ((bytes: number) => void) | undefined): TransformStream<Uint8Array, Uint8Array> {
  let bytes = 0;
  return new TransformStream<Uint8Array, Uint8Array>(
    {
      transform(chunk, controller) {
        bytes += chunk.byteLength;
        onBytes?.(bytes);
        controller.enqueue(chunk);
      },
    },
    // Let a segment or two wait here, no more: backpressure reaches the sealer.
    { highWaterMark: 2 },
  );
}

function wire(readable: ReadableStream<Uint8Array>): { source: SaveSource; transfer: Transferable[] } {
  const port = readableToPort(readable);
  return { source: { kind: 'port', port }, transfer: [port] };
}

/** How long the service worker may take to take a save, and then to take the next bytes of it. */
export const SAVE_ANSWER_MS = 10_000;
export const SAVE_IDLE_MS = 60_000;

async function viaServiceWorker(filename: string, options: SaveOptions): Promise<SaveTarget> {
  const worker = navigator.serviceWorker.controller;
  if (worker === null) throw new Error('no service worker controls this page');
  let lastProgress = Date.now();
  const counter = counting((bytes) => {
    lastProgress = Date.now();
    options.onBytes?.(bytes);
  });
  const { source, transfer } = wire(counter.readable);
  const request: SaveRequest = { source, filename };
  if (options.contentType !== undefined) request.contentType = options.contentType;

  const channel = new MessageChannel();
  let settle!: { resolve: (bytes: number) => void; reject: (error: Error) => void };
  const done = new Promise<number>((resolve, reject) => (settle = { resolve, reject }));
  done.catch(() => undefined);
  // A save that stops answering (the service worker failed on this file, or was stopped) says so
  // instead of waiting for ever: at registration, and then whenever no byte moves for a minute.
  let answerTimer: ReturnType<typeof setTimeout> | undefined;
  const watchdog = setInterval(() => {
    if (Date.now() - lastProgress < SAVE_IDLE_MS) return;
    settle.reject(
      new Error(`the save stopped: no bytes for ${SAVE_IDLE_MS / 1000} s (the service worker may have failed)`),
    );
    channel.port1.close();
  }, 1000);
  done.then(
    () => clearInterval(watchdog),
    () => clearInterval(watchdog),
  );
  const url = await new Promise<string>((resolve, reject) => {
    answerTimer = setTimeout(() => {
      settle.reject(new Error('no answer'));
      reject(
        new Error(
          `the service worker did not take the save within ${SAVE_ANSWER_MS / 1000} s: reload the page and try again`,
        ),
      );
    }, SAVE_ANSWER_MS);
    channel.port1.onmessage = ({ data }: MessageEvent<SaveEvent>) => {
      clearTimeout(answerTimer);
      if (data.type === 'registered') {
        if (data.ok) resolve(data.url);
        else reject(new Error(data.message));
      } else if (data.type === 'done') {
        settle.resolve(data.bytes);
        channel.port1.close();
      } else {
        settle.reject(new Error(data.message));
        channel.port1.close();
      }
    };
    worker.postMessage({ type: MESSAGE_SAVE, request }, [channel.port2, ...transfer]);
  });
  triggerDownload(url, done);
  return { writable: counter.writable, done, method: 'service-worker' };
}

function viaBlob(filename: string, options: SaveOptions): SaveTarget {
  const parts: Blob[] = [];
  let bytes = 0;
  let settle!: { resolve: (bytes: number) => void; reject: (error: unknown) => void };
  const done = new Promise<number>((resolve, reject) => (settle = { resolve, reject }));
  done.catch(() => undefined);
  const writable = new WritableStream<Uint8Array>({
    write(chunk) {
      // A Blob per chunk moves the bytes out of the JS heap at once.
      parts.push(new Blob([chunk as Uint8Array<ArrayBuffer>]));
      bytes += chunk.byteLength;
      options.onBytes?.(bytes);
    },
    close() {
      const blob = new Blob(parts, { type: options.contentType ?? 'application/octet-stream' });
      offerBlob(blob, filename);
      settle.resolve(bytes);
    },
    abort(reason) {
      parts.length = 0;
      settle.reject(reason);
    },
  });
  return { writable, done, method: 'blob' };
}

/** Offers a Blob as a download through an object URL (revoked a minute later). */
export function offerBlob(blob: Blob, filename: string): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = filename;
  a.hidden = true;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/** A place to stream a file to that ends up as a download named `filename`. */
export async function saveStream(filename: string, options: SaveOptions = {}): Promise<SaveTarget> {
  const method = options.method ?? (navigator.serviceWorker?.controller ? 'service-worker' : 'blob');
  return method === 'service-worker' ? viaServiceWorker(filename, options) : viaBlob(filename, options);
}
