import { Worker } from 'node:worker_threads';
import { ErrorCode, PostGuardError } from '../errors.js';
import { ownedBytes } from '../owned-bytes.js';
import { FORK_DIGEST_BYTES, inlineSegmentHasher, type Forked, type SegmentHasher } from './segment-hasher.js';
import type { Xof } from './xof.js';

/**
 * In Node, a stream's transcript is hashed on a thread of its own. SHAKE128 is the format's
 * ceiling (one core, in order); on the caller's thread it shared that core with AES-GCM calls,
 * signing, copies and the streams, and a 64 MiB stream reached ~55% of it. Here the thread hashes
 * segment i while the caller encrypts, signs and moves segment i+1 (bench/run.ts has the figures).
 *
 * One thread serves every stream of the process, each under an id. It starts with the first
 * stream; streams that begin before it is up hash inline (a stream cannot move its state), so a
 * process's first stream, and one that runs where threads cannot start, cost what they did. The
 * thread keeps a process alive only while it starts (tens of ms) and while a reply is awaited.
 */

// A module of its own as a data: URL, so it works from the sources, from dist and from any bundle.
const THREAD_SOURCE = `
import { parentPort } from 'node:worker_threads';
import { createHash } from 'node:crypto';
const transcripts = new Map();
parentPort.on('message', (m) => {
  if (m.op === 'open') {
    transcripts.set(m.id, createHash('shake128').update(m.absorbed));
  } else if (m.op === 'close') {
    transcripts.delete(m.id);
  } else {
    const h = transcripts.get(m.id);
    if (h === undefined) return;
    h.update(new Uint8Array(m.buffer, m.start, m.end - m.start));
    const digests = m.tails.map((t) => h.copy({ outputLength: ${FORK_DIGEST_BYTES} }).update(t).digest());
    parentPort.postMessage({ id: m.id, buffer: m.buffer, digests }, [m.buffer]);
  }
});
`;

interface Pending {
  resolve(r: Forked): void;
  reject(e: unknown): void;
  length: number;
}

class HashThread {
  readonly worker: Worker;
  ready = false;
  readonly online: Promise<boolean>;
  dead = false;
  private readonly streams = new Map<number, ThreadedSegmentHasher>();
  private nextId = 1;
  private waiting = 0;

  constructor() {
    // No execArgv: the thread needs none of the process's loaders (tsx, ...), which would slow its start.
    this.worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(THREAD_SOURCE)}`), { execArgv: [] });
    this.online = new Promise((resolve) => {
      this.worker.once('online', () => {
        this.ready = true;
        // Up and idle: from now on only an awaited reply keeps the process alive.
        if (this.waiting === 0) this.worker.unref();
        resolve(true);
      });
      this.worker.once('exit', () => resolve(false));
    });
    this.worker.on('message', (m: { id: number; buffer: ArrayBuffer; digests: Uint8Array[] }) =>
      this.streams.get(m.id)?.answer(m.buffer, m.digests),
    );
    const stop = (why: string) => {
      if (this.dead) return;
      this.dead = true;
      if (thread === this) thread = undefined;
      const error = new PostGuardError(ErrorCode.INVALID_STATE, `the hashing thread stopped (${why})`);
      for (const stream of [...this.streams.values()]) stream.fail(error);
    };
    this.worker.on('error', (e) => stop(String(e)));
    this.worker.on('exit', (code) => stop(`exit code ${code}`));
    // Until it is online the thread keeps the process alive (for `startHashThread()`'s answer); see above.
  }

  open(absorbed: Uint8Array): ThreadedSegmentHasher {
    const id = this.nextId++;
    const stream = new ThreadedSegmentHasher(this, id);
    this.streams.set(id, stream);
    this.worker.postMessage({ op: 'open', id, absorbed });
    return stream;
  }

  forget(id: number): void {
    if (this.streams.delete(id) && !this.dead) this.worker.postMessage({ op: 'close', id });
  }

  /** Keeps the process alive exactly while some reply is awaited. */
  awaiting(delta: 1 | -1): void {
    this.waiting += delta;
    if (this.waiting === 1 && delta === 1) this.worker.ref();
    if (this.waiting === 0) this.worker.unref();
  }
}

class ThreadedSegmentHasher implements SegmentHasher {
  private readonly pending: Pending[] = [];
  private failure: unknown;

  constructor(
    private readonly thread: HashThread,
    private readonly id: number,
  ) {}

  absorbAndFork(buffer: Uint8Array, start: number, end: number, tails: readonly Uint8Array[]): Promise<Forked> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    // Only a buffer the view owns whole can move to the thread; another is copied first.
    const owned = ownedBytes(buffer);
    return new Promise((resolve, reject) => {
      this.pending.push({ resolve, reject, length: owned.length });
      this.thread.awaiting(1);
      const transfer = owned.buffer as ArrayBuffer;
      this.thread.worker.postMessage({ op: 'absorb', id: this.id, buffer: transfer, start, end, tails }, [transfer]);
    });
  }

  answer(buffer: ArrayBuffer, digests: Uint8Array[]): void {
    const p = this.pending.shift();
    if (p === undefined) return;
    this.thread.awaiting(-1);
    p.resolve({
      buffer: new Uint8Array(buffer, 0, p.length),
      digests: digests.map((d) => new Uint8Array(d.buffer, d.byteOffset, d.byteLength)),
    });
  }

  fail(error: unknown): void {
    this.failure ??= error;
    for (const p of this.pending.splice(0)) {
      this.thread.awaiting(-1);
      p.reject(error);
    }
    this.thread.forget(this.id);
  }

  close(): void {
    this.fail(new PostGuardError(ErrorCode.INVALID_STATE, 'the stream’s transcript was closed'));
  }
}

let thread: HashThread | undefined;
let unavailable = false;

function startThread(): HashThread | undefined {
  if (thread === undefined && !unavailable) {
    try {
      thread = new HashThread();
    } catch {
      // A runtime without worker threads (or one that refuses a data: URL module): hash inline, always.
      unavailable = true;
    }
  }
  return thread;
}

/**
 * Starts the hashing thread if it is not running; resolves true once it is up (false where it
 * cannot start). A program that is about to stream can call it first, so that its first stream
 * already hashes there.
 */
export const startHashThread = (): Promise<boolean> => startThread()?.online ?? Promise.resolve(false);

/** Stops the hashing thread; streams using it fail with INVALID_STATE, later ones start it again. */
export async function stopHashThread(): Promise<void> {
  await thread?.worker.terminate();
}

/**
 * The transcript `transcript` holds (it has absorbed `absorbed` and nothing else) continued on the
 * hashing thread when that is up; on this thread otherwise.
 */
export function segmentHasher(transcript: Xof, absorbed: Uint8Array): SegmentHasher {
  const t = startThread();
  return t?.ready === true && !t.dead ? t.open(absorbed) : inlineSegmentHasher(transcript);
}
