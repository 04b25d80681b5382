import { randomBytes } from 'node:crypto';
import { YiviError } from './errors.js';
import { evaluateDisclosure, roundDownToWeek } from './disclosure.js';
import { isFinalStatus } from './protocol.js';
import type {
  ProofStatus,
  RemoteError,
  SessionOptions,
  SessionResult,
  SessionStatus,
  SimulatedDisclosure,
} from './protocol.js';
import { LD_CONTEXT } from './protocol.js';
import type { NormalizedRequest } from './request.js';
import { randomPairingCode, randomToken } from './tokens.js';

export interface ProtocolVersion {
  major: number;
  minor: number;
}

/** The only client protocol version the server speaks (irmago's secure minimum and maximum). */
export const SERVER_VERSION: ProtocolVersion = { major: 2, minor: 8 };

export const compareVersions = (a: ProtocolVersion, b: ProtocolVersion): number =>
  a.major !== b.major ? a.major - b.major : a.minor - b.minor;

/**
 * A version header as irmago reads it: JSON, either a string "2.8" or the bare text 2.8, of the form
 * major.minor. Undefined when it does not parse (the caller answers MALFORMED_INPUT).
 */
export function parseVersionHeader(header: string | undefined): ProtocolVersion | undefined {
  if (header === undefined) return undefined;
  let text: unknown;
  try {
    text = JSON.parse(header);
  } catch {
    return undefined;
  }
  const str = typeof text === 'string' ? text : typeof text === 'number' ? header.trim() : undefined;
  if (str === undefined) return undefined;
  const m = /^(\d{1,9})\.(\d{1,9})$/.exec(str);
  if (m === null) return undefined;
  return { major: Number(m[1]), minor: Number(m[2]) };
}

/**
 * The in-memory session table and its state machine, timed by an injected clock (Unix seconds):
 *
 *   INITIALIZED --wallet GET--> CONNECTED (or PAIRING --frontend--> CONNECTED) --proofs--> DONE
 *   any non-final --DELETE--> CANCELLED;  any non-final --deadline--> TIMEOUT
 *
 * As in irmago, timeouts are applied lazily whenever a session is looked up (and by `sweep()`), and a
 * finished session stays readable for `sessionResultLifetime` seconds before it is forgotten.
 */

export interface Clock {
  now(): number;
}

export interface StoreLimits {
  /** Seconds a session may be idle (or wait in INITIALIZED without a request `timeout`). irmago: 15 min. */
  maxSessionLifetime: number;
  /** Seconds a finished session stays readable. irmago: 5 min. */
  sessionResultLifetime: number;
  /** Live sessions kept at most; creation beyond this fails instead of growing without bound. */
  maxSessions: number;
  /**
   * Sessions in progress (not yet DONE, CANCELLED or TIMEOUT) at most. Each can hold a wallet and
   * status-event streams for up to `maxSessionLifetime`; a client that starts sessions and walks away
   * would otherwise fill the table with them. Finished ones only wait to be read.
   */
  maxPendingSessions?: number;
}

/** Forced outcomes for the next /proofs call (test knobs, not part of Yivi). */
export type ForcedOutcome = 'INVALID' | 'EXPIRED' | 'ERROR';

export type StatusListener = (status: SessionStatus) => void;

export interface Session {
  readonly requestorToken: string;
  readonly clientToken: string;
  readonly frontendAuth: string;
  readonly request: NormalizedRequest;
  readonly nonce: string;
  readonly createdAt: number;
  status: SessionStatus;
  result: SessionResult;
  lastActive: number;
  finishedAt: number | undefined;
  clientAuth: string | undefined;
  options: SessionOptions;
  forced: ForcedOutcome | undefined;
  readonly listeners: Set<StatusListener>;
}

/** A random big integer in base64, like gabi's 80-bit nonces (no leading zero byte). */
function newNonce(): string {
  const bytes = randomBytes(10);
  if (bytes[0] === 0) bytes[0] = 1;
  return bytes.toString('base64');
}

export class SessionStore {
  private readonly byRequestor = new Map<string, Session>();
  private readonly byClient = new Map<string, Session>();
  private forcedNext: ForcedOutcome | undefined;
  /** Sessions not in a final status; kept by setStatus, so create need not count. */
  private inProgress = 0;

  constructor(
    private readonly clock: Clock,
    private readonly limits: StoreLimits,
  ) {}

  create(request: NormalizedRequest): Session {
    if (this.byRequestor.size >= this.limits.maxSessions) this.sweep();
    if (this.byRequestor.size >= this.limits.maxSessions) {
      throw new YiviError('INTERNAL_ERROR', 'too many sessions');
    }
    const maxPending = this.limits.maxPendingSessions ?? Infinity;
    if (this.inProgress >= maxPending) this.sweep();
    if (this.inProgress >= maxPending) throw new YiviError('INTERNAL_ERROR', 'too many sessions in progress');
    const now = this.clock.now();
    const requestorToken = randomToken();
    const session: Session = {
      requestorToken,
      clientToken: randomToken(),
      frontendAuth: randomToken(),
      request,
      nonce: newNonce(),
      createdAt: now,
      status: 'INITIALIZED',
      result: { token: requestorToken, status: 'INITIALIZED', type: 'disclosing' },
      lastActive: now,
      finishedAt: undefined,
      clientAuth: undefined,
      options: { '@context': LD_CONTEXT.sessionOptions, pairingMethod: 'none' },
      forced: undefined,
      listeners: new Set(),
    };
    this.byRequestor.set(session.requestorToken, session);
    this.byClient.set(session.clientToken, session);
    this.inProgress++;
    return session;
  }

  /** The session for a requestor token, with its timeout applied; undefined when unknown or expired. */
  byRequestorToken(token: string): Session | undefined {
    return this.live(this.byRequestor.get(token));
  }

  byClientToken(token: string): Session | undefined {
    return this.live(this.byClient.get(token));
  }

  /** Either token; for the stand-in's own knobs. */
  byAnyToken(token: string): Session | undefined {
    return this.byRequestorToken(token) ?? this.byClientToken(token);
  }

  /** How many sessions are in progress (not in a final status). */
  get pendingCount(): number {
    return this.inProgress;
  }

  /** Sessions still waiting for a wallet or its proofs, oldest first. */
  pending(): Session[] {
    this.sweep();
    return [...this.byRequestor.values()].filter((s) => !isFinalStatus(s.status));
  }

  /** Applies due timeouts and forgets expired sessions. Safe to call at any time. */
  sweep(): void {
    for (const session of [...this.byRequestor.values()]) this.live(session);
  }

  forceNextOutcome(outcome: ForcedOutcome | undefined): void {
    this.forcedNext = outcome;
  }

  // --- transitions -------------------------------------------------------------------------------

  /** Requestor or wallet DELETE. A finished session is left as it is. */
  cancel(session: Session): void {
    if (isFinalStatus(session.status)) return;
    this.markAlive(session);
    session.result = { token: session.requestorToken, status: 'CANCELLED', type: 'disclosing' };
    this.setStatus(session, 'CANCELLED');
  }

  /** Knob: the session times out now, as if its deadline had passed. */
  timeOut(session: Session): void {
    if (isFinalStatus(session.status)) return;
    this.setStatus(session, 'TIMEOUT');
  }

  /** Ends the session with an error, as irmago's `session.fail` does. Returns the error to send. */
  fail(session: Session, error: YiviError): YiviError {
    session.result = {
      token: session.requestorToken,
      status: 'CANCELLED',
      type: 'disclosing',
      error: error.toJSON() as RemoteError,
    };
    this.setStatus(session, 'CANCELLED');
    return error;
  }

  /**
   * Wallet `GET {u}/`: negotiates the protocol version (the client's [min, max] must include 2.8),
   * remembers the wallet's Authorization and connects (or waits for PIN pairing).
   */
  connect(session: Session, min: ProtocolVersion, max: ProtocolVersion, clientAuth: string): void {
    if (session.status !== 'INITIALIZED') throw new YiviError('UNEXPECTED_REQUEST', 'Session already started');
    this.markAlive(session);
    const supported = compareVersions(min, SERVER_VERSION) <= 0 && compareVersions(max, SERVER_VERSION) >= 0;
    if (!supported || compareVersions(max, min) < 0) {
      throw this.fail(session, new YiviError('PROTOCOL_VERSION'));
    }
    if (clientAuth === '') {
      throw this.fail(session, new YiviError('CLIENT_UNAUTHORIZED', 'No authorization header provided'));
    }
    session.clientAuth = clientAuth;
    this.setStatus(session, session.options.pairingMethod === 'pin' ? 'PAIRING' : 'CONNECTED');
  }

  /** Frontend options: only before the wallet connects. */
  setPairing(session: Session, method: 'none' | 'pin' | ''): SessionOptions {
    if (session.status !== 'INITIALIZED') {
      const message = 'Frontend options can only be updated when session is in initialized state';
      throw new YiviError('UNEXPECTED_REQUEST', message);
    }
    if (method === 'pin') {
      const pairingCode = randomPairingCode();
      session.options = { '@context': LD_CONTEXT.sessionOptions, pairingMethod: 'pin', pairingCode };
    }
    if (method === 'none') session.options = { '@context': LD_CONTEXT.sessionOptions, pairingMethod: 'none' };
    return session.options;
  }

  pairingCompleted(session: Session): void {
    if (session.status !== 'PAIRING') throw new YiviError('UNEXPECTED_REQUEST', 'Pairing was not enabled');
    this.setStatus(session, 'CONNECTED');
  }

  /** The checks irmago's pairing middleware makes before /request and /proofs. */
  assertConnectedClient(session: Session, clientAuth: string): void {
    if (session.status === 'PAIRING') throw new YiviError('PAIRING_REQUIRED');
    if (session.status !== 'CONNECTED') {
      throw new YiviError('UNEXPECTED_REQUEST', 'Session not yet started or already finished');
    }
    if (session.clientAuth !== clientAuth) throw new YiviError('CLIENT_UNAUTHORIZED');
  }

  /**
   * Wallet `POST {u}/proofs` with a simulated disclosure. The session ends DONE whatever the proof
   * status (the requestor must check it); a forced ERROR ends it CANCELLED and throws.
   */
  submitDisclosure(session: Session, body: SimulatedDisclosure): ProofStatus {
    this.markAlive(session);
    const forced = session.forced ?? this.forcedNext;
    session.forced = undefined;
    this.forcedNext = undefined;
    if (forced === 'ERROR') {
      throw this.fail(session, new YiviError('UNKNOWN_PUBLIC_KEY', 'Missing public key'));
    }
    const issuancetime = roundDownToWeek(body.issuancetime ?? this.clock.now());
    const outcome = evaluateDisclosure(session.request.disclose, body.disclosed, issuancetime);
    let { proofStatus, disclosed } = outcome;
    if (forced === 'INVALID') {
      proofStatus = 'INVALID';
      disclosed = undefined;
    } else if (forced === 'EXPIRED' && proofStatus === 'VALID') {
      proofStatus = 'EXPIRED';
    }
    session.result = { token: session.requestorToken, status: session.status, type: 'disclosing', proofStatus };
    if (disclosed !== undefined && disclosed.length > 0) session.result.disclosed = disclosed;
    this.setStatus(session, 'DONE');
    return proofStatus;
  }

  // --- internals ---------------------------------------------------------------------------------

  private markAlive(session: Session): void {
    session.lastActive = this.clock.now();
  }

  /** When the session times out if nothing happens (irmago's `timeout()`). */
  deadline(session: Session): number {
    const waitingWithTimeout = session.status === 'INITIALIZED' && session.request.clientTimeout !== 0;
    return session.lastActive + (waitingWithTimeout ? session.request.clientTimeout : this.limits.maxSessionLifetime);
  }

  private live(session: Session | undefined): Session | undefined {
    if (session === undefined) return undefined;
    const now = this.clock.now();
    if (!isFinalStatus(session.status) && now >= this.deadline(session)) this.setStatus(session, 'TIMEOUT');
    if (session.finishedAt !== undefined && now >= session.finishedAt + this.limits.sessionResultLifetime) {
      this.byRequestor.delete(session.requestorToken);
      this.byClient.delete(session.clientToken);
      session.listeners.clear();
      return undefined;
    }
    return session;
  }

  private setStatus(session: Session, status: SessionStatus): void {
    if (session.status === status) return;
    if (isFinalStatus(status) && !isFinalStatus(session.status)) this.inProgress--;
    session.status = status;
    session.result.status = status;
    if (isFinalStatus(status)) session.finishedAt = this.clock.now();
    for (const listener of [...session.listeners]) listener(status);
    if (isFinalStatus(status)) session.listeners.clear();
  }
}
