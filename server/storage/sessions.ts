/**
 * In-flight uploads, in memory only (as in Cryptify: a restart loses them, the files stay).
 * A session is evicted after `ttlSeconds` without a successful chunk, chunk replay or status
 * call; eviction never deletes the file.
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

export class SessionStore {
  private readonly sessions = new Map<string, UploadSession>();

  constructor(
    private readonly clock: Clock,
    private readonly ttlSeconds: number,
  ) {}

  add(session: UploadSession): void {
    this.sessions.set(session.uuid, session);
  }

  /** The live session, or undefined if unknown or idle for too long (then it is dropped). */
  get(uuid: string): UploadSession | undefined {
    const session = this.sessions.get(uuid);
    if (session === undefined) return undefined;
    if (this.clock.now() - session.lastActive > this.ttlSeconds) {
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
