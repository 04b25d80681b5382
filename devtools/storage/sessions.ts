/**
 * In-flight uploads, in memory only (as in Cryptify: a restart loses them, the files stay).
 * A session is evicted after `ttlSeconds` without a successful chunk, chunk replay or status
 * call; that eviction never deletes the file (Cryptify's behaviour).
 *
 * Beyond Cryptify, so a client cannot hold the stand-in's memory and disk with uploads it never
 * finishes: an upload not finalized within `unfinalizedTtlSeconds` of its init expires however
 * active it is (status calls would otherwise keep it forever), and its partial file goes too
 * (`onExpired`); and at most `maxUnfinalized` unfinalized uploads are held at once.
 */

export interface Clock {
  /** Unix seconds. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() / 1000 };

export type MailLanguage = 'EN' | 'NL';

/** The last committed chunk, kept so that a retry whose response was lost can be answered again. */
export interface LastChunk {
  /** The token the chunk was sent with. */
  prevToken: string;
  /** Its start offset. */
  start: number;
  /** The token the server answered. */
  responseToken: string;
}

export interface UploadSession {
  readonly uuid: string;
  token: string;
  uploaded: number;
  readonly recoveryToken: string;
  /** Unix seconds of init. */
  readonly createdAt: number;
  readonly recipients: readonly string[];
  readonly mailContent: string;
  readonly mailLang: MailLanguage;
  readonly confirm: boolean;
  readonly notifyRecipients: boolean;
  /** Set when init carried an API key the PKG validated: the larger tier applies. */
  readonly tenant: string | undefined;
  /** An API key was sent but the PKG could not be reached to validate it. */
  readonly apiKeyValidationFailed: boolean;
  lastChunk: LastChunk | undefined;
  /** How many times finalize succeeded (Cryptify lets a session be finalized again). */
  finalized: number;
  /** Unix seconds of the last activity that keeps the session alive. */
  lastActive: number;
  readonly lock: Mutex;
  /** 32 random bytes from init, for the sender's proof of possession at finalize. */
  readonly challenge: Uint8Array;
  /**
   * A finalize of this upload carried a proof of possession that failed. From then on every
   * finalize needs a proof that verifies: one without a proof is refused too, never finalized unproven.
   */
  proofFailed: boolean;
}

/** Serialises the requests of one upload, as Cryptify holds a per-session lock across a chunk. */
export class Mutex {
  private tail: Promise<void> = Promise.resolve();

  run<T>(task: () => Promise<T>): Promise<T> {
    const result = this.tail.then(task);
    this.tail = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }
}

export interface UploadLimits {
  /** Seconds from init within which an upload must be finalized. Default: no limit. */
  unfinalizedTtlSeconds?: number;
  /** Unfinalized uploads held at once. Default: no limit. */
  maxUnfinalized?: number;
  /** Called with the UUID of an upload that expired unfinalized (to delete its partial file). */
  onExpired?: (uuid: string) => void;
}

export class SessionStore {
  private readonly sessions = new Map<string, UploadSession>();

  constructor(
    private readonly clock: Clock,
    private readonly ttlSeconds: number,
    private readonly limits: UploadLimits = {},
  ) {}

  /** Whether another upload may begin; sweeps expired ones first when at the cap. */
  hasRoomForUpload(): boolean {
    const max = this.limits.maxUnfinalized ?? Infinity;
    if (this.unfinalized() < max) return true;
    this.sweep();
    return this.unfinalized() < max;
  }

  private unfinalized(): number {
    let n = 0;
    for (const session of this.sessions.values()) if (session.finalized === 0) n++;
    return n;
  }

  add(session: UploadSession): void {
    this.sessions.set(session.uuid, session);
  }

  /** The live session, or undefined if unknown or idle for too long (then it is dropped). */
  get(uuid: string): UploadSession | undefined {
    const session = this.sessions.get(uuid);
    if (session === undefined) return undefined;
    const now = this.clock.now();
    const deadline = this.limits.unfinalizedTtlSeconds;
    if (session.finalized === 0 && deadline !== undefined && now - session.createdAt > deadline) {
      this.sessions.delete(uuid);
      this.limits.onExpired?.(uuid);
      return undefined;
    }
    if (now - session.lastActive > this.ttlSeconds) {
      this.sessions.delete(uuid);
      return undefined;
    }
    return session;
  }

  touch(session: UploadSession): void {
    session.lastActive = this.clock.now();
  }

  remove(uuid: string): void {
    this.sessions.delete(uuid);
  }

  /** Drops every idle session; returns how many. */
  sweep(): number {
    let evicted = 0;
    for (const uuid of [...this.sessions.keys()]) {
      if (this.get(uuid) === undefined) evicted++;
    }
    return evicted;
  }

  get size(): number {
    return this.sessions.size;
  }
}
