import { ErrorCode, PostGuardError, isPostGuardError } from '../lib/errors.js';
import type { VerificationResult } from '../lib/signatures.js';
import { StreamUnsealer, type PlaintextStream } from '../lib/unseal.js';
import { encodeError } from './errors.js';
import { failureResponse, plaintextHeaders, type Verified } from './sw-headers.js';
import { MESSAGE_READ, type RegisterRequest } from './sw-protocol.js';
import { post, type DownloadRegistry, type Registration } from './sw-registry.js';
import type { DecrypterSettings } from './sw-settings.js';
import { withTimeout } from '../lib/net/waits.js';
import { offloadedUnsealing, offloadable } from './sw-offload.js';
import { WEBKIT, openSource, rereadable, type OpenedSource } from './sw-source.js';

/**
 * The whole file, answered 200: the plaintext of the registration's source, pulled from the
 * library's opener (StreamUnsealer.open) only as the browser reads. Three ways, by size and
 * source (worker/README.md):
 *   complete, held: a file up to the hold limit is authenticated whole (every segment and the
 *     sender's signature) before its first byte is sent, and served from memory;
 *   complete, twice: a larger Blob or URL is authenticated in a first pass, then decrypted again
 *     for the response (a URL pinned to the same bytes by its ETag); a Blob's first pass keeps
 *     the first hold limit of plaintext, and the second reads only the rest;
 *   streaming: a one-shot stream too big to hold is sent as it authenticates; the last chunk is
 *     held back until the end verified, so a body never completes before the file did, and any
 *     failure errors it (the browser marks the download failed).
 */

/** What the response needs of the decrypter. */
export interface WholeContext {
  readonly settings: DecrypterSettings;
  readonly registry: DownloadRegistry;
}

/** A running unseal of the registration's source: its plaintext, one authenticated chunk at a time. */
export interface Unsealing {
  /** The next plaintext chunk, or undefined once the final segment (and the signature) verified. */
  next(): Promise<Uint8Array | undefined>;
  /** The plaintext's exact length, when the ciphertext's is known. */
  readonly size: number | undefined;
  readonly result: Promise<VerificationResult>;
  /** A URL source's strong ETag: a second reading asks for exactly these bytes again (If-Match). */
  readonly etag: string | undefined;
  /** The header's bytes as this reading found them. */
  readonly header: Uint8Array;
  /** Who read it: a second reading of a Blob that this one verified only decrypts, in the same place. */
  readonly pass: Pass;
  cancel(reason: unknown): Promise<void>;
}

/** A reading done here (its unsealer), or by a page's crypto worker (its job on that port; sw-offload.ts). */
export type Pass = { unsealer: StreamUnsealer } | { job: number; port: MessagePort };

/** A reading that verified a Blob in full, and its verdict. */
export interface Authenticated {
  pass: Pass;
  result: VerificationResult;
}

/**
 * Opens the source and the plaintext; throws the coded error if the header or the key fails. The
 * page's crypto worker decrypts where the page gave one (sw-offload.ts), else this worker does.
 * `authenticated`: the verdict of a first pass over these very bytes (a Blob, which cannot change
 * between two readings), so this pass only decrypts, each segment's tag still checked.
 */
function startUnsealing(
  r: RegisterRequest,
  settings: DecrypterSettings,
  signal: AbortSignal,
  ifMatch?: string,
  authenticated?: Authenticated,
): Promise<Unsealing> {
  const here = (pin: string | undefined) =>
    unsealHere(
      r,
      settings,
      signal,
      pin,
      authenticated !== undefined && 'unsealer' in authenticated.pass ? authenticated : undefined,
    );
  return offloadable(r) ? offloadedUnsealing(r, settings, signal, ifMatch, authenticated, here) : here(ifMatch);
}

/** Opens the source and the plaintext in this worker (a second reading of a Blob it verified only decrypts). */
async function unsealHere(
  r: RegisterRequest,
  settings: DecrypterSettings,
  signal: AbortSignal,
  ifMatch: string | undefined,
  authenticated: Authenticated | undefined,
): Promise<Unsealing> {
  const source = await openSource(r.source, r.size, settings.fetch, signal, settings.stallMs, ifMatch);
  let reader: ReadableStreamDefaultReader<Uint8Array>;
  let opened: PlaintextStream;
  let unsealer: StreamUnsealer;
  try {
    unsealer = await StreamUnsealer.new(source.stream, r.vk, {
      ...(source.size === undefined ? {} : { size: source.size }),
      segmentsInFlight: SEGMENTS_IN_FLIGHT,
    });
    opened =
      authenticated !== undefined && 'unsealer' in authenticated.pass
        ? await unsealer.reopen(r.recipientId, r.usk, {
            unsealer: authenticated.pass.unsealer,
            result: authenticated.result,
          })
        : await unsealer.open(r.recipientId, r.usk);
    reader = opened.readable.getReader();
  } catch (error) {
    await source.stream.cancel(error).catch(() => undefined);
    // A stall or a short source is what really happened; the unsealer only saw its read fail.
    throw source.failure ?? error;
  }
  return unsealing(source, opened, reader, unsealer);
}

/** A running reading of `source` in this worker, as the response takes it. */
function unsealing(
  source: OpenedSource,
  opened: PlaintextStream,
  reader: ReadableStreamDefaultReader<Uint8Array>,
  unsealer: StreamUnsealer,
): Unsealing {
  const result = opened.result.catch((error: unknown) => Promise.reject(source.failure ?? error));
  result.catch(() => undefined);
  return {
    async next() {
      try {
        const { done, value } = await reader.read();
        return done ? undefined : value;
      } catch (error) {
        throw source.failure ?? error;
      }
    },
    size: opened.size,
    result,
    etag: source.etag,
    header: unsealer.headerBytes,
    pass: { unsealer },
    cancel: (reason) => reader.cancel(reason).catch(() => undefined),
  };
}

/**
 * The second reading of a Blob that `unsealer` (this worker's first reading) verified in full,
 * after the `skip` bytes of plaintext the first reading kept: only the rest of the Blob is read
 * (a slice from the next segment on) and decrypted, each segment's tag checked at its position.
 */
async function resumeHere(
  blob: Blob,
  settings: DecrypterSettings,
  signal: AbortSignal,
  unsealer: StreamUnsealer,
  skip: number,
): Promise<Unsealing> {
  const source = await openSource(
    { kind: 'blob', blob: blob.slice(unsealer.resumeOffset(skip)) },
    undefined,
    settings.fetch,
    signal,
    settings.stallMs,
  );
  let opened: PlaintextStream;
  let reader: ReadableStreamDefaultReader<Uint8Array>;
  try {
    opened = unsealer.resume(source.stream, skip);
    reader = opened.readable.getReader();
  } catch (error) {
    await source.stream.cancel(error).catch(() => undefined);
    throw source.failure ?? error;
  }
  return unsealing(source, opened, reader, unsealer);
}

/**
 * Segments each reading keeps in flight in WebKit: enough to gather the next response chunk
 * (RESPONSE_CHUNK_BYTES, four 256 KiB segments) while the browser takes the current one, where the
 * opener's default four left the thread waiting between the two. Elsewhere the opener's default
 * (more measured no gain in Chromium; worker/README.md, "Where the service worker's time goes in WebKit").
 */
const SEGMENTS_IN_FLIGHT = WEBKIT ? 8 : 0;

/** What a body tells its response as it goes. */
interface BodyEvents {
  sent(bytes: number): void;
  end(bytes: number): void;
  fail(error: unknown): void;
  cancelled(reason: unknown): void;
}

/**
 * The size of the chunks a response body is given, in WebKit: its pipe from a service worker to
 * the page moves 1 MiB chunks about 1.4x faster than 256 KiB ones (a service worker doing nothing
 * else). Chromium's and Firefox's move both alike, so there a segment goes out as it is, without
 * the copy (worker/README.md, "Where a service-worker download's time goes").
 */
const RESPONSE_CHUNK_BYTES = WEBKIT ? 1 << 20 : 0;

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
  events: BodyEvents,
): ReadableStream<Uint8Array> {
  let ahead: Uint8Array | undefined;
  let primed = false;
  let sent = 0;
  let ended = false;
  const one = async (): Promise<Uint8Array | undefined> => {
    const chunk = ended ? undefined : prefix.length > 0 ? prefix.shift() : more ? await more() : undefined;
    ended = chunk === undefined;
    return chunk;
  };
  // Segments go out gathered into RESPONSE_CHUNK_BYTES (WebKit's pipe moves larger chunks
  // faster). Not the first two (the first is sent once the second is in hand, below), so the first
  // byte waits for no more than it did.
  let takes = 0;
  const take = async (): Promise<Uint8Array | undefined> => {
    const first = await one();
    if (first === undefined || takes++ < 2) return first;
    const parts = [first];
    let bytes = first.byteLength;
    for (let chunk; bytes < RESPONSE_CHUNK_BYTES && (chunk = await one()) !== undefined; bytes += chunk.byteLength) {
      parts.push(chunk);
    }
    if (parts.length === 1) return first;
    const joined = new Uint8Array(bytes);
    bytes = 0;
    for (const part of parts) {
      joined.set(part, bytes);
      bytes += part.byteLength;
    }
    return joined;
  };
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
 * port; the worker then stays within the pacing window of it. A page that acknowledges nothing
 * for the stall timeout fails the download with SINK_FAILED rather than holding it forever.
 */
function pacer(r: RegisterRequest, reply: MessagePort, settings: DecrypterSettings): (sent: number) => Promise<void> {
  if (r.paced !== true) return async () => undefined;
  const { pacingWindowBytes, stallMs } = settings;
  let acknowledged = 0;
  let wake: (() => void) | undefined;
  reply.onmessage = ({ data }: MessageEvent<{ type?: unknown; bytes?: unknown }>) => {
    if (data?.type === MESSAGE_READ && typeof data.bytes === 'number' && Number.isSafeInteger(data.bytes)) {
      acknowledged = Math.max(acknowledged, data.bytes);
      wake?.();
    }
  };
  return async (sent) => {
    while (sent - acknowledged > pacingWindowBytes) {
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

/** Reports progress at most once per interval. */
function throttled(intervalMs: number, report: (bytes: number) => void): (bytes: number) => void {
  let last = 0;
  return (bytes) => {
    const now = Date.now();
    if (now - last < intervalMs) return;
    last = now;
    report(bytes);
  };
}

/** How the plaintext goes out once the first pass decided: what is in hand, what follows, and how much. */
interface Plan {
  prefix: Uint8Array[];
  more: (() => Promise<Uint8Array | undefined>) | undefined;
  length: number | undefined;
  verified: Verified;
  /** The pass whose bytes are sent (the second one of a twice-read file). */
  sending: Unsealing;
  /** The verdict already in hand (a file authenticated before the response). */
  result: VerificationResult | undefined;
}

/**
 * The first pass: authenticates the file before answering, holding up to the hold limit. Returns
 * how to send it, or throws (nothing sent: the caller answers an HTTP error).
 */
async function plan(
  first: Unsealing,
  r: RegisterRequest,
  ctx: WholeContext,
  reply: MessagePort,
  signal: AbortSignal,
): Promise<Plan> {
  const { holdLimitBytes, progressIntervalMs } = ctx.settings;
  const verifying = throttled(progressIntervalMs, (bytes) => post(reply, { type: 'verifying', bytes }));
  const held: Uint8Array[] = [];
  let heldBytes = 0;
  let overflow: Uint8Array | undefined;
  const limit = r.verifyFirst === false ? 0 : holdLimitBytes;
  for (let chunk = await first.next(); chunk !== undefined; chunk = await first.next()) {
    if (heldBytes + chunk.byteLength > limit) {
      overflow = chunk;
      break;
    }
    held.push(chunk);
    heldBytes += chunk.byteLength;
    verifying(heldBytes);
  }
  if (overflow === undefined) {
    // The whole file is in hand and authentic.
    const result = await first.result;
    return { prefix: held, more: undefined, length: heldBytes, verified: 'complete', sending: first, result };
  }
  if (r.verifyFirst !== false && rereadable(r.source)) {
    // Too big to hold, but the source can be read again: authenticate it all, then decrypt it a
    // second time for the response, whose length is now exact. A Blob this worker reads keeps the
    // first hold limit of plaintext, so the second reading starts after it and the response
    // starts with it (worker/README.md, "Where a service-worker download's time goes"); a URL,
    // which may answer with other bytes the second time, or a reading elsewhere, keeps nothing.
    const blob = r.source.kind === 'blob' ? r.source.blob : undefined;
    const here = 'unsealer' in first.pass ? first.pass.unsealer : undefined;
    const keep = blob !== undefined && here !== undefined && heldBytes > 0;
    let total = heldBytes + overflow.byteLength;
    if (!keep) held.length = 0;
    for (let chunk = await first.next(); chunk !== undefined; chunk = await first.next()) {
      total += chunk.byteLength;
      verifying(total);
    }
    const result = await first.result;
    if (keep) {
      const rest = await resumeHere(blob, ctx.settings, signal, here, heldBytes);
      try {
        // Its first segment before the response: should the bytes not be the verified ones (a
        // Blob cannot change; a test's can), that is refused before any byte, as below.
        const next = await rest.next();
        if (next !== undefined) held.push(next);
      } catch (error) {
        await rest.cancel(error);
        throw error;
      }
      return { prefix: held, more: () => rest.next(), length: total, verified: 'complete', sending: rest, result };
    }
    // A Blob holds the very bytes just verified, so the second pass only decrypts (worker/README.md,
    // "Verify first"). A URL with a strong ETag is asked for the very bytes just verified (a changed
    // file is then an HTTP 412, refused before any byte); a URL is authenticated again as it streams.
    const second = await startUnsealing(
      r,
      ctx.settings,
      signal,
      first.etag,
      blob !== undefined ? { pass: first.pass, result } : undefined,
    );
    return { prefix: [], more: () => second.next(), length: total, verified: 'complete', sending: second, result };
  }
  // A one-shot stream too big to hold: what authenticated goes out, the rest as it authenticates.
  return {
    prefix: [...held, overflow],
    more: () => first.next(),
    length: first.size,
    verified: 'streaming',
    sending: first,
    result: undefined,
  };
}

/** The whole file, 200. A seekable registration says it takes ranges, and outlives the response. */
export async function respondWhole(
  entry: Registration,
  ctx: WholeContext,
  lifetime: (p: Promise<unknown>) => void,
  acceptRanges = entry.seekable,
): Promise<Response> {
  const { request: r, reply } = entry;
  const abort = new AbortController();
  const stop = () => abort.abort(entry.abort.signal.reason);
  entry.abort.signal.addEventListener('abort', stop, { once: true });
  // While this download lives, the page hears from the worker at least every heartbeat, even with
  // the body paused (download.ts gives up on a worker that went silent: stopped by the browser).
  const heartbeat = setInterval(() => post(reply, { type: 'alive' }), ctx.settings.heartbeatMs);
  let reported = false;
  const report = (error: unknown) => {
    if (reported) return;
    reported = true;
    abort.abort(error);
    entry.abort.signal.removeEventListener('abort', stop);
    // A media element drops responses as it seeks: that ends this response, not the registration.
    if (entry.seekable && isPostGuardError(error) && error.code === ErrorCode.CANCELLED) return;
    if (entry.seekable) ctx.registry.end(entry, error);
    else post(reply, { type: 'error', error: encodeError(error) });
  };

  let first: Unsealing | undefined;
  let how: Plan;
  try {
    first = await startUnsealing(r, ctx.settings, abort.signal);
    how = await plan(first, r, ctx, reply, abort.signal);
  } catch (error) {
    await first?.cancel(error);
    clearInterval(heartbeat);
    report(error);
    return failureResponse(error);
  }

  let settle!: () => void;
  lifetime(
    new Promise<void>((resolve) => (settle = resolve)).finally(() => {
      clearInterval(heartbeat);
      entry.abort.signal.removeEventListener('abort', stop);
    }),
  );
  const { sending } = how;
  const progress = throttled(ctx.settings.progressIntervalMs, (bytes) => post(reply, { type: 'progress', bytes }));
  const stream = body(how.prefix, how.more, how.length, pacer(r, reply, ctx.settings), {
    sent: progress,
    end(bytes) {
      // What was sent is described by the pass that sent it: a URL may answer differently the
      // second time (then that pass's own authentication decides, as when streaming).
      void (sending === first && how.result !== undefined ? Promise.resolve(how.result) : sending.result)
        .then((result) => post(reply, { type: 'done', bytes, result }), report)
        .finally(settle);
    },
    fail(error) {
      report(error);
      void sending.cancel(error).finally(settle);
    },
    cancelled(reason) {
      // The reader went away (download cancelled): stop decrypting and reading the source, whose
      // producer (a page relaying its stream) hears why, with a code.
      const error = new PostGuardError(ErrorCode.CANCELLED, 'the download was cancelled by its reader', {
        cause: reason,
      });
      report(error);
      void sending.cancel(error).finally(settle);
    },
  });

  const headers = plaintextHeaders(r, how.verified, acceptRanges);
  if (how.length !== undefined) headers.set('content-length', String(how.length));
  // Who decrypts the bytes that go out (this worker takes over should the page's go away mid-file).
  headers.set('x-postguard-decrypted-by', 'job' in sending.pass ? 'page-worker' : 'service-worker');
  return new Response(stream, { status: 200, headers });
}
