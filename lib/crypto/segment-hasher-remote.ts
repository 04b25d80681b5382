import { ErrorCode, PostGuardError } from '../errors.js';
import { ownedBytes } from '../owned-bytes.js';
import {
  FORK_DIGEST_BYTES,
  REMOTE_QUEUES,
  remoteInFlight,
  type Direction,
  type Forked,
  type QueueBytes,
  type SegmentHasher,
} from './segment-hasher.js';
import type { XofFactory, Xof } from './xof.js';

/**
 * Segment transcripts kept on another thread (a Node worker thread, a browser's nested worker),
 * and the protocol both sides speak. One thread serves every stream of its parent, each under an
 * id; requests of one stream are answered in order. A segment's buffer is transferred there and
 * back, so the hashing thread never copies payload bytes and the caller gets its buffer again.
 */

export type HashRequest =
  | { op: 'open'; id: number; absorbed: Uint8Array }
  | { op: 'close'; id: number }
  | { op: 'absorb'; id: number; buffer: ArrayBuffer; start: number; end: number; tails: readonly Uint8Array[] };

export interface HashReply {
  id: number;
  buffer: ArrayBuffer;
  digests: Uint8Array[];
}

/** How the parent reaches its hashing thread. */
export interface HashingEndpoint {
  post(request: HashRequest, transfer: ArrayBuffer[]): void;
  /**
   * true while some reply is awaited, false when none is: Node keeps the process alive exactly
   * then (ref/unref); a browser has nothing to hold.
   */
  hold(on: boolean): void;
}

/** The hashing thread's side: answers each request as it comes. */
export function hashingService(
  createShake: XofFactory,
  reply: (r: HashReply, transfer: ArrayBuffer[]) => void,
): (request: HashRequest) => void {
  const transcripts = new Map<number, Xof>();
  return (m) => {
    if (m.op === 'open') {
      transcripts.set(m.id, createShake().update(m.absorbed));
    } else if (m.op === 'close') {
      transcripts.delete(m.id);
    } else {
      const x = transcripts.get(m.id);
      if (x === undefined) return;
      x.update(new Uint8Array(m.buffer, m.start, m.end - m.start));
      const digests = m.tails.map((tail) => x.clone().update(tail).digest(FORK_DIGEST_BYTES));
      reply({ id: m.id, buffer: m.buffer, digests }, [m.buffer]);
    }
  };
}

interface Pending {
  resolve(r: Forked): void;
  reject(e: unknown): void;
  length: number;
}

/** The parent's side: hands out transcripts that live on the thread behind `endpoint`. */
export class RemoteHashing {
  private dead = false;
  private readonly streams = new Map<number, RemoteSegmentHasher>();
  private nextId = 1;
  private waiting = 0;

  /** `queues`: how much each direction keeps queued on the thread (the sealer's 3 MiB both ways unless told). */
  constructor(
    private readonly endpoint: HashingEndpoint,
    readonly queues: QueueBytes = REMOTE_QUEUES,
  ) {}

  get stopped(): boolean {
    return this.dead;
  }

  /** A transcript that has absorbed `absorbed`, continued on the thread. */
  open(absorbed: Uint8Array): SegmentHasher {
    const id = this.nextId++;
    const stream = new RemoteSegmentHasher(this, id);
    this.streams.set(id, stream);
    // Cloned, not transferred, and a clone carries the view's whole ArrayBuffer: the header read
    // from a source that gave the file as one chunk would take the whole file along.
    this.endpoint.post({ op: 'open', id, absorbed: ownedBytes(absorbed) }, []);
    return stream;
  }

  /** A reply from the thread. */
  receive(reply: HashReply): void {
    this.streams.get(reply.id)?.answer(reply.buffer, reply.digests);
  }

  /** The thread is gone: every stream on it fails with INVALID_STATE, now and on later calls. */
  stop(why: string): void {
    if (this.dead) return;
    this.dead = true;
    const error = new PostGuardError(ErrorCode.INVALID_STATE, `the hashing thread stopped (${why})`);
    for (const stream of [...this.streams.values()]) stream.fail(error);
  }

  /** @internal */
  send(request: HashRequest, transfer: ArrayBuffer[]): void {
    this.endpoint.post(request, transfer);
  }

  /** @internal */
  forget(id: number): void {
    if (this.streams.delete(id) && !this.dead) this.endpoint.post({ op: 'close', id }, []);
  }

  /** @internal */
  awaiting(delta: 1 | -1): void {
    this.waiting += delta;
    if (this.waiting === 1 && delta === 1) this.endpoint.hold(true);
    if (this.waiting === 0) this.endpoint.hold(false);
  }
}

class RemoteSegmentHasher implements SegmentHasher {
  private readonly pending: Pending[] = [];
  private failure: unknown;

  constructor(
    private readonly hashing: RemoteHashing,
    private readonly id: number,
  ) {}

  inFlight(segmentSize: number, direction: Direction = 'seal'): number {
    return remoteInFlight(segmentSize, this.hashing.queues[direction]);
  }

  absorbAndFork(buffer: Uint8Array, start: number, end: number, tails: readonly Uint8Array[]): Promise<Forked> {
    if (this.failure !== undefined) return Promise.reject(this.failure);
    // Only a buffer the view owns whole can move to the thread; another is copied first.
    const owned = ownedBytes(buffer);
    return new Promise((resolve, reject) => {
      this.pending.push({ resolve, reject, length: owned.length });
      this.hashing.awaiting(1);
      const transfer = owned.buffer as ArrayBuffer;
      this.hashing.send({ op: 'absorb', id: this.id, buffer: transfer, start, end, tails }, [transfer]);
    });
  }

  answer(buffer: ArrayBuffer, digests: Uint8Array[]): void {
    const p = this.pending.shift();
    if (p === undefined) return;
    this.hashing.awaiting(-1);
    p.resolve({
      buffer: new Uint8Array(buffer, 0, p.length),
      digests: digests.map((d) => new Uint8Array(d.buffer, d.byteOffset, d.byteLength)),
    });
  }

  fail(error: unknown): void {
    this.failure ??= error;
    for (const p of this.pending.splice(0)) {
      this.hashing.awaiting(-1);
      p.reject(error);
    }
    this.hashing.forget(this.id);
  }

  close(): void {
    this.fail(new PostGuardError(ErrorCode.INVALID_STATE, 'the stream’s transcript was closed'));
  }
}
