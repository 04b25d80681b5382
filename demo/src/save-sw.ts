/// <reference lib="webworker" />
import { contentDisposition, safeFilename } from 'postguard-ts/sw/install';
import { portToReadable } from 'postguard-ts/sw/install';
import { MESSAGE_SAVE, SAVE_PATH, type SaveEvent, type SaveRequest } from './save-protocol.js';

/**
 * The service worker's side of saving a page's stream as a download (the page side is save.ts).
 * The page registers a stream and gets a URL; a navigation to it is answered with the stream as an
 * attachment, so the browser writes it to disk as it arrives and nothing holds the whole file. If
 * the stream errors (the sealer failed), the response body errors and the download is marked failed.
 *
 * A page that goes away mid-download (a reload, a closed tab) ends its stream without a word:
 * neither a transferred stream nor a port says so in every engine, and the browser then shows the
 * download "in progress" for good. So a source that keeps the response waiting for `stallMs`
 * fails the download instead. Only a read the response is waiting on counts: a slow disk (the
 * browser not reading) is backpressure, not a stall.
 */

const FETCH_WITHIN_MS = 60_000;
const MAX_WAITING = 16;
/** How long the response may wait for the page's next bytes (sealing makes them continuously). */
export const STALL_MS = 30_000;

export interface SaverOptions {
  /** How long a pending read of the page's stream may take before the download fails. Default STALL_MS. */
  stallMs?: number;
}

interface Waiting {
  request: SaveRequest;
  reply: MessagePort;
  timer: ReturnType<typeof setTimeout>;
}

const post = (port: MessagePort, event: SaveEvent): void => {
  try {
    port.postMessage(event);
  } catch {
    // the page is gone
  }
};

const randomId = (): string =>
  Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join('');

function sourceStream(request: SaveRequest): ReadableStream<Uint8Array> {
  return request.source.kind === 'stream' ? request.source.stream : portToReadable<Uint8Array>(request.source.port);
}

/**
 * `source` as the response body, pulled only when the body is read, errored when a pull waits
 * longer than `stallMs` for the page (and the source cancelled, so a page that is still there stops).
 */
function guardedBody(
  source: ReadableStream<Uint8Array>,
  stallMs: number,
  onBytes: (n: number) => void,
): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        let timer: ReturnType<typeof setTimeout> | undefined;
        const stalled = new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`the page sent nothing for ${stallMs / 1000} s (closed or reloaded)`)),
            stallMs,
          );
        });
        try {
          const next = await Promise.race([reader.read(), stalled]);
          if (next.done) controller.close();
          else {
            onBytes(next.value.byteLength);
            controller.enqueue(next.value);
          }
        } catch (error) {
          void reader.cancel(error).catch(() => undefined);
          throw error;
        } finally {
          clearTimeout(timer);
        }
      },
      cancel: (reason) => reader.cancel(reason),
    },
    { highWaterMark: 0 },
  );
}

/** Why a page's request cannot be served, or undefined. */
function invalid(request: unknown): string | undefined {
  if (typeof request !== 'object' || request === null) return 'the request must be an object';
  const r = request as Partial<SaveRequest>;
  if (typeof r.filename !== 'string') return 'filename must be a string';
  if (
    r.contentType !== undefined &&
    (typeof r.contentType !== 'string' || !/^[\w.+-]+\/[\w.+-]+$/.test(r.contentType))
  ) {
    return 'contentType is not a media type';
  }
  const s = r.source;
  if (s?.kind === 'stream' && s.stream instanceof ReadableStream) return undefined;
  if (s?.kind === 'port' && s.port instanceof MessagePort) return undefined;
  return 'source must be a ReadableStream or a MessagePort';
}

export function installSaver(scope: ServiceWorkerGlobalScope, options: SaverOptions = {}): void {
  const stallMs = options.stallMs ?? STALL_MS;
  const waiting = new Map<string, Waiting>();
  const prefix = new URL(SAVE_PATH, scope.registration.scope).pathname;

  const take = (id: string): Waiting | undefined => {
    const entry = waiting.get(id);
    if (entry !== undefined) {
      waiting.delete(id);
      clearTimeout(entry.timer);
    }
    return entry;
  };

  scope.addEventListener('message', (event: ExtendableMessageEvent) => {
    const data = event.data as { type?: unknown; request?: unknown } | null;
    if (data?.type !== MESSAGE_SAVE) return;
    const reply = event.ports[0];
    if (reply === undefined) return;
    const problem = invalid(data.request) ?? (waiting.size >= MAX_WAITING ? 'too many saves are waiting' : undefined);
    if (problem !== undefined) {
      post(reply, { type: 'registered', ok: false, message: problem });
      return;
    }
    const request = data.request as SaveRequest;
    const id = randomId();
    const timer = setTimeout(() => {
      const entry = take(id);
      if (entry === undefined) return;
      post(entry.reply, { type: 'error', message: 'the download was not started in time' });
      void sourceStream(entry.request)
        .cancel('expired')
        .catch(() => undefined);
    }, FETCH_WITHIN_MS);
    waiting.set(id, { request, reply, timer });
    const url = new URL(
      `${SAVE_PATH}${id}/${encodeURIComponent(safeFilename(request.filename))}`,
      scope.registration.scope,
    ).href;
    post(reply, { type: 'registered', ok: true, id, url });
  });

  scope.addEventListener('fetch', (event: FetchEvent) => {
    const url = new URL(event.request.url);
    if (url.origin !== new URL(scope.registration.scope).origin || !url.pathname.startsWith(prefix)) return;
    const entry =
      event.request.method === 'GET' ? take(url.pathname.slice(prefix.length).split('/')[0] ?? '') : undefined;
    if (entry === undefined) {
      event.respondWith(new Response('no such download (unknown, already used, or expired)', { status: 404 }));
      return;
    }
    let bytes = 0;
    const body = guardedBody(sourceStream(entry.request), stallMs, (n) => (bytes += n));
    const counter = new TransformStream<Uint8Array, Uint8Array>();
    // pipeTo carries an error of the source (or a stall) into the body, a failed download, and a
    // cancelled download back to the source (the sealer stops).
    const piping = body.pipeTo(counter.writable).then(
      () => post(entry.reply, { type: 'done', bytes }),
      (error: unknown) =>
        post(entry.reply, { type: 'error', message: error instanceof Error ? error.message : String(error) }),
    );
    // Keep the worker alive until the whole body went out, not just the headers.
    event.waitUntil(piping);
    const filename = safeFilename(entry.request.filename);
    event.respondWith(
      new Response(counter.readable, {
        status: 200,
        headers: {
          'content-type': entry.request.contentType ?? 'application/octet-stream',
          'content-disposition': contentDisposition('attachment', filename),
          'cache-control': 'no-store',
          'x-content-type-options': 'nosniff',
        },
      }),
    );
  });
}
