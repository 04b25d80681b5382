import type { createHash, Hash } from 'node:crypto';
import { Worker, type MessagePort } from 'node:worker_threads';
import { FORK_DIGEST_BYTES, REMOTE_QUEUE_BYTES, inlineSegmentHasher, type SegmentHasher } from './segment-hasher.js';
import { RemoteHashing, type HashReply, type HashRequest } from './segment-hasher-remote.js';
import type { Xof } from './xof.js';

/**
 * In Node, a stream's transcript is hashed on a thread of its own. SHAKE128 is the format's
 * ceiling (one core, in order); on the caller's thread it shared that core with AES-GCM calls,
 * signing, copies and the streams, and a 64 MiB stream reached ~55% of it. Here the thread hashes
 * segment i while the caller encrypts, signs and moves segment i+1 (bench/run.ts has the figures).
 *
 * Both directions keep the thread fed by queueing `inFlight` segments there (3 MiB). The unsealer
 * used to keep four (1 MiB): a CPU profile of five 256 MiB StreamUnsealer runs showed the calling
 * thread idle 77 % of the time, waiting on the hashing thread, which itself waited between
 * replies (decrypt, post, reply, enqueue, read on: a pause of either thread emptied the queue).
 * It reached 50 % of the ceiling where sealStream reached 96 %. With the sealer's depth, whole
 * processes alternated four times (256 MiB, median of 5 each, load 11-17): 116 / 196 / 396 / 460
 * MB/s against 100 / 93 / 166 / 281 with four.
 *
 * One thread serves every stream of the process, each under an id. It starts with the first
 * stream; streams that begin before it is up hash inline (a stream cannot move its state), so a
 * process's first stream, and one that runs where threads cannot start, cost what they did. The
 * thread keeps a process alive only while it starts (tens of ms) and while a reply is awaited.
 */

/**
 * The thread's whole program: segment-hasher-remote.ts's protocol (HashRequest in, HashReply out)
 * over node:crypto's SHAKE128, which hashes faster than the portable `hashingService` can here.
 * It runs from its source text, so it uses nothing but its parameters: no imports, no module
 * constants, and no named inner functions (a bundler keeping names would wrap those in a helper
 * the thread does not have).
 */
function hashThread(port: MessagePort, shake: typeof createHash, digestBytes: number): void {
  const transcripts = new Map<number, Hash>();
  port.on('message', (m: HashRequest) => {
    if (m.op === 'open') {
      transcripts.set(m.id, shake('shake128').update(m.absorbed));
    } else if (m.op === 'close') {
      transcripts.delete(m.id);
    } else {
      const h = transcripts.get(m.id);
      if (h === undefined) return;
      h.update(new Uint8Array(m.buffer, m.start, m.end - m.start));
      const reply: HashReply = {
        id: m.id,
        buffer: m.buffer,
        digests: m.tails.map((t) => h.copy({ outputLength: digestBytes }).update(t).digest()),
      };
      port.postMessage(reply, [m.buffer]);
    }
  });
}

// A module of its own as a data: URL, so it works from the sources, from dist and from any bundle.
const THREAD_SOURCE = `import { parentPort } from 'node:worker_threads';
import { createHash } from 'node:crypto';
(${hashThread.toString()})(parentPort, createHash, ${FORK_DIGEST_BYTES});
`;

/**
 * The unsealer queues twice the sealer's 3 MiB here. Its source is often the network, whose chunks
 * come in bursts: reading a download from the storage stand-in (`npm run bench:memory -- --mib 256
 * --skip-browser`, separate processes alternating in both orders, load 5-11), 6 MiB ran faster in 9
 * of 10 pairs, median 1.48x (27-78 MB/s against 42-175). From memory (64 KiB chunks in hand) it
 * measured the same as 3 MiB within the noise (`bench/node-streams.ts`, paired time 3 MiB / 6 MiB
 * 0.82-1.04 over seven runs, median 0.98). It
 * costs ~8 MiB more ArrayBuffers at the peak of such a download (medians 70 and 78 MiB over ten
 * runs each; RSS varied more than that). Sealing keeps 3 MiB: its source is the caller's, and each
 * MiB queued there cost RSS in the SDK's upload (segment-hasher.ts). Browsers' hashing workers keep
 * 3 MiB both ways (hash-worker.ts): WebKit measured no difference from 6 to 24 segments.
 */
export const OPEN_QUEUE_BYTES = 6 << 20;

class HashThread {
  readonly worker: Worker;
  ready = false;
  readonly online: Promise<boolean>;
  readonly hashing: RemoteHashing;

  constructor() {
    // No execArgv: the thread needs none of the process's loaders (tsx, ...), which would slow its start.
    this.worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(THREAD_SOURCE)}`), { execArgv: [] });
    const worker = this.worker;
    let waiting = false;
    this.hashing = new RemoteHashing(
      {
        post: (request, transfer) => worker.postMessage(request, transfer as never),
        hold: (on) => {
          waiting = on;
          // Until it is online the thread keeps the process alive (for `startHashThread()`'s answer).
          if (on) worker.ref();
          else if (this.ready) worker.unref();
        },
      },
      { seal: REMOTE_QUEUE_BYTES, open: OPEN_QUEUE_BYTES },
    );
    this.online = new Promise((resolve) => {
      worker.once('online', () => {
        this.ready = true;
        // Up and idle: from now on only an awaited reply keeps the process alive.
        if (!waiting) worker.unref();
        resolve(true);
      });
      worker.once('exit', () => resolve(false));
    });
    worker.on('message', (m: HashReply) => this.hashing.receive(m));
    const stop = (why: string) => {
      if (thread === this) thread = undefined;
      this.hashing.stop(why);
    };
    worker.on('error', (e) => stop(String(e)));
    worker.on('exit', (code) => stop(`exit code ${code}`));
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
  return t?.ready === true && !t.hashing.stopped ? t.hashing.open(absorbed) : inlineSegmentHasher(transcript);
}
