import { sha256 } from '@noble/hashes/sha2.js';
import { createStore, keys as storeKeys } from 'idb-keyval';
import { seal as sealHere, sealStream as sealStreamHere } from '../../../lib/index.js';
import {
  PkgClient,
  PostGuardWorker,
  createPasskey,
  drawQr,
  indexedDbStore,
  isPostGuardError,
  isPkgClientError,
  prepareDownload,
  qrSvg,
  registerDecryptingServiceWorker,
  triggerDownload,
  type IdentitySession,
  type SealOptions,
  type ServedRange,
} from '../../client.js';

/**
 * The page the Playwright specs drive (worker/test/*.spec.ts): the built postguard-ts/worker,
 * its crypto worker and the decrypting service worker, bundled by Vite as an application would.
 * Everything is exposed on window.pgt; bytes cross page.evaluate as base64.
 */

const b64 = (bytes: Uint8Array): string => {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
};
const unb64 = (text: string): Uint8Array => Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
const hex = (bytes: Uint8Array) => Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');

/** Deterministic, non-repeating-per-chunk plaintext of `size` bytes, generated as it is read. */
const PATTERN = Uint8Array.from({ length: 65_536 + 251 }, (_, i) => (i * 2_654_435_761) >>> 24);
function pattern(size: number, chunk = 65_536): { stream: ReadableStream<Uint8Array>; digest: () => string } {
  const hash = sha256.create();
  let offset = 0;
  let k = 0;
  const stream = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        if (offset >= size) {
          controller.close();
          return;
        }
        const n = Math.min(chunk, size - offset);
        const start = k++ % 251;
        const bytes = PATTERN.slice(start, start + n);
        hash.update(bytes);
        offset += n;
        controller.enqueue(bytes);
      },
    },
    { highWaterMark: 0 },
  );
  return { stream, digest: () => hex(hash.digest()) };
}

/** A sink that hashes what it gets and counts it, keeping nothing. */
function hashingSink() {
  const hash = sha256.create();
  let bytes = 0;
  let state = 'open';
  let abortReason: unknown;
  const writable = new WritableStream<Uint8Array>({
    write(chunk) {
      hash.update(chunk);
      bytes += chunk.length;
    },
    close() {
      state = 'closed';
    },
    abort(reason) {
      state = 'aborted';
      abortReason = reason;
    },
  });
  return {
    writable,
    digest: () => hex(hash.digest()),
    bytes: () => bytes,
    state: () => state,
    abortReason: () => abortReason,
  };
}

/** Collects a stream into one Uint8Array. */
async function collect(readable: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let n = 0;
  const reader = readable.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
    n += value.length;
  }
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

const describeError = (e: unknown) => ({
  name: (e as Error)?.name,
  code: (e as { code?: string })?.code,
  message: (e as Error)?.message,
  postguard: isPostGuardError(e),
  pkg: isPkgClientError(e),
  className: (e as object)?.constructor?.name,
});

let pg: PostGuardWorker;

/**
 * Waits until `seen()` gives something, or 5 s. A cancel crosses from the worker after the call it
 * ends has settled; on a loaded machine that took longer than a fixed 100 ms pause, and the test
 * then read "not cancelled". A cancel that never comes still fails it, 5 s later.
 */
async function noticed(seen: () => unknown, withinMs = 5000): Promise<void> {
  const until = performance.now() + withinMs;
  while (seen() === undefined && performance.now() < until) await new Promise((resolve) => setTimeout(resolve, 10));
}

/** A source of `size` bytes in `chunk`-byte chunks that records how far it was read and why it was cancelled. */
function watchedSource(size: number, chunk = 65_536, reuse = false) {
  const state = { read: 0, cancelled: undefined as unknown };
  const hash = sha256.create();
  const shared = new Uint8Array(chunk);
  const stream = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        if (state.read >= size) return controller.close();
        const n = Math.min(chunk, size - state.read);
        // With `reuse`, one buffer is overwritten for every chunk, as soon as the next is asked for.
        const bytes = reuse ? shared.subarray(0, n) : new Uint8Array(n);
        for (let i = 0; i < n; i += 997) bytes[i] = (state.read + i) >>> 9;
        hash.update(bytes);
        state.read += n;
        controller.enqueue(bytes);
      },
      cancel: (reason) => void (state.cancelled = reason),
    },
    { highWaterMark: 0 },
  );
  return { stream, state, digest: () => hex(hash.digest()) };
}

const pgt = {
  async init(): Promise<string> {
    pg?.terminate();
    pg = new PostGuardWorker();
    return pg.shakeBackend();
  },

  /** Whether the crypto worker hashes streams on its nested hashing worker. */
  hashesOnOwnThread: (): Promise<boolean> => pg.hashesOnOwnThread(),

  /**
   * How many answers the crypto worker gave one call: 1 with one comlink server in it, 2 once its
   * entry had run twice (WebKit re-evaluates it on loading the offload chunk: crypto.worker.ts).
   */
  async answersPerCall(): Promise<number> {
    const answers = new Map<unknown, number>();
    const count = ({ data }: MessageEvent) => {
      const id = (data as { id?: unknown } | null)?.id;
      if (id !== undefined) answers.set(id, (answers.get(id) ?? 0) + 1);
    };
    pg.worker!.addEventListener('message', count);
    try {
      await pg.hashesOnOwnThread();
      // A second server's answer comes right after the first.
      await new Promise((resolve) => setTimeout(resolve, 300));
    } finally {
      pg.worker!.removeEventListener('message', count);
    }
    return Math.max(0, ...answers.values());
  },

  /**
   * The stream relay's rules through the real worker: a source that reuses its buffer, a chunk
   * that is not bytes, a failing sink in this page, a cancel from the worker (tampered segment).
   */
  async relayRules(mpk: string, options: SealOptions, id: string, usk: string, vk: string) {
    const reused = watchedSource(3 * 1024 * 1024 + 5, 65_536, true);
    const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
    const sealing = pg.sealStream(mpk, options, reused.stream, writable);
    const [, ct] = await Promise.all([sealing, collect(readable)]);
    const opened = hashingSink();
    await (await pg.StreamUnsealer.new(new Blob([ct as BlobPart]).stream(), vk)).unseal(id, usk, opened.writable);

    const notBytes = new ReadableStream<unknown>({
      start: (c) => (c.enqueue(new Uint8Array(10)), c.enqueue({ not: 'bytes' })),
    });
    const notBytesError = await pg
      .sealStream(mpk, options, notBytes as ReadableStream<Uint8Array>, hashingSink().writable)
      .then(
        () => undefined,
        (e: unknown) => e,
      );

    const big = watchedSource(64 * 1024 * 1024);
    let writes = 0;
    const failingSink = new WritableStream<Uint8Array>({
      write() {
        if (++writes === 3) throw new DOMException('the disk is full', 'QuotaExceededError');
      },
    });
    const sinkError = await pg.sealStream(mpk, options, big.stream, failingSink).then(
      () => undefined,
      (e: unknown) => e,
    );
    await noticed(() => big.state.cancelled);

    // A ciphertext long enough that the worker finds the damage (segment 2) before the page has
    // read it all: the unsealer keeps up to 3 MiB of segments in flight and the relay a window more,
    // so the 3 MiB file above could be read to its end, its source closed, before the verdict came,
    // and then there is nothing left to cancel.
    const long = watchedSource(16 * 1024 * 1024);
    const sealedLong = new TransformStream<Uint8Array, Uint8Array>();
    const [, longCt] = await Promise.all([
      pg.sealStream(mpk, options, long.stream, sealedLong.writable),
      collect(sealedLong.readable),
    ]);
    const tampered = longCt.slice();
    tampered[600_000]! ^= 1;
    let offset = 0;
    let cancelled: unknown;
    const tamperedSource = new ReadableStream<Uint8Array>(
      {
        pull(controller) {
          if (offset >= tampered.length) return controller.close();
          controller.enqueue(tampered.slice(offset, (offset += 65_536)));
        },
        cancel: (reason) => void (cancelled = reason),
      },
      { highWaterMark: 0 },
    );
    const su = await pg.StreamUnsealer.new(tamperedSource, vk);
    const tamperError = await su.unseal(id, usk, hashingSink().writable).then(
      () => undefined,
      (e: unknown) => e,
    );
    await noticed(() => cancelled);
    return {
      reuse: { equal: opened.digest() === reused.digest(), bytes: opened.bytes() },
      notBytes: { ...describeError(notBytesError), cause: describeError((notBytesError as Error).cause) },
      sinkFailed: {
        ...describeError(sinkError),
        cause: describeError((sinkError as Error).cause),
        read: big.state.read,
        sourceCancel: describeError(big.state.cancelled),
      },
      tampered: {
        ...describeError(tamperError),
        read: offset,
        ctLength: tampered.length,
        sourceCancel: describeError(cancelled),
      },
    };
  },

  /** In-memory seal and unseal through the worker. */
  async memoryRoundTrip(mpk: string, options: SealOptions, id: string, usk: string, vk: string, size: number) {
    const plain = await collect(pattern(size).stream);
    const ct = await pg.seal(mpk, options, plain);
    const u = await pg.Unsealer.new(ct, vk);
    const header = Object.fromEntries(await u.inspect_header());
    const [out, sender] = await u.unseal(id, usk);
    u.free();
    return {
      equal: hex(sha256(out)) === hex(sha256(plain)) && out.length === plain.length,
      header,
      sender,
      ctLength: ct.length,
    };
  },

  /** sealStream and StreamUnsealer through the worker, streams generated and consumed here. */
  async streamRoundTrip(mpk: string, options: SealOptions, id: string, usk: string, vk: string, size: number) {
    const source = pattern(size);
    const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
    const sealing = pg.sealStream(mpk, options, source.stream, writable);
    const su = await pg.StreamUnsealer.new(readable, vk);
    const sink = hashingSink();
    const sender = await su.unseal(id, usk, sink.writable);
    await sealing;
    return { equal: sink.digest() === source.digest(), bytes: sink.bytes(), state: sink.state(), sender };
  },

  /** Seals `size` pattern bytes in the worker; the ciphertext as base64 (for pg-wasm in Node). */
  async seal(mpk: string, options: SealOptions, size: number, mode: 'memory' | 'stream') {
    const source = pattern(size);
    let ct: Uint8Array;
    if (mode === 'memory') {
      ct = await pg.seal(mpk, options, await collect(source.stream));
    } else {
      const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
      const [, bytes] = await Promise.all([pg.sealStream(mpk, options, source.stream, writable), collect(readable)]);
      ct = bytes;
    }
    return { ct: b64(ct), sha: source.digest() };
  },

  /** Opens a base64 ciphertext through the worker; the plaintext's SHA-256. */
  async open(ctB64: string, vk: string, id: string, usk: string, mode: 'memory' | 'stream') {
    const ct = unb64(ctB64);
    try {
      if (mode === 'memory') {
        const u = await pg.Unsealer.new(ct, vk);
        const [plain, sender] = await u.unseal(id, usk);
        return { sha: hex(sha256(plain)), sender };
      }
      const su = await pg.StreamUnsealer.new(new Blob([ct as BlobPart]).stream(), vk);
      const sink = hashingSink();
      const sender = await su.unseal(id, usk, sink.writable);
      return { sha: sink.digest(), sender, state: sink.state() };
    } catch (e) {
      return { error: describeError(e) };
    }
  },

  /** A stream whose ciphertext is tampered at `offset`: the promise's error and the sink's abort reason. */
  async tamperedStream(ctB64: string, offset: number, vk: string, id: string, usk: string) {
    const ct = unb64(ctB64);
    ct[offset]! ^= 1;
    const su = await pg.StreamUnsealer.new(new Blob([ct as BlobPart]).stream(), vk);
    const sink = hashingSink();
    const error = await su.unseal(id, usk, sink.writable).then(
      () => undefined,
      (e: unknown) => e,
    );
    return {
      error: describeError(error),
      state: sink.state(),
      abortReason: describeError(sink.abortReason()),
      delivered: sink.bytes(),
    };
  },

  /** Errors from calls that fail in the worker. */
  async errors(mpk: string, options: SealOptions, vk: string, id: string, usk: string) {
    const out: Record<string, unknown> = {};
    out.garbage = await pg.Unsealer.new(new Uint8Array(100), vk).then(() => 'no error', describeError);
    const ct = await pg.seal(mpk, options, new Uint8Array(10));
    const u = await pg.Unsealer.new(ct, vk);
    out.unknownRecipient = await u.unseal('mallory@example.org', usk).then(() => 'no error', describeError);
    out.badKey = await u.unseal(id, 'AAAA').then(() => 'no error', describeError);
    out.wrongMode = await pg.StreamUnsealer.new(new Blob([ct as BlobPart]).stream(), vk).then(
      () => 'no error',
      describeError,
    );
    out.badOptions = await pg
      .seal(mpk, { ...options, pubSignKey: undefined } as never, new Uint8Array(1))
      .then(() => 'no error', describeError);
    const sink = hashingSink();
    out.sourceFailed = await pg
      .sealStream(mpk, options, new ReadableStream({ pull: (c) => c.error(new Error('disk on fire')) }), sink.writable)
      .then(() => 'no error', describeError);
    out.sourceFailedSink = { state: sink.state(), reason: describeError(sink.abortReason()) };
    return out;
  },

  /**
   * The control for `responsiveness`: requestAnimationFrame gaps over `ms` with nothing to do, so
   * a run is judged against what this page draws on this machine at this moment.
   */
  async idleFrames(ms: number) {
    let frames = 0;
    let maxGap = 0;
    await new Promise((resolve) => requestAnimationFrame(resolve));
    let last = performance.now();
    const started = last;
    await new Promise<void>((resolve) => {
      const tick = () => {
        const now = performance.now();
        maxGap = Math.max(maxGap, now - last);
        last = now;
        frames++;
        if (now - started < ms) requestAnimationFrame(tick);
        else resolve();
      };
      requestAnimationFrame(tick);
    });
    return { frames, maxGap, ms: performance.now() - started };
  },

  /**
   * requestAnimationFrame gaps while `size` bytes are sealed (in-memory) in the worker, or on
   * this thread for comparison.
   */
  async responsiveness(
    mpk: string,
    options: SealOptions,
    size: number,
    where: 'worker' | 'main',
    mode: 'memory' | 'stream',
  ) {
    const plain = mode === 'memory' ? await collect(pattern(size).stream) : undefined;
    let frames = 0;
    let maxGap = 0;
    let last = performance.now();
    let running = true;
    // Measured when the callback runs: a frame's own timestamp is taken before a blocked thread gets to it.
    const tick = () => {
      const now = performance.now();
      maxGap = Math.max(maxGap, now - last);
      last = now;
      frames++;
      document.getElementById('ticks')!.textContent = String(frames);
      if (running) requestAnimationFrame(tick);
    };
    await new Promise((resolve) => requestAnimationFrame(resolve));
    last = performance.now();
    requestAnimationFrame(tick);
    const started = performance.now();
    if (mode === 'memory') {
      if (where === 'worker') await pg.seal(mpk, options, plain!);
      else await sealHere(mpk, options, plain!);
    } else {
      const sink = hashingSink();
      if (where === 'worker') await pg.sealStream(mpk, options, pattern(size).stream, sink.writable);
      else await sealStreamHere(mpk, options, pattern(size).stream, sink.writable);
    }
    const ms = performance.now() - started;
    running = false;
    await new Promise((resolve) => requestAnimationFrame(resolve));
    return { frames, maxGap, ms };
  },

  // ---- service worker ----

  async registerServiceWorker() {
    await registerDecryptingServiceWorker('/postguard-sw.js');
    return navigator.serviceWorker.controller !== null;
  },

  /**
   * `size` pattern bytes sealed in the crypto worker, streamed as ciphertext straight into the
   * service worker (transferred), fetched back as plaintext and hashed as it arrives.
   */
  async swStream(mpk: string, options: SealOptions, id: string, usk: string, vk: string, size: number) {
    const source = pattern(size);
    const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
    const sealing = pg.sealStream(mpk, options, source.stream, writable);
    const download = await prepareDownload({ source: readable, recipientId: id, usk, vk, filename: 'big.bin' });
    const response = await fetch(download.url);
    const hash = sha256.create();
    let bytes = 0;
    const reader = response.body!.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      hash.update(value);
      bytes += value.length;
    }
    await sealing;
    const sender = await download.done;
    return {
      ok: hex(hash.digest()) === source.digest(),
      bytes,
      status: response.status,
      sender,
      contentLength: response.headers.get('content-length'),
    };
  },

  /**
   * `size` pattern bytes sealed in the crypto worker and relayed into the service worker, fetched
   * back and read at `bytesPerSecond` (a slow consumer): what the service worker may buffer then.
   */
  async swSlowRead(
    mpk: string,
    options: SealOptions,
    id: string,
    usk: string,
    vk: string,
    size: number,
    bytesPerSecond: number,
    paced = false,
  ) {
    const source = pattern(size);
    const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
    const sealing = pg.sealStream(mpk, options, source.stream, writable);
    // The worker reports what it has handed to the browser; minus what this page read, that is what
    // sits in between (the engine's buffer), sampled at every read.
    let sent = 0;
    let maxAhead = 0;
    const download = await prepareDownload({
      source: readable,
      recipientId: id,
      usk,
      vk,
      filename: 'slow.bin',
      paced,
      onProgress: (n) => (sent = n),
    });
    const response = await download.fetch();
    const hash = sha256.create();
    let bytes = 0;
    // When the worker has pulled its last byte out (done), how much had this page read?
    let readWhenDone = -1;
    void download.done.then(
      () => (readWhenDone = bytes),
      () => undefined,
    );
    const started = performance.now();
    const reader = response.body!.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      hash.update(value);
      bytes += value.length;
      maxAhead = Math.max(maxAhead, sent - bytes);
      const due = started + (bytes / bytesPerSecond) * 1000;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    }
    await sealing;
    const sender = await download.done;
    return {
      ok: hex(hash.digest()) === source.digest(),
      bytes,
      maxAhead,
      aheadAtDone: size - readWhenDone,
      seconds: (performance.now() - started) / 1000,
      sender: sender.public.con,
    };
  },

  /**
   * A download of a ciphertext being sealed, cancelled after its first chunk: the cancel travels
   * back through the service worker, this page and the crypto worker to the plaintext source.
   */
  async swCancel(mpk: string, options: SealOptions, id: string, usk: string, vk: string, size: number) {
    const source = watchedSource(size);
    const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
    const sealing = pg.sealStream(mpk, options, source.stream, writable).then(
      () => undefined,
      (e: unknown) => e,
    );
    const download = await prepareDownload({ source: readable, recipientId: id, usk, vk, filename: 'cancelled.bin' });
    const response = await fetch(download.url);
    const reader = response.body!.getReader();
    await reader.read();
    await reader.cancel(new DOMException('the user cancelled', 'AbortError'));
    const sealError = await sealing;
    const done = await download.done.then(
      () => undefined,
      (e: unknown) => e,
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    return {
      sealError: describeError(sealError),
      done: describeError(done),
      read: source.state.read,
      sourceCancel: describeError(source.state.cancelled),
    };
  },

  /** Seals pattern bytes into a Blob (kept here under a name), optionally tampered or cut. */
  blobs: new Map<string, Blob>(),
  async makeBlob(
    name: string,
    mpk: string,
    options: SealOptions,
    size: number,
    edit?: { flip?: number; cutTo?: number },
  ) {
    const source = pattern(size);
    const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
    const [, ct] = await Promise.all([pg.sealStream(mpk, options, source.stream, writable), collect(readable)]);
    if (edit?.flip !== undefined) ct[edit.flip < 0 ? ct.length + edit.flip : edit.flip]! ^= 1;
    const bytes = edit?.cutTo === undefined ? ct : ct.subarray(0, edit.cutTo);
    pgt.blobs.set(name, new Blob([bytes as BlobPart]));
    return { sha: source.digest(), ctLength: bytes.length };
  },

  storeBlob(name: string, ctB64: string) {
    pgt.blobs.set(name, new Blob([unb64(ctB64) as BlobPart]));
  },

  /** Registers a stored blob; the URL and a promise for the outcome (read with swOutcome). */
  outcomes: new Map<string, Promise<{ sender?: unknown; error?: ReturnType<typeof describeError> }>>(),
  async swPrepare(
    name: string,
    id: string,
    usk: string,
    vk: string,
    filename: string,
    options: { verifyFirst?: boolean; offload?: boolean } = {},
  ) {
    const download = await prepareDownload({
      source: pgt.blobs.get(name)!,
      recipientId: id,
      usk,
      vk,
      filename,
      ...options,
    });
    pgt.outcomes.set(
      download.id,
      download.done.then(
        (sender) => ({ sender }),
        (e: unknown) => ({ error: describeError(e) }),
      ),
    );
    return { id: download.id, url: download.url };
  },
  swOutcome: (downloadId: string) => pgt.outcomes.get(downloadId),

  /** fetch() of a prepared URL, read to the end: status, headers, hash, or the read error. */
  async swFetch(url: string) {
    const response = await fetch(url);
    const headers = Object.fromEntries(response.headers);
    try {
      const body = new Uint8Array(await response.arrayBuffer());
      return { status: response.status, headers, sha: hex(sha256(body)), bytes: body.length };
    } catch (e) {
      return { status: response.status, headers, readError: describeError(e) };
    }
  },

  /** A fetch of a prepared URL read until `bytes` arrived, then left paused (swFetchRest reads on). */
  paused: undefined as
    | { reader: ReadableStreamDefaultReader<Uint8Array>; chunks: Uint8Array[]; headers: Record<string, string> }
    | undefined,
  async swFetchStart(url: string, bytes: number) {
    const response = await fetch(url);
    const reader = response.body!.getReader();
    const chunks: Uint8Array[] = [];
    let read = 0;
    while (read < bytes) {
      const r = await reader.read();
      if (r.done) break;
      chunks.push(r.value);
      read += r.value.byteLength;
    }
    pgt.paused = { reader, chunks, headers: Object.fromEntries(response.headers) };
    return { status: response.status, read };
  },
  async swFetchRest() {
    const { reader, chunks, headers } = pgt.paused!;
    try {
      for (let r = await reader.read(); !r.done; r = await reader.read()) chunks.push(r.value);
    } catch (e) {
      return { headers, readError: describeError(e) };
    }
    const body = new Uint8Array(await new Blob(chunks as BlobPart[]).arrayBuffer());
    return { headers, sha: hex(sha256(body)), bytes: body.length };
  },

  trigger: (url: string) => triggerDownload(url),

  /**
   * A ciphertext relayed to the service worker as a page stream, cut to `cutAt` bytes while the
   * registration announces `size`: what a network read that dies part way looks like.
   */
  async swRelay(ctB64: string, cutAt: number, size: number, id: string, usk: string, vk: string) {
    const ct = unb64(ctB64).subarray(0, cutAt);
    let offset = 0;
    const stream = new ReadableStream<Uint8Array>(
      {
        pull(controller) {
          if (offset >= ct.length) return controller.close();
          controller.enqueue(ct.slice(offset, (offset += 65_536)));
        },
      },
      { highWaterMark: 0 },
    );
    const download = await prepareDownload({ source: stream, size, recipientId: id, usk, vk, filename: 'relayed.bin' });
    const fetched = await pgt.swFetch(download.url);
    const outcome = await download.done.then(
      (sender) => ({ sender }),
      (e: unknown) => ({ error: describeError(e) }),
    );
    return { ...fetched, outcome };
  },

  /** An image sealed here and previewed through the service worker in an <img>: its decoded size. */
  async swPreviewImage(mpk: string, options: SealOptions, id: string, usk: string, vk: string) {
    const canvas = document.createElement('canvas');
    canvas.width = 123;
    canvas.height = 45;
    const context = canvas.getContext('2d')!;
    context.fillStyle = '#3a7';
    context.fillRect(0, 0, 123, 45);
    const png = await new Promise<Blob>((resolve) => canvas.toBlob((b) => resolve(b!), 'image/png'));
    const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
    const [, ct] = await Promise.all([pg.sealStream(mpk, options, png.stream(), writable), collect(readable)]);
    const download = await prepareDownload({
      source: new Blob([ct as BlobPart]),
      recipientId: id,
      usk,
      vk,
      filename: 'picture.png',
      contentType: 'image/png',
      disposition: 'inline',
    });
    const img = document.createElement('img');
    img.src = download.url;
    document.body.append(img);
    await img.decode();
    const sender = await download.done;
    img.remove();
    return { width: img.naturalWidth, height: img.naturalHeight, sender };
  },

  /**
   * A sealed video (stored with storeBlob) played through a seekable download: a real <video>
   * loads it, seeks to `seekTo` seconds and shows a frame there; then the page's own fetch with
   * `Range: bytes=<probeAt>-` checks the bytes of a 206. The ranges the worker served are reported.
   */
  async swVideoSeek(name: string, id: string, usk: string, vk: string, seekTo: number, probeAt: number) {
    const ranges: ServedRange[] = [];
    const download = await prepareDownload({
      source: pgt.blobs.get(name)!,
      recipientId: id,
      usk,
      vk,
      filename: 'clip.webm',
      contentType: 'video/webm',
      disposition: 'inline',
      seekable: true,
      onRange: (range) => ranges.push(range),
    });
    const video = document.createElement('video');
    video.muted = true;
    video.preload = 'auto';
    const next = (type: string, ms = 60_000) =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () =>
            reject(
              new Error(
                `no ${type} within ${ms} ms (readyState ${video.readyState}, networkState ${video.networkState})`,
              ),
            ),
          ms,
        );
        video.addEventListener(type, () => (clearTimeout(timer), resolve()), { once: true });
        video.addEventListener(
          'error',
          () => (clearTimeout(timer), reject(new Error(`media error ${video.error?.code}: ${video.error?.message}`))),
          { once: true },
        );
      });
    const metadata = next('loadedmetadata');
    video.src = download.url;
    document.body.append(video);
    try {
      await metadata;
      const duration = video.duration;
      const seekableEnd = video.seekable.length > 0 ? video.seekable.end(video.seekable.length - 1) : 0;
      const seeked = next('seeked');
      video.currentTime = seekTo;
      await seeked;
      // A frame at the new position: HAVE_CURRENT_DATA or better. Polled: 'loadeddata' fires only the
      // first time a resource gets there, so after a seek an engine may reach it without an event.
      for (const deadline = Date.now() + 60_000; video.readyState < 2;) {
        if (Date.now() > deadline) throw new Error(`no frame within 60 s of seeking (readyState ${video.readyState})`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const at = { currentTime: video.currentTime, readyState: video.readyState };

      const response = await fetch(download.url, { headers: { range: `bytes=${probeAt}-` } });
      const body = new Uint8Array(await response.arrayBuffer());
      const probe = {
        status: response.status,
        contentRange: response.headers.get('content-range'),
        contentLength: response.headers.get('content-length'),
        acceptRanges: response.headers.get('accept-ranges'),
        verified: response.headers.get('x-postguard-verified'),
        sha: hex(sha256(body)),
        bytes: body.length,
      };
      return {
        duration,
        seekableEnd,
        ...at,
        probe,
        // Every field the page was told, so a test sees anything that claims more than a range proves.
        ranges: ranges.map((range) => ({ ...range })),
      };
    } finally {
      video.removeAttribute('src');
      video.load();
      video.remove();
      download.revoke();
    }
  },

  // ---- PKG client ----

  pkgClient: undefined as PkgClient | undefined,
  session: undefined as IdentitySession | undefined,
  statuses: [] as string[],
  /** Added to the client's clock (ms): a test moves past an entry's expiry with it. */
  clockOffsetMs: 0,
  makePkgClient(
    url: string,
    cacheKeys: boolean,
    offline = false,
    tier: { keyProtection?: 'device' | 'passkey'; credentialId?: string; passkeyTimeoutMs?: number } = {},
  ) {
    pgt.pkgClient = new PkgClient({
      url,
      cacheKeys,
      store: indexedDbStore(),
      now: () => Date.now() + pgt.clockOffsetMs,
      ...(offline ? { fetch: () => Promise.reject(new TypeError('offline')) } : {}),
      ...(tier.keyProtection === undefined ? {} : { keyProtection: tier.keyProtection }),
      passkey: {
        ...(tier.credentialId === undefined ? {} : { credentialId: tier.credentialId }),
        ...(tier.passkeyTimeoutMs === undefined ? {} : { timeoutMs: tier.passkeyTimeoutMs }),
      },
    });
  },
  /** `PkgClient.registerPasskey()`, or the error it threw. */
  async registerPasskey(): Promise<{ credentialId: string } | { error: ReturnType<typeof describeError> }> {
    return pgt.pkgClient!.registerPasskey().catch((e: unknown) => ({ error: describeError(e) }));
  },
  /** `createPasskey()` on its own (not kept as the client's), or the error it threw. */
  async createPasskey(): Promise<{ credentialId: string } | { error: ReturnType<typeof describeError> }> {
    return createPasskey().catch((e: unknown) => ({ error: describeError(e) }));
  },
  async publicKeys() {
    const client = pgt.pkgClient!;
    try {
      return { mpk: await client.masterPublicKey(), vk: await client.verificationKey() };
    } catch (e) {
      return { error: describeError(e) };
    }
  },
  async storedKeys() {
    return (await storeKeys(createStore('postguard', 'pkg-cache'))).map(String);
  },

  /**
   * The recipient flow in the page: the key for `id` from a session (QR shown here, scanned by the
   * test's wallet), then the file opened in the worker. Resolves with the source of the key.
   */
  pendingOpen: undefined as Promise<unknown> | undefined,
  startOpen(ctB64: string, id: string, vk: string, options: { abortAfterSession?: boolean; cacheOnly?: boolean } = {}) {
    pgt.session = undefined;
    pgt.statuses = [];
    const controller = new AbortController();
    pgt.pendingOpen = (async () => {
      try {
        const u = await pg.Unsealer.new(unb64(ctB64), vk);
        const policy = (await u.inspect_header()).get(id)!;
        const key = await pgt.pkgClient!.decryptionKey({
          recipientId: id,
          policy,
          signal: controller.signal,
          ...(options.cacheOnly === true ? { cacheOnly: true } : {}),
          onSession: (session) => {
            pgt.session = session;
            session.onStatus((s) => pgt.statuses.push(s));
            document.getElementById('qr-svg')?.remove();
            const holder = document.createElement('div');
            holder.id = 'qr-svg';
            holder.innerHTML = qrSvg(session.qrText);
            document.body.append(holder);
            drawQr(document.getElementById('qr') as HTMLCanvasElement, session.qrText, { scale: 4 });
            if (options.abortAfterSession) setTimeout(() => controller.abort(), 50);
          },
        });
        const [plain, sender] = await u.unseal(id, key.usk);
        return { text: new TextDecoder().decode(plain), source: key.source, sender };
      } catch (e) {
        return { error: describeError(e) };
      }
    })();
  },
  /** The QR text once a session is showing (undefined before). */
  qrText: () => pgt.session?.qrText,
  sessionToken: () => pgt.session?.token,
  sameDeviceLink: () => pgt.session?.universalLink,
  canvasSize: () => (document.getElementById('qr') as HTMLCanvasElement).width,
  finishOpen: () => pgt.pendingOpen,
  forgetKeys: () => pgt.pkgClient!.forgetKeys(),
};

(window as unknown as { pgt: typeof pgt }).pgt = pgt;

/** What the specs call on window.pgt. */
export type Pgt = typeof pgt;
