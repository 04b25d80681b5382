import type { Socket } from 'node:net';

/**
 * Fault injection for tests (stand-in only). Chunk PUTs can fail before anything is written (a
 * server error the client may safely retry), after the chunk was committed (the response is lost;
 * a retry must take Cryptify's idempotent-replay path), or hang until the client gives up (a page
 * reloaded mid-upload). Downloads can be cut after a number of body bytes (a dropped connection
 * the client must resume), or held there until the fault is cleared (a download in progress that
 * a test looks at, then lets go: the connection drops, and the client resumes).
 */

export interface ChunkFault {
  /** How many more chunk requests fail; Infinity for all of them. */
  remaining: number;
  /**
   * The HTTP status to answer, 'reset' to drop the connection without an answer, or 'hang' to
   * hold the request unanswered until the client leaves or the fault is cleared.
   */
  response: number | 'reset' | 'hang';
  /** Fail after committing the chunk (lost response) instead of before reading it. */
  afterCommit: boolean;
  /** Only chunks starting at this offset or later fail, so an upload can be stopped part-way. */
  fromOffset: number;
}

export interface DownloadFault {
  /** How many more downloads are cut. */
  remaining: number;
  /** Body bytes sent before the connection is reset. */
  cutAfterBytes: number;
  /** Hold the connection after those bytes until it is released (cleared), instead of resetting it at once. */
  hold: boolean;
  /** How many downloads pass untouched before the first is cut. */
  skip: number;
}

/** What a cut download does: its bytes, then a reset (at once, or once released). */
export interface DownloadCut {
  cutAfterBytes: number;
  hold: boolean;
}

/** When a chunk fault strikes: before the lock is taken (hang), before the body is read, after commit. */
export type ChunkPhase = 'hold' | 'before' | 'after';

const phaseOf = (fault: ChunkFault): ChunkPhase =>
  fault.response === 'hang' ? 'hold' : fault.afterCommit ? 'after' : 'before';

export class Faults {
  private chunkFault: ChunkFault | undefined;
  private downloadFault: DownloadFault | undefined;
  private readonly held = new Set<Socket>();
  /** How many chunk requests were failed on purpose so far. */
  triggered = 0;
  /** How many downloads were cut on purpose so far. */
  downloadsCut = 0;

  setChunkFault(fault: ChunkFault | undefined): void {
    this.chunkFault = fault;
  }

  setDownloadFault(fault: DownloadFault | undefined): void {
    this.downloadFault = fault;
  }

  /** Consumes one failure if one is armed for this phase and a chunk starting at `start`. */
  take(phase: ChunkPhase, start: number): ChunkFault | undefined {
    const fault = this.chunkFault;
    if (fault === undefined || phaseOf(fault) !== phase || fault.remaining <= 0 || start < fault.fromOffset) {
      return undefined;
    }
    fault.remaining--;
    if (fault.remaining === 0) this.chunkFault = undefined;
    this.triggered++;
    return fault;
  }

  /** Consumes one cut if one is armed and no download is left to skip: what to send before the reset. */
  takeDownload(): DownloadCut | undefined {
    const fault = this.downloadFault;
    if (fault === undefined) return undefined;
    if (fault.skip > 0) {
      fault.skip--;
      return undefined;
    }
    fault.remaining--;
    if (fault.remaining === 0) this.downloadFault = undefined;
    this.downloadsCut++;
    return { cutAfterBytes: fault.cutAfterBytes, hold: fault.hold };
  }

  /**
   * Holds a hung request's connection until its client leaves or {@link release} runs; either
   * way the socket ends destroyed, so nothing waits on it for ever.
   */
  hold(socket: Socket): Promise<void> {
    if (socket.destroyed) return Promise.resolve();
    this.held.add(socket);
    return new Promise((resolve) =>
      socket.once('close', () => {
        this.held.delete(socket);
        resolve();
      }),
    );
  }

  /** Drops every held connection (the fault was cleared, or the server is closing). */
  release(): void {
    for (const socket of this.held) socket.destroy();
  }

  /** Disarms everything and lets hung requests go. */
  clear(): void {
    this.chunkFault = undefined;
    this.downloadFault = undefined;
    this.release();
  }

  describe(): { chunk: ChunkFault | null; download: DownloadFault | null; triggered: number; downloadsCut: number } {
    return {
      chunk: this.chunkFault ?? null,
      download: this.downloadFault ?? null,
      triggered: this.triggered,
      downloadsCut: this.downloadsCut,
    };
  }
}
