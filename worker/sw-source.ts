import { ErrorCode, PostGuardError } from '../lib/errors.js';
import { resumableDownload } from '../lib/net/resumable-download.js';
import { withTimeout } from '../lib/net/waits.js';
import { portToReadable } from './port-stream.js';
import type { WireSource } from './sw-protocol.js';

/**
 * The ciphertext behind a service-worker download (sw-core.ts): opened from what the page
 * registered, and watched as it is read so that no read waits forever and a source that ends
 * before its announced size is reported as TRUNCATED (an incomplete file: ask for it again), not
 * as a decryption failure.
 */

export interface OpenedSource {
  stream: ReadableStream<Uint8Array>;
  /** Ciphertext bytes, when known (for Content-Length and the short-read check). */
  size: number | undefined;
  /** The error the watch raised (a stall, a short or long source), if any: the truer cause of a failure. */
  readonly failure: PostGuardError | undefined;
  /** A URL source's strong ETag: a second fetch asks for exactly these bytes again (If-Match). */
  etag?: string;
}

/** Lets go of a registered source that will not be read (a stream's producer hears of it). */
export async function cancelWireSource(source: WireSource): Promise<void> {
  if (source.kind === 'stream') await source.stream.cancel().catch(() => undefined);
  if (source.kind === 'relay')
    await portToReadable(source.port)
      .cancel()
      .catch(() => undefined);
}

/** A source that can be opened again for a second pass: a Blob, or a URL (fetched again). */
export const rereadable = (source: WireSource): boolean => source.kind === 'blob' || source.kind === 'url';

/** WebKit (Safari, WebKitGTK): not Chromium, whose user agent names AppleWebKit too. */
export const isWebKit = (userAgent: string): boolean =>
  // Not `\bChrome`: headless Chromium calls itself HeadlessChrome/, with no word boundary before Chrome.
  /\bAppleWebKit\//.test(userAgent) && !/Chrome\//.test(userAgent);
/** Whether this worker runs in WebKit. */
export const WEBKIT = typeof navigator !== 'undefined' && isWebKit(navigator.userAgent ?? '');

/**
 * Blob.stream() in WebKit reads the whole Blob before it hands over its first chunk, all of it at
 * once (128 MiB in WebKitGTK: 2-3 s before the first byte, and the file in memory), so there a Blob
 * is read in slices. Chromium's stream comes in pieces and reads ahead, faster than slices; so does
 * Firefox's for a Blob a page sent to a worker (in the page it too reads it whole), and both
 * benchmark runs that sliced a 128 MiB Blob there failed (worker/README.md, "Where a service-worker download's time goes").
 */
const WHOLE_BLOB_STREAMS = WEBKIT;
/** The slices a Blob is read in where Blob.stream() would read it whole. */
const BLOB_SLICE_BYTES = 1 << 20;

/** A Blob's bytes as a stream: its own stream, or slices (one read ahead) where that reads it whole (WebKit). */
export function blobStream(blob: Blob, sliced = WHOLE_BLOB_STREAMS): ReadableStream<Uint8Array> {
  if (!sliced || blob.size <= BLOB_SLICE_BYTES) return blob.stream();
  let offset = 0;
  let ahead: Promise<ArrayBuffer> | undefined;
  const slice = () => {
    const start = offset;
    offset = Math.min(blob.size, offset + BLOB_SLICE_BYTES);
    return blob.slice(start, offset).arrayBuffer();
  };
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        if (ahead === undefined && offset >= blob.size) return controller.close();
        const current = ahead ?? slice();
        ahead = offset < blob.size ? slice() : undefined;
        ahead?.catch(() => undefined);
        controller.enqueue(new Uint8Array(await current));
      },
      cancel() {
        ahead = undefined;
      },
    },
    { highWaterMark: 0 },
  );
}

/** What a source gives to read, before the watch. */
interface RawSource {
  stream: ReadableStream<Uint8Array>;
  size: number | undefined;
  etag?: string;
  /** Bounds its own waits (a URL: it resumes a stalled body, which takes longer than one stall). */
  selfBounded?: boolean;
}

/**
 * `doFetch` with `If-Match: pin` on every request, so that a second pass, and every resume of it,
 * asks for the very bytes the first pass verified. If-Match is not a CORS-safelisted header: a
 * request that a host's CORS policy refuses (a rejected fetch) is sent again without it; the bytes
 * are then authenticated as they stream.
 */
function pinnedFetch(doFetch: typeof fetch, pin: string | undefined): typeof fetch {
  if (pin === undefined) return doFetch;
  return (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set('if-match', pin);
    return doFetch(input, { ...init, headers }).catch((error: unknown) =>
      init?.signal?.aborted === true ? Promise.reject(error) : doFetch(input, init),
    );
  };
}

async function rawSource(
  source: WireSource,
  declaredSize: number | undefined,
  doFetch: typeof fetch,
  signal: AbortSignal,
  stallMs: number,
  ifMatch: string | undefined,
): Promise<RawSource> {
  switch (source.kind) {
    case 'blob':
      return { stream: blobStream(source.blob), size: source.blob.size };
    case 'stream':
      return { stream: source.stream, size: declaredSize };
    case 'relay':
      return { stream: portToReadable<Uint8Array>(source.port), size: declaredSize };
    case 'url': {
      // A dropped or stalled connection is resumed where it stopped (lib/net/resumable-download.ts):
      // a save through the service worker survives it, the opener authenticating what was joined.
      const download = await resumableDownload(source.url, {
        fetch: pinnedFetch(doFetch, ifMatch),
        ...(source.headers !== undefined ? { headers: source.headers } : {}),
        credentials: source.credentials ?? 'same-origin',
        signal,
        stallMs,
      });
      return {
        stream: download.readable,
        size: download.size ?? declaredSize,
        ...(download.etag !== undefined ? { etag: download.etag } : {}),
        selfBounded: true,
      };
    }
  }
}

const stalled = (stallMs: number, read: number) =>
  new PostGuardError(
    ErrorCode.SOURCE_FAILED,
    `the ciphertext stopped arriving: nothing for ${stallMs / 1000} s after ${read} bytes`,
  );

const unreadable = (error: unknown) =>
  error instanceof PostGuardError
    ? error
    : new PostGuardError(ErrorCode.SOURCE_FAILED, `the ciphertext could not be read: ${String(error)}`, {
        cause: error,
      });

const truncated = (read: number, size: number) =>
  new PostGuardError(
    ErrorCode.TRUNCATED,
    `the ciphertext ended after ${read} of its ${size} bytes: the file is incomplete`,
  );

const overlong = (size: number) =>
  new PostGuardError(ErrorCode.MALFORMED, `the ciphertext is longer than its announced ${size} bytes`);

/**
 * Opens `source` and watches it: a read that brings nothing for `stallMs` fails with
 * SOURCE_FAILED (a page closed in the middle of relaying its stream); a source that ends short of
 * its known size fails with TRUNCATED, one that runs past it with MALFORMED. A URL is read with
 * resumableDownload, which resumes a dropped or stalled body and bounds its own waits; it fails
 * only when resuming cannot go on. The watch pulls only when its reader does (high-water mark 0),
 * so it adds no buffering.
 */
export async function openSource(
  source: WireSource,
  declaredSize: number | undefined,
  doFetch: typeof fetch,
  signal: AbortSignal,
  stallMs: number,
  ifMatch?: string,
): Promise<OpenedSource> {
  // Only a URL waits to open, and it bounds that wait itself.
  const raw = await rawSource(source, declaredSize, doFetch, signal, stallMs, ifMatch);
  const reader = raw.stream.getReader();
  let read = 0;
  let failure: PostGuardError | undefined;
  // Cancelled by its reader (the unsealer failed, or the download was dropped): a read that was in
  // flight then ends early, which is not the source's fault and must not become its failure.
  let cancelled = false;
  const fail = (error: PostGuardError): never => {
    failure ??= error;
    void reader.cancel(error).catch(() => undefined);
    throw error;
  };
  const stream = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const pending = reader.read();
        const bounded =
          raw.selfBounded === true ? pending : withTimeout(pending, stallMs, () => stalled(stallMs, read));
        const next = await bounded.catch((error: unknown) => fail(unreadable(error)));
        if (next.done) {
          if (raw.size !== undefined && read < raw.size && !cancelled) fail(truncated(read, raw.size));
          controller.close();
          return;
        }
        read += next.value.byteLength;
        if (raw.size !== undefined && read > raw.size) fail(overlong(raw.size));
        controller.enqueue(next.value);
      },
      async cancel(reason) {
        cancelled = true;
        await reader.cancel(reason).catch(() => undefined);
      },
    },
    { highWaterMark: 0 },
  );
  return {
    stream,
    size: raw.size,
    ...(raw.etag !== undefined ? { etag: raw.etag } : {}),
    get failure() {
      return failure;
    },
  };
}
