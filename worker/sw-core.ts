/// <reference lib="webworker" />
import { ErrorCode, PostGuardError, isPostGuardError } from '../lib/errors.js';
import { StreamUnsealer } from '../lib/unseal.js';
import { encodeError } from './errors.js';
import { FramingSniffer, streamingPlaintextSize } from './plaintext-size.js';
import { portToReadable } from './port-stream.js';
import {
  DOWNLOAD_PATH,
  MESSAGE_KEEPALIVE,
  MESSAGE_REGISTER,
  MESSAGE_REVOKE,
  type DownloadEvent,
  type RegisterReply,
  type RegisterRequest,
  type WireSource,
} from './sw-protocol.js';

/**
 * The decrypting service worker's logic, installable into any service worker (worker/sw.ts is the
 * ready-made script). A page registers a ciphertext source with the recipient id and keys and gets
 * a URL under the worker's scope; a fetch of (or navigation to) that URL is answered with the
 * plaintext as it is decrypted: segment by segment, each one only after it authenticated, with flat
 * memory whatever the size. If anything fails after the response started, its body stream errors,
 * so a download is marked failed rather than saved short or corrupt.
 *
 * Registrations live in memory only (keys never touch storage), are single-use and expire.
 */

export interface DecrypterOptions {
  /** Path under the scope that the worker answers; default 'pg-download/'. */
  path?: string;
  /** Lifetime of an unused registration. 5 minutes by default, at most 1 hour. */
  defaultTtlMs?: number;
  maxTtlMs?: number;
  /** Most registrations waiting at once. 64. */
  maxRegistrations?: number;
  /** Minimum interval between progress messages. 250 ms. */
  progressIntervalMs?: number;
  /** Longest a fetch event is extended while its body streams. 270 s (Chromium stops workers at 300). */
  maxEventMs?: number;
  fetch?: typeof fetch;
}

interface Registration {
  request: RegisterRequest;
  reply: MessagePort;
  expiresAt: number;
  timer: ReturnType<typeof setTimeout>;
}

const randomId = (): string => {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
};

/** `attachment; filename="ascii"; filename*=UTF-8''percent-encoded` (RFC 6266 / 8187). */
export function contentDisposition(disposition: 'attachment' | 'inline', filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]/g, '_').replace(/["\\]/g, '_');
  const encoded = encodeURIComponent(filename).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `${disposition}; filename="${ascii}"; filename*=UTF-8''${encoded}`;
}

/** A file name a browser can save: no path separators, control characters or empty names. */
export function safeFilename(name: unknown): string {
  const base = (typeof name === 'string' ? name : '').split(/[/\\]/).pop() ?? '';
  // eslint-disable-next-line no-control-regex
  const cleaned = base.replace(/[\u0000-\u001f\u007f]/g, '').trim().slice(0, 255);
  return cleaned === '' || cleaned === '.' || cleaned === '..' ? 'download' : cleaned;
}

const MEDIA_TYPE = /^[\w!#$&^.+-]+\/[\w!#$&^.+-]+(?:\s*;\s*[\w!#$&^.+-]+=(?:[\w!#$&^.+-]+|"[^"\\\r\n]*"))*$/;

/** Checks a registration from a page; returns the reason it is unusable, or undefined. */
function invalidRequest(r: RegisterRequest): string | undefined {
  if (typeof r !== 'object' || r === null) return 'the request must be an object';
  if (typeof r.recipientId !== 'string') return 'recipientId must be a string';
  if (typeof r.usk !== 'string' || typeof r.vk !== 'string') return 'usk and vk must be base64 strings';
  if (r.contentType !== undefined && (typeof r.contentType !== 'string' || !MEDIA_TYPE.test(r.contentType))) return 'contentType is not a media type';
  if (r.disposition !== undefined && r.disposition !== 'attachment' && r.disposition !== 'inline') return 'disposition must be attachment or inline';
  if (r.size !== undefined && (!Number.isSafeInteger(r.size) || r.size < 0)) return 'size must be a non-negative integer';
  const s = r.source as WireSource | undefined;
  if (typeof s !== 'object' || s === null) return 'source is missing';
  if (s.kind === 'url') {
    try {
      const url = new URL(s.url);
      if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'source url must be http(s)';
    } catch {
      return 'source url is not a URL';
    }
  } else if (s.kind === 'blob') {
    if (!(s.blob instanceof Blob)) return 'source blob is not a Blob';
  } else if (s.kind === 'stream') {
    if (!(s.stream instanceof ReadableStream)) return 'source stream is not a ReadableStream';
  } else if (s.kind === 'relay') {
    if (!(s.port instanceof MessagePort)) return 'source port is not a MessagePort';
  } else {
    return 'unknown source kind';
  }
  return undefined;
}

const errorResponse = (status: number, code: string, message: string): Response =>
  new Response(JSON.stringify({ error: code, message }), {
    status,
    headers: { 'content-type': 'application/json', 'x-postguard-error': code, 'cache-control': 'no-store' },
  });

/** HTTP status for a failure before the body started. */
function statusFor(error: unknown): number {
  if (!isPostGuardError(error)) return 502;
  switch (error.code) {
    case ErrorCode.UNKNOWN_RECIPIENT:
    case ErrorCode.WRONG_KEY:
    case ErrorCode.INVALID_KEY:
      return 403;
    case ErrorCode.SOURCE_FAILED:
      return 502;
    default:
      return 422;
  }
}

interface Source {
  stream: ReadableStream<Uint8Array>;
  /** Ciphertext bytes, when known (for Content-Length). */
  size: number | undefined;
}

async function openSource(source: WireSource, declaredSize: number | undefined, doFetch: typeof fetch, signal: AbortSignal): Promise<Source> {
  switch (source.kind) {
    case 'blob':
      return { stream: source.blob.stream(), size: source.blob.size };
    case 'stream':
      return { stream: source.stream, size: declaredSize };
    case 'relay':
      return { stream: portToReadable<Uint8Array>(source.port), size: declaredSize };
    case 'url': {
      let response: Response;
      try {
        response = await doFetch(source.url, {
          headers: source.headers ?? {},
          credentials: source.credentials ?? 'same-origin',
          signal,
        });
      } catch (cause) {
        throw new PostGuardError(ErrorCode.SOURCE_FAILED, `the ciphertext could not be fetched: ${String(cause)}`, { cause });
      }
      if (!response.ok || response.body === null) {
        await response.body?.cancel().catch(() => undefined);
        throw new PostGuardError(ErrorCode.SOURCE_FAILED, `the ciphertext URL answered HTTP ${response.status}`);
      }
      // A compressed transfer hides the size of what we read.
      const length = response.headers.get('content-encoding') === null ? Number(response.headers.get('content-length') ?? NaN) : NaN;
      return { stream: response.body, size: Number.isSafeInteger(length) ? length : declaredSize };
    }
  }
}

export function installDecrypter(scope: ServiceWorkerGlobalScope, options: DecrypterOptions = {}): void {
  const path = options.path ?? DOWNLOAD_PATH;
  const defaultTtl = options.defaultTtlMs ?? 5 * 60_000;
  const maxTtl = options.maxTtlMs ?? 60 * 60_000;
  const maxRegistrations = options.maxRegistrations ?? 64;
  const progressInterval = options.progressIntervalMs ?? 250;
  const maxEventMs = options.maxEventMs ?? 270_000;
  const doFetch = options.fetch ?? ((input: RequestInfo | URL, init?: RequestInit) => scope.fetch(input, init));
  const registrations = new Map<string, Registration>();
  const prefix = new URL(path, scope.registration.scope).pathname;

  const drop = (id: string): Registration | undefined => {
    const entry = registrations.get(id);
    if (entry === undefined) return undefined;
    registrations.delete(id);
    clearTimeout(entry.timer);
    return entry;
  };

  const post = (port: MessagePort, message: DownloadEvent) => {
    try {
      port.postMessage(message);
    } catch {
      // the page is gone
    }
  };

  function register(request: RegisterRequest, reply: MessagePort): void {
    const invalid = invalidRequest(request);
    if (invalid !== undefined) {
      post(reply, { type: 'registered', ok: false, error: encodeError(new PostGuardError(ErrorCode.INVALID_INPUT, invalid)) } satisfies RegisterReply);
      return;
    }
    if (registrations.size >= maxRegistrations) {
      post(reply, {
        type: 'registered',
        ok: false,
        error: encodeError(new PostGuardError(ErrorCode.INVALID_STATE, `more than ${maxRegistrations} downloads are waiting`)),
      } satisfies RegisterReply);
      return;
    }
    const ttl = Math.min(maxTtl, Math.max(1, request.ttlMs ?? defaultTtl));
    const id = randomId();
    const expire = () => {
      const entry = drop(id);
      if (entry) {
        post(entry.reply, { type: 'error', error: encodeError(new PostGuardError(ErrorCode.INVALID_STATE, 'the download expired before it was fetched')) });
        void cancelSource(entry.request.source);
      }
    };
    registrations.set(id, { request, reply, expiresAt: Date.now() + ttl, timer: setTimeout(expire, ttl) });
    const url = new URL(`${path}${id}/${encodeURIComponent(safeFilename(request.filename))}`, scope.registration.scope).href;
    post(reply, { type: 'registered', ok: true, id, url } satisfies RegisterReply);
  }

  async function cancelSource(source: WireSource): Promise<void> {
    if (source.kind === 'stream') await source.stream.cancel().catch(() => undefined);
    if (source.kind === 'relay') await portToReadable(source.port).cancel().catch(() => undefined);
  }

  async function respond(entry: Registration, lifetime: (p: Promise<unknown>) => void): Promise<Response> {
    const r = entry.request;
    const reply = entry.reply;
    const abort = new AbortController();
    const fail = (error: unknown) => post(reply, { type: 'error', error: encodeError(error) });

    let source: Source;
    try {
      source = await openSource(r.source, r.size, doFetch, abort.signal);
    } catch (error) {
      fail(error);
      return errorResponse(statusFor(error), (error as PostGuardError).code ?? 'SOURCE_FAILED', (error as Error).message);
    }

    const sniffer = new FramingSniffer();
    let unsealer: StreamUnsealer;
    try {
      unsealer = await StreamUnsealer.new(source.stream.pipeThrough(sniffer.stream()), r.vk);
    } catch (error) {
      fail(error);
      return errorResponse(statusFor(error), isPostGuardError(error) ? error.code : 'MALFORMED', (error as Error).message);
    }

    // Plaintext goes through here; its readable side becomes the response body.
    const plain = new TransformStream<Uint8Array, Uint8Array>();
    const reader = plain.readable.getReader();
    const unsealing = unsealer.unseal(r.recipientId, r.usk, plain.writable);
    unsealing.catch(() => undefined);

    // Wait for the first authenticated plaintext (or the end, or a failure) before answering: a
    // wrong key or recipient then gets an HTTP error instead of a broken download, and segment 0
    // tells the plaintext length.
    let first: ReadableStreamReadResult<Uint8Array>;
    try {
      first = await reader.read();
    } catch (error) {
      fail(error);
      return errorResponse(statusFor(error), isPostGuardError(error) ? error.code : 'TAMPERED', (error as Error).message);
    }

    const framing = sniffer.framing;
    const length =
      source.size !== undefined && framing
        ? streamingPlaintextSize(source.size, framing, first.done ? undefined : first.value.byteLength)
        : undefined;

    let sent = 0;
    let lastProgress = 0;
    const progress = () => {
      const now = Date.now();
      if (now - lastProgress >= progressInterval) {
        lastProgress = now;
        post(reply, { type: 'progress', bytes: sent });
      }
    };
    const overrun = () =>
      new PostGuardError(ErrorCode.MALFORMED, `the plaintext does not have the announced length ${length}`);

    let pending: Uint8Array | undefined = first.done ? undefined : first.value;
    let bodyError: unknown;
    const body = new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          try {
            let chunk: Uint8Array | undefined = pending;
            pending = undefined;
            if (chunk === undefined) {
              const next = first.done ? { done: true as const, value: undefined } : await reader.read();
              if (next.done) {
                // The unsealer closes its output only after the final segment authenticated.
                if (length !== undefined && sent !== length) throw overrun();
                controller.close();
                return;
              }
              chunk = next.value;
            }
            sent += chunk.byteLength;
            if (length !== undefined && sent > length) throw overrun();
            controller.enqueue(chunk);
            progress();
          } catch (error) {
            // Erroring the body makes the browser fail the download (and a fetch's body read reject).
            bodyError ??= error;
            controller.error(error);
            abort.abort(error);
            await reader.cancel(error).catch(() => undefined);
          }
        },
        async cancel(reason) {
          // The reader went away (download cancelled): stop decrypting and reading the source.
          bodyError ??= new PostGuardError(ErrorCode.SINK_FAILED, 'the download was cancelled', { cause: reason });
          abort.abort(reason);
          await reader.cancel(reason).catch(() => undefined);
        },
      },
      { highWaterMark: 0 },
    );

    lifetime(
      unsealing.then(
        (verified) => (bodyError === undefined ? post(reply, { type: 'done', bytes: sent, result: verified }) : fail(bodyError)),
        (error) => fail(bodyError ?? error),
      ),
    );

    const headers = new Headers({
      'content-type': r.contentType ?? 'application/octet-stream',
      'content-disposition': contentDisposition(r.disposition ?? 'attachment', safeFilename(r.filename)),
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
      // A decrypted HTML or SVG file previewed inline must not run script in the app's origin.
      'content-security-policy': 'sandbox',
      'referrer-policy': 'no-referrer',
    });
    if (length !== undefined) headers.set('content-length', String(length));
    return new Response(body, { status: 200, headers });
  }

  scope.addEventListener('message', (event: ExtendableMessageEvent) => {
    const data = event.data as { type?: unknown; request?: RegisterRequest; id?: unknown } | null;
    if (typeof data !== 'object' || data === null) return;
    if (data.type === MESSAGE_REGISTER) {
      const reply = event.ports[0];
      if (reply !== undefined) register(data.request as RegisterRequest, reply);
    } else if (data.type === MESSAGE_REVOKE && typeof data.id === 'string') {
      const entry = drop(data.id);
      if (entry) {
        post(entry.reply, { type: 'error', error: encodeError(new PostGuardError(ErrorCode.INVALID_STATE, 'the download was revoked')) });
        void cancelSource(entry.request.source);
      }
    } else if (data.type === MESSAGE_KEEPALIVE) {
      // Each message extends the worker's life a little; pages send one while downloads run.
      event.waitUntil(new Promise((resolve) => setTimeout(resolve, 1000)));
    }
  });

  scope.addEventListener('fetch', (event: FetchEvent) => {
    const url = new URL(event.request.url);
    if (url.origin !== new URL(scope.registration.scope).origin || !url.pathname.startsWith(prefix)) return;
    if (event.request.method !== 'GET' && event.request.method !== 'HEAD') return;
    if (event.request.method === 'HEAD') {
      event.respondWith(errorResponse(405, 'METHOD_NOT_ALLOWED', 'a download is served once, to a GET'));
      return;
    }
    const id = url.pathname.slice(prefix.length).split('/')[0] ?? '';
    // Single use: whatever happens next, this id is spent.
    const entry = drop(id);
    if (entry === undefined) {
      event.respondWith(errorResponse(404, 'UNKNOWN_DOWNLOAD', 'no such download (unknown, already used, or expired)'));
      return;
    }
    const lifetimes: Promise<unknown>[] = [];
    let release!: () => void;
    // Keeps the worker alive until the body is fully decrypted, not just until the headers; but
    // never past Chromium's five-minute limit for one event (which would stop the worker). Longer
    // downloads are kept alive by the page's keep-alive messages (download.ts).
    const alive = new Promise<void>((resolve) => (release = resolve));
    const cap = setTimeout(() => release(), maxEventMs);
    void alive.then(() => clearTimeout(cap));
    event.waitUntil(alive);
    const response = respond(entry, (p) => lifetimes.push(p)).finally(() => {
      void Promise.allSettled(lifetimes).then(() => release());
    });
    event.respondWith(response);
  });
}
