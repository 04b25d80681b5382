/// <reference lib="webworker" />
import { ErrorCode, PostGuardError, isPostGuardError } from '../lib/errors.js';
import { StreamUnsealer } from '../lib/unseal.js';
import { encodeError } from './errors.js';
import type { VerificationResult } from '../lib/signatures.js';
import { streamingPlaintextSize } from '../lib/segment-map.js';
import { FramingSniffer } from './plaintext-size.js';
import { portToReadable } from './port-stream.js';
import { contentRange, parseRange, unsatisfiedRange } from './http-range.js';
import { openSeekable, randomAccess, type SeekableFile } from './sw-seek.js';
import { openSource, rereadable, withTimeout, type OpenedSource } from './sw-source.js';
import {
  DOWNLOAD_PATH,
  MESSAGE_KEEPALIVE,
  MESSAGE_READ,
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
 * Registrations live in memory only (keys never touch storage), are single-use and expire. A
 * seekable one (a Blob or URL source registered with `seekable`) answers Range requests from the
 * segments that hold them (sw-seek.ts) and any number of requests until it has gone unrequested
 * for its lifetime (a video that plays or seeks keeps it; one left alone lets its keys go).
 */

/** How `installDecrypter` answers: its path, lifetimes, limits and timeouts; every one has a default. */
export interface DecrypterOptions {
  /** Path under the scope that the worker answers; default 'pg-download/'. */
  path?: string;
  /** Lifetime of an unused registration. 5 minutes by default, at most 1 hour. */
  defaultTtlMs?: number;
  /** The longest lifetime a page may ask for (`ttlMs`). 1 hour. */
  maxTtlMs?: number;
  /**
   * Lifetime of a seekable registration, counted again from each request it answers (a playing
   * video keeps it). 30 minutes by default, at most `maxTtlMs`.
   */
  seekableTtlMs?: number;
  /** Most registrations waiting at once. 64. */
  maxRegistrations?: number;
  /** Minimum interval between progress messages. 250 ms. */
  progressIntervalMs?: number;
  /** Longest a fetch event is extended while its body streams. 270 s (Chromium stops workers at 300). */
  maxEventMs?: number;
  /**
   * Most plaintext held in memory to authenticate a file before its first byte is sent: a file up
   * to this size is served only once it verified completely. 16 MiB.
   */
  holdLimitBytes?: number;
  /** A source read that brings nothing for this long fails the download with SOURCE_FAILED. 30 s. */
  stallTimeoutMs?: number;
  /**
   * For a download registered with `paced` (read through PreparedDownload.fetch): how far the
   * worker may run ahead of what the page acknowledged reading. 4 MiB.
   */
  pacingWindowBytes?: number;
  /** How often a download being answered tells its page the worker is still there. 10 s (download.ts waits 45 s). */
  heartbeatMs?: number;
  /** The fetch for URL sources; default the worker's own. */
  fetch?: typeof fetch;
}

interface Registration {
  id: string;
  request: RegisterRequest;
  reply: MessagePort;
  timer: ReturnType<typeof setTimeout>;
  /** A seekable registration's lifetime starts again: each request it answers calls this. */
  renew?: () => void;
  /** Answers Range requests and many requests (a Blob or URL source registered with `seekable`). */
  seekable: boolean;
  /** A seekable registration's file, opened by its first range request and kept for the others; undefined inside: the source cannot seek. */
  file?: Promise<SeekableFile | undefined>;
  /** Aborted when the registration ends: stops a seekable one's source reads. */
  abort: AbortController;
}

/** How often a worker with a download in progress tells its page that it is still there. */
export const HEARTBEAT_MS = 10_000;

const randomId = (): string => {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return btoa(String.fromCharCode(...bytes))
    .replace(/\+/g, '-')
    .replace(/\//g, '_')
    .replace(/=/g, ''); // padding, only ever at the end
};

/** `attachment; filename="ascii"; filename*=UTF-8''percent-encoded` (RFC 6266 / 8187). */
export function contentDisposition(disposition: 'attachment' | 'inline', filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]/g, '_').replace(/["\\]/g, '_');
  const encoded = encodeURIComponent(filename).replace(
    /['()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
  return `${disposition}; filename="${ascii}"; filename*=UTF-8''${encoded}`;
}

/** A file name a browser can save: no path separators, control characters or empty names. */
export function safeFilename(name: unknown): string {
  const base = (typeof name === 'string' ? name : '').split(/[/\\]/).pop() ?? '';
  const cleaned = base
    .replace(/\p{Cc}/gu, '') // C0 and C1 controls, DEL
    .trim()
    .slice(0, 255);
  return cleaned === '' || cleaned === '.' || cleaned === '..' ? 'download' : cleaned;
}

const MEDIA_TYPE = /^[\w!#$&^.+-]+\/[\w!#$&^.+-]+(?:\s*;\s*[\w!#$&^.+-]+=(?:[\w!#$&^.+-]+|"[^"\\\r\n]*"))*$/;

/** Checks a registration from a page; returns the reason it is unusable, or undefined. */
function invalidRequest(r: RegisterRequest): string | undefined {
  if (typeof r !== 'object' || r === null) return 'the request must be an object';
  if (typeof r.recipientId !== 'string') return 'recipientId must be a string';
  if (typeof r.usk !== 'string' || typeof r.vk !== 'string') return 'usk and vk must be base64 strings';
  if (r.contentType !== undefined && (typeof r.contentType !== 'string' || !MEDIA_TYPE.test(r.contentType)))
    return 'contentType is not a media type';
  if (r.disposition !== undefined && r.disposition !== 'attachment' && r.disposition !== 'inline')
    return 'disposition must be attachment or inline';
  if (r.verifyFirst !== undefined && typeof r.verifyFirst !== 'boolean') return 'verifyFirst must be a boolean';
  if (r.paced !== undefined && typeof r.paced !== 'boolean') return 'paced must be a boolean';
  if (r.seekable !== undefined && typeof r.seekable !== 'boolean') return 'seekable must be a boolean';
  // Pacing follows one reader through one body; a seekable URL is read by a media element, in ranges.
  if (r.seekable === true && r.paced === true) return 'a download cannot be both seekable and paced';
  if (r.size !== undefined && (!Number.isSafeInteger(r.size) || r.size < 0))
    return 'size must be a non-negative integer';
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

const errorResponse = (status: number, code: string, message: string, extra: Record<string, string> = {}): Response =>
  new Response(JSON.stringify({ error: code, message }), {
    status,
    headers: { 'content-type': 'application/json', 'x-postguard-error': code, 'cache-control': 'no-store', ...extra },
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

/**
 * Makes `scope`, your own service worker, answer the URLs that `prepareDownload` gives pages, as
 * the ready-built `postguard-ts/sw/script` does: it adds a `message` listener (registrations) and a
 * `fetch` listener that answers only requests under its path and leaves every other to your code.
 */
export function installDecrypter(scope: ServiceWorkerGlobalScope, options: DecrypterOptions = {}): void {
  const path = options.path ?? DOWNLOAD_PATH;
  const defaultTtl = options.defaultTtlMs ?? 5 * 60_000;
  const maxTtl = options.maxTtlMs ?? 60 * 60_000;
  const seekableTtl = options.seekableTtlMs ?? 30 * 60_000;
  const maxRegistrations = options.maxRegistrations ?? 64;
  const progressInterval = options.progressIntervalMs ?? 250;
  const maxEventMs = options.maxEventMs ?? 270_000;
  const holdLimit = options.holdLimitBytes ?? 16 * 1024 * 1024;
  const stallMs = options.stallTimeoutMs ?? 30_000;
  const pacingWindow = options.pacingWindowBytes ?? 4 * 1024 * 1024;
  const heartbeatMs = options.heartbeatMs ?? HEARTBEAT_MS;
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

  /** Ends a registration with an error its page hears (once): it answers nothing more. */
  const end = (entry: Registration, error: unknown) => {
    if (drop(entry.id) === undefined) return;
    post(entry.reply, { type: 'error', error: encodeError(error) });
    entry.abort.abort(error);
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
      post(reply, {
        type: 'registered',
        ok: false,
        error: encodeError(new PostGuardError(ErrorCode.INVALID_INPUT, invalid)),
      } satisfies RegisterReply);
      return;
    }
    if (registrations.size >= maxRegistrations) {
      post(reply, {
        type: 'registered',
        ok: false,
        error: encodeError(
          new PostGuardError(ErrorCode.INVALID_STATE, `more than ${maxRegistrations} downloads are waiting`),
        ),
      } satisfies RegisterReply);
      return;
    }
    // A stream can be read once: registered seekable, it is still served once, whole.
    const seekable = request.seekable === true && rereadable(request.source);
    const ttl = Math.min(maxTtl, Math.max(1, request.ttlMs ?? (seekable ? seekableTtl : defaultTtl)));
    const id = randomId();
    const expire = () => {
      const entry = registrations.get(id);
      if (entry === undefined) return;
      end(
        entry,
        new PostGuardError(
          ErrorCode.INVALID_STATE,
          seekable
            ? 'the seekable download reached the end of its lifetime'
            : 'the download expired before it was fetched',
        ),
      );
      void cancelSource(entry.request.source);
    };
    const entry: Registration = {
      id,
      request,
      reply,
      timer: setTimeout(expire, ttl),
      seekable,
      abort: new AbortController(),
    };
    if (seekable) {
      entry.renew = () => {
        clearTimeout(entry.timer);
        entry.timer = setTimeout(expire, ttl);
        // The page bounds the registration's life by the same lifetime (download.ts): it hears of the renewal.
        post(reply, { type: 'alive' });
      };
    }
    registrations.set(id, entry);
    const url = new URL(`${path}${id}/${encodeURIComponent(safeFilename(request.filename))}`, scope.registration.scope)
      .href;
    post(reply, { type: 'registered', ok: true, id, url, seekable } satisfies RegisterReply);
  }

  async function cancelSource(source: WireSource): Promise<void> {
    if (source.kind === 'stream') await source.stream.cancel().catch(() => undefined);
    if (source.kind === 'relay')
      await portToReadable(source.port)
        .cancel()
        .catch(() => undefined);
  }

  /** A running unseal of the registration's source: its plaintext, one chunk (segment) at a time. */
  interface Unsealing {
    /** The next authenticated plaintext chunk, or undefined once the final segment (and the signature) verified. */
    next(): Promise<Uint8Array | undefined>;
    result: Promise<VerificationResult>;
    source: OpenedSource;
    sniffer: FramingSniffer;
    cancel(reason: unknown): Promise<void>;
  }

  /** Opens the source and starts unsealing it; throws the coded error if the header or the key fails. */
  async function startUnsealing(r: RegisterRequest, signal: AbortSignal, ifMatch?: string): Promise<Unsealing> {
    const source = await openSource(r.source, r.size, doFetch, signal, stallMs, ifMatch);
    const sniffer = new FramingSniffer();
    let unsealer: StreamUnsealer;
    try {
      unsealer = await StreamUnsealer.new(source.stream.pipeThrough(sniffer.stream()), r.vk);
    } catch (error) {
      await source.stream.cancel(error).catch(() => undefined);
      throw source.failure ?? error;
    }
    // Plaintext goes through here; nothing is decrypted ahead of what its reader asks for.
    const plain = new TransformStream<Uint8Array, Uint8Array>();
    const reader = plain.readable.getReader();
    const result = unsealer
      .unseal(r.recipientId, r.usk, plain.writable)
      .catch((error: unknown) => Promise.reject(source.failure ?? error));
    result.catch(() => undefined);
    return {
      async next() {
        try {
          const { done, value } = await reader.read();
          return done ? undefined : value;
        } catch (error) {
          // A stall or a short source is what really happened; the unsealer only saw its read fail.
          throw source.failure ?? error;
        }
      },
      result,
      source,
      sniffer,
      cancel: (reason) => reader.cancel(reason).catch(() => undefined),
    };
  }

  /**
   * The response body: `prefix` (already authenticated chunks), then whatever `more` yields. The
   * last chunk is held back until `more` reports the authenticated end, so a body never reaches
   * its Content-Length (and never ends cleanly) before the whole file verified. Pulled only as
   * the browser reads (high-water mark 0): decryption follows the reader.
   */
  function body(
    prefix: Uint8Array[],
    more: (() => Promise<Uint8Array | undefined>) | undefined,
    length: number | undefined,
    /** Resolves when the next chunk may be sent (a paced download waits for its reader here). */
    gate: (sent: number) => Promise<void>,
    events: {
      sent(bytes: number): void;
      end(bytes: number): void;
      fail(error: unknown): void;
      cancelled(reason: unknown): void;
    },
  ): ReadableStream<Uint8Array> {
    let ahead: Uint8Array | undefined;
    let primed = false;
    let sent = 0;
    const take = async (): Promise<Uint8Array | undefined> =>
      prefix.length > 0 ? prefix.shift() : more ? await more() : undefined;
    const mismatch = () =>
      new PostGuardError(ErrorCode.MALFORMED, `the plaintext does not have the announced length ${length}`);
    return new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          try {
            if (!primed) {
              ahead = await take();
              primed = true;
            }
            if (ahead === undefined) {
              if (length !== undefined && sent !== length) throw mismatch();
              controller.close();
              events.end(sent);
              return;
            }
            await gate(sent);
            const following = await take();
            sent += ahead.byteLength;
            if (length !== undefined && sent > length) throw mismatch();
            controller.enqueue(ahead);
            ahead = following;
            events.sent(sent);
          } catch (error) {
            // Erroring the body makes the browser fail the download (and a fetch's body read reject).
            controller.error(error);
            events.fail(error);
          }
        },
        cancel(reason) {
          events.cancelled(reason);
        },
      },
      { highWaterMark: 0 },
    );
  }

  /**
   * Firefox and WebKit drain a response body as fast as the worker makes it, whatever the page's
   * reader does (they buffer it in their own pipes; worker/README.md). A `paced` registration is
   * read through PreparedDownload.fetch, which acknowledges what the page has read on the reply
   * port; the worker then stays within `pacingWindow` of it. A page that acknowledges nothing for
   * `stallMs` fails the download with SINK_FAILED rather than holding it forever.
   */
  function pacer(r: RegisterRequest, reply: MessagePort): (sent: number) => Promise<void> {
    if (r.paced !== true) return async () => undefined;
    let acknowledged = 0;
    let wake: (() => void) | undefined;
    reply.onmessage = ({ data }: MessageEvent<{ type?: unknown; bytes?: unknown }>) => {
      if (data?.type === MESSAGE_READ && typeof data.bytes === 'number' && Number.isSafeInteger(data.bytes)) {
        acknowledged = Math.max(acknowledged, data.bytes);
        wake?.();
      }
    };
    return async (sent) => {
      while (sent - acknowledged > pacingWindow) {
        await withTimeout(
          new Promise<void>((resolve) => (wake = resolve)),
          stallMs,
          () =>
            new PostGuardError(
              ErrorCode.SINK_FAILED,
              `the page stopped reading the download: nothing acknowledged for ${stallMs / 1000} s`,
            ),
        );
      }
    };
  }

  /** The headers every successful answer carries. */
  function plaintextHeaders(
    r: RegisterRequest,
    verified: 'complete' | 'streaming' | 'segments',
    acceptRanges: boolean,
  ): Headers {
    return new Headers({
      'content-type': r.contentType ?? 'application/octet-stream',
      'content-disposition': contentDisposition(r.disposition ?? 'attachment', safeFilename(r.filename)),
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
      // A decrypted HTML or SVG file previewed inline must not run script in the app's origin.
      'content-security-policy': 'sandbox',
      'referrer-policy': 'no-referrer',
      // complete: every byte and the sender's signature verified before this response was sent.
      // streaming: verified as it is sent. segments: a range, each segment authenticated, the sender not.
      'x-postguard-verified': verified,
      // A media element seeks only in a response that says it may.
      'accept-ranges': acceptRanges ? 'bytes' : 'none',
    });
  }

  /** The whole file, 200. A seekable registration says it takes ranges, and outlives the response. */
  async function respond(
    entry: Registration,
    lifetime: (p: Promise<unknown>) => void,
    acceptRanges = entry.seekable,
  ): Promise<Response> {
    const r = entry.request;
    const reply = entry.reply;
    const abort = new AbortController();
    const stop = () => abort.abort(entry.abort.signal.reason);
    entry.abort.signal.addEventListener('abort', stop, { once: true });
    // While this download lives, the page hears from the worker at least every 10 s, even with the
    // body paused (download.ts gives up on a worker that went silent: stopped by the browser).
    const heartbeat = setInterval(() => post(reply, { type: 'alive' }), heartbeatMs);
    let reported = false;
    const report = (error: unknown) => {
      if (reported) return;
      reported = true;
      abort.abort(error);
      entry.abort.signal.removeEventListener('abort', stop);
      // A media element drops responses as it seeks: that ends this response, not the registration.
      if (entry.seekable && isPostGuardError(error) && error.code === ErrorCode.CANCELLED) return;
      if (entry.seekable) end(entry, error);
      else post(reply, { type: 'error', error: encodeError(error) });
    };
    /** A failure before any byte: an HTTP error with the code, and no download at all. */
    const refuse = (error: unknown): Response => {
      clearInterval(heartbeat);
      report(error);
      return errorResponse(
        statusFor(error),
        isPostGuardError(error) ? error.code : 'SOURCE_FAILED',
        (error as Error)?.message ?? String(error),
      );
    };

    let first: Unsealing;
    try {
      first = await startUnsealing(r, abort.signal);
    } catch (error) {
      return refuse(error);
    }

    // 1. Authenticate before answering. The plaintext is held (up to holdLimit) until the final
    //    segment and the sender's signature verified: a small file is then served from memory and a
    //    bad one never becomes a download in any engine (Firefox and WebKit keep what a failed
    //    download wrote; worker/README.md).
    const held: Uint8Array[] = [];
    let heldBytes = 0;
    let overflow: Uint8Array | undefined;
    let lastVerifying = 0;
    const verifying = (bytes: number) => {
      const now = Date.now();
      if (now - lastVerifying >= progressInterval) {
        lastVerifying = now;
        post(reply, { type: 'verifying', bytes });
      }
    };
    try {
      for (;;) {
        const chunk = await first.next();
        if (chunk === undefined) break;
        if (heldBytes + chunk.byteLength > (r.verifyFirst === false ? 0 : holdLimit)) {
          overflow = chunk;
          break;
        }
        held.push(chunk);
        heldBytes += chunk.byteLength;
        verifying(heldBytes);
      }
    } catch (error) {
      await first.cancel(error);
      return refuse(error);
    }

    let verified: VerificationResult | undefined;
    let source = first;
    let length: number | undefined;
    let prefix: Uint8Array[];
    let more: (() => Promise<Uint8Array | undefined>) | undefined;
    let mode: 'complete' | 'streaming';
    if (overflow === undefined) {
      // 1a. The whole file is in hand and authentic.
      try {
        verified = await first.result;
      } catch (error) {
        return refuse(error);
      }
      prefix = held;
      length = heldBytes;
      mode = 'complete';
    } else if (r.verifyFirst !== false && rereadable(r.source)) {
      // 1b. Too big to hold, but the source can be read again: authenticate it all (counting, keeping
      //     nothing), then decrypt it a second time for the response, whose length is now exact.
      let total = heldBytes + overflow.byteLength;
      held.length = 0;
      overflow = undefined;
      try {
        for (let chunk = await first.next(); chunk !== undefined; chunk = await first.next()) {
          total += chunk.byteLength;
          verifying(total);
        }
        verified = await first.result;
        // A URL with a strong ETag is asked for the very bytes just verified (a changed file is then
        // an HTTP 412, refused before any byte).
        source = await startUnsealing(r, abort.signal, first.source.etag);
      } catch (error) {
        await first.cancel(error);
        return refuse(error);
      }
      prefix = [];
      more = () => source.next();
      length = total;
      mode = 'complete';
    } else {
      // 1c. A one-shot stream too big to hold: stream what authenticated, hold back the last chunk,
      //     and error the body if anything fails later.
      prefix = [...held, overflow];
      more = () => first.next();
      const framing = first.sniffer.framing;
      length =
        first.source.size !== undefined && framing
          ? streamingPlaintextSize(first.source.size, framing, prefix[0]!.byteLength)
          : undefined;
      mode = 'streaming';
    }

    let lastProgress = 0;
    let settle!: () => void;
    lifetime(
      new Promise<void>((resolve) => (settle = resolve)).finally(() => {
        clearInterval(heartbeat);
        entry.abort.signal.removeEventListener('abort', stop);
      }),
    );
    const stream = body(prefix, more, length, pacer(r, reply), {
      sent(bytes) {
        const now = Date.now();
        if (now - lastProgress >= progressInterval) {
          lastProgress = now;
          post(reply, { type: 'progress', bytes });
        }
      },
      end(bytes) {
        // What was sent is described by the pass that sent it: a URL may answer differently the
        // second time (then that pass's own authentication decides, as when streaming).
        void (source === first && verified !== undefined ? Promise.resolve(verified) : source.result)
          .then((result) => post(reply, { type: 'done', bytes, result }), report)
          .finally(settle);
      },
      fail(error) {
        report(error);
        void source.cancel(error).finally(settle);
      },
      cancelled(reason) {
        // The reader went away (download cancelled): stop decrypting and reading the source.
        report(new PostGuardError(ErrorCode.CANCELLED, 'the download was cancelled by its reader', { cause: reason }));
        void source.cancel(reason).finally(settle);
      },
    });

    const headers = plaintextHeaders(r, mode, acceptRanges);
    if (length !== undefined) headers.set('content-length', String(length));
    return new Response(stream, { status: 200, headers });
  }

  /**
   * A seekable registration's file, opened once (segment 0 and the final segment authenticated,
   * the exact length known); `undefined` when the source does not seek, an error response (and
   * the registration ended) when nothing of the file can be served.
   */
  async function seekableFile(entry: Registration): Promise<SeekableFile | undefined | Response> {
    const r = entry.request;
    entry.file ??= randomAccess(r.source, doFetch, entry.abort.signal, stallMs).then((source) =>
      source === undefined ? undefined : openSeekable(source, r.vk, r.recipientId, r.usk),
    );
    try {
      return await entry.file;
    } catch (error) {
      // A wrong key, a damaged segment 0 or final segment.
      end(entry, error);
      return errorResponse(
        statusFor(error),
        isPostGuardError(error) ? error.code : 'SOURCE_FAILED',
        (error as Error)?.message ?? String(error),
      );
    }
  }

  /**
   * HEAD of a seekable registration: what a GET without Range would send, without the body (a
   * player may ask for the length and whether it can seek before it reads). The length needs
   * segment 0 and the final segment, as a range does. A one-shot download has no HEAD: it is
   * served once, and a HEAD must not spend it.
   */
  async function respondHead(entry: Registration): Promise<Response> {
    const file = await seekableFile(entry);
    if (file instanceof Response) return new Response(null, { status: file.status, headers: file.headers });
    const headers = plaintextHeaders(entry.request, 'complete', file !== undefined);
    if (file !== undefined) headers.set('content-length', String(file.total));
    return new Response(null, { status: 200, headers });
  }

  /**
   * A Range request of a seekable registration: 206 with the segments that hold the range, each
   * authenticated before its bytes go out; 416 for a range past the end; the whole file (200)
   * when the source turns out not to seek (a URL whose server ignores ranges).
   */
  async function respondRange(
    entry: Registration,
    range: string,
    lifetime: (p: Promise<unknown>) => void,
  ): Promise<Response> {
    const r = entry.request;
    const file = await seekableFile(entry);
    if (file instanceof Response) return file;
    if (file === undefined) return respond(entry, lifetime, false);
    const answer = parseRange(range, file.total);
    if (answer.kind === 'full') return respond(entry, lifetime);
    if (answer.kind === 'unsatisfiable') {
      return new Response(null, {
        status: 416,
        headers: {
          'content-range': unsatisfiedRange(file.total),
          'accept-ranges': 'bytes',
          'cache-control': 'no-store',
        },
      });
    }
    const { start, end: last } = answer;
    post(entry.reply, { type: 'range', start, end: last, total: file.total, sender: file.sender });
    const pieces = file.range(start, last);
    let settle!: () => void;
    lifetime(new Promise<void>((resolve) => (settle = resolve)));
    const onEnd = () => {
      controller?.error(entry.abort.signal.reason);
      void pieces.return().finally(settle);
    };
    let controller: ReadableStreamDefaultController<Uint8Array> | undefined;
    entry.abort.signal.addEventListener('abort', onEnd, { once: true });
    const finish = () => {
      entry.abort.signal.removeEventListener('abort', onEnd);
      settle();
    };
    let cancelled = false;
    const stream = new ReadableStream<Uint8Array>(
      {
        start(c) {
          controller = c;
        },
        async pull(c) {
          let next: IteratorResult<Uint8Array, void>;
          try {
            next = await withTimeout(
              pieces.next(),
              stallMs * 2,
              () => new PostGuardError(ErrorCode.SOURCE_FAILED, 'a segment of the range did not arrive in time'),
            );
          } catch (error) {
            if (cancelled) return;
            // As for a full download: the body errors, and the page hears why (TAMPERED, ...).
            c.error(error);
            finish();
            end(entry, error);
            return;
          }
          // A reader that cancelled while this segment was being decrypted wants nothing more.
          if (cancelled) return;
          if (next.done) {
            c.close();
            finish();
          } else c.enqueue(next.value);
        },
        async cancel() {
          // The media element moved on: this response ends, the registration does not.
          cancelled = true;
          finish();
          await pieces.return().catch(() => undefined);
        },
      },
      { highWaterMark: 0 },
    );
    const headers = plaintextHeaders(r, 'segments', true);
    headers.set('content-range', contentRange(start, last, file.total));
    headers.set('content-length', String(last - start + 1));
    return new Response(stream, { status: 206, headers });
  }

  scope.addEventListener('message', (event: ExtendableMessageEvent) => {
    const data = event.data as { type?: unknown; request?: RegisterRequest; id?: unknown } | null;
    if (typeof data !== 'object' || data === null) return;
    if (data.type === MESSAGE_REGISTER) {
      const reply = event.ports[0];
      if (reply !== undefined) register(data.request as RegisterRequest, reply);
    } else if (data.type === MESSAGE_REVOKE && typeof data.id === 'string') {
      const entry = registrations.get(data.id);
      if (entry) {
        end(entry, new PostGuardError(ErrorCode.INVALID_STATE, 'the download was revoked'));
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
    const id = url.pathname.slice(prefix.length).split('/')[0] ?? '';
    if (event.request.method === 'HEAD') {
      const known = registrations.get(id);
      known?.renew?.();
      event.respondWith(
        known === undefined
          ? errorResponse(404, 'UNKNOWN_DOWNLOAD', 'no such download (unknown, already used, or expired)')
          : known.seekable
            ? respondHead(known)
            : errorResponse(405, 'METHOD_NOT_ALLOWED', 'a download is served once, to a GET', { allow: 'GET' }),
      );
      return;
    }
    // Single use: whatever happens next, this id is spent (a seekable one lives on until its lifetime ends).
    const found = registrations.get(id);
    const entry = found?.seekable === true ? found : drop(id);
    entry?.renew?.();
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
    const range = event.request.headers.get('range');
    // If-Range asks for a range only if the representation is unchanged; with no validator of ours to
    // compare it with, the condition is false, and HTTP then says: send the whole representation.
    const ranged = entry.seekable && range !== null && !event.request.headers.has('if-range');
    const track = (p: Promise<unknown>) => lifetimes.push(p);
    const response = (ranged ? respondRange(entry, range, track) : respond(entry, track)).finally(() => {
      void Promise.allSettled(lifetimes).then(() => release());
    });
    event.respondWith(response);
  });
}
