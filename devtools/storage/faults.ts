/**
 * Fault injection for tests (stand-in only): make the next chunk PUTs fail, either before
 * anything is written (a server error the client may safely retry) or after the chunk was
 * committed (the response is lost; a retry must take Cryptify's idempotent-replay path).
 */

export interface ChunkFault {
  /** How many more chunk requests fail; Infinity for all of them. */
  remaining: number;
  /** The HTTP status to answer, or 'reset' to drop the connection without an answer. */
  response: number | 'reset';
  /** Fail after committing the chunk (lost response) instead of before reading it. */
  afterCommit: boolean;
}

export class Faults {
  private chunkFault: ChunkFault | undefined;
  /** How many chunk requests were failed on purpose so far. */
  triggered = 0;

  setChunkFault(fault: ChunkFault | undefined): void {
    this.chunkFault = fault;
  }

  /** Consumes one failure if one is armed for this phase. */
  take(phase: 'before' | 'after'): ChunkFault | undefined {
    const fault = this.chunkFault;
    if (fault === undefined || fault.afterCommit !== (phase === 'after') || fault.remaining <= 0) return undefined;
    fault.remaining--;
    if (fault.remaining === 0) this.chunkFault = undefined;
    this.triggered++;
    return fault;
  }

  describe(): { chunk: ChunkFault | null; triggered: number } {
    return { chunk: this.chunkFault ?? null, triggered: this.triggered };
  }
}
