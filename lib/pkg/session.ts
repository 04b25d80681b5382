import { linked, sleep } from '../net/waits.js';
import { PkgClientError, PkgClientErrorCode, aborted, badResponse } from './errors.js';
import { expectOk, readText, withDeadline, type HttpContext } from './http.js';
import { isFinalStatus, isSessionStatus, readSessionClaims, type SessionStatus } from './jwt.js';
import { qrLink, sameDeviceLink, universalLink, androidIntentLink, type SessionPointer } from './links.js';
import { readEventStream } from './sse.js';

/** The subset of EventSource the watcher uses (the DOM's EventSource satisfies it). */
export interface EventSourceLike {
  /** Set by the watcher: called when the stream is open. */
  onopen: ((this: never, ev: Event) => unknown) | null;
  /** Set by the watcher: called with each status event. */
  onmessage: ((this: never, ev: MessageEvent) => unknown) | null;
  /** Set by the watcher: called when the stream fails (the session then polls). */
  onerror: ((this: never, ev: Event) => unknown) | null;
  /** Closes the stream. */
  close(): void;
}
/** A constructor of {@link EventSourceLike} streams, for `PkgClientOptions.EventSource`. */
export type EventSourceConstructor = new (url: string) => EventSourceLike;

export interface SessionTransport {
  readonly http: HttpContext;
  /** e.g. https://pkg.example/v2/irma (no trailing slash). */
  readonly base: string;
  /** undefined: use the fetch-based event reader; null: no events, poll only. */
  readonly EventSource: EventSourceConstructor | null | undefined;
  readonly pollIntervalMs: number;
  /** How long the event stream may take to open before polling takes over. */
  readonly eventsConnectTimeoutMs: number;
  /** Consecutive failed polls (PKG unavailable) before the session gives up. */
  readonly maxPollFailures: number;
}

/** Per-session options of `startSession`. */
export interface SessionOptions {
  /** Aborts the session: it is cancelled at the identity server too, and `result()` rejects with `ABORTED`. */
  signal?: AbortSignal | undefined;
  /** Called on every status change, starting with INITIALIZED. */
  onStatus?: ((status: SessionStatus) => void) | undefined;
}

/** The data of a status event: a JSON string (`"DONE"`), or, from a frontend channel, `{"status": …}`. */
export function statusFromEventData(data: string): SessionStatus | undefined {
  let parsed: unknown = data.trim();
  try {
    parsed = JSON.parse(data);
  } catch {
    // a bare word is accepted as is
  }
  if (typeof parsed === 'object' && parsed !== null) parsed = (parsed as { status?: unknown }).status;
  return isSessionStatus(parsed) ? parsed : undefined;
}

type Ending = { status: SessionStatus; jwt?: string };

const STATUS_RANK: Record<SessionStatus, number> = {
  INITIALIZED: 0,
  PAIRING: 1,
  CONNECTED: 2,
  DONE: 3,
  CANCELLED: 3,
  TIMEOUT: 3,
};

/**
 * One identity session: the user proves attributes with the Yivi app, by scanning `qrText` as a QR
 * code (`qrSvg`, `drawQr`) or following `sameDeviceLink` on a phone. `PkgClient.startSession`
 * returns it (and `decryptionKey` and `signingKeysWithSession` hand it to their `onSession`). Show
 * `status` as it changes (`onStatus`), offer `cancel()`, and await `result()` for the JWT that
 * buys keys from the PKG.
 *
 * The PKG started it at the identity server (its start, statusevents and jwt routes:
 * server/README.md, Routes); this object follows its status until it ends and then fetches the
 * session-result JWT.
 *
 * Status comes from `statusevents/{token}` (server-sent events: EventSource where the runtime has
 * one, a fetch-based reader otherwise). If that stream cannot be opened, errors, or ends before a
 * final status, the session falls back to polling `jwt/{token}` and reading the status claim of
 * each (unverified) JWT, as pg-js falls back from events to polling.
 */
export class IdentitySession {
  private current: SessionStatus = 'INITIALIZED';
  private readonly listeners = new Set<(status: SessionStatus) => void>();
  /** Stops the watchers; fired by cancel(), the caller's signal, or the end of the session. */
  private readonly stop: AbortController;
  private readonly unlink: () => void;
  private cancelled = false;
  private ended = false;
  private readonly outcome: Promise<string>;
  private readonly onCallerAbort = () => {
    if (!this.ended) void this.deleteAtIdentityServer();
  };

  constructor(
    private readonly transport: SessionTransport,
    /** The session pointer: what the QR and the same-device link carry. */
    readonly pointer: SessionPointer,
    /** The requestor token: names the session at the PKG. Treat it as a secret of this page. */
    readonly token: string,
    private readonly options: SessionOptions = {},
  ) {
    const { controller, release: unlink } = linked(options.signal);
    this.stop = controller;
    this.unlink = unlink;
    if (options.onStatus) this.listeners.add(options.onStatus);
    this.outcome = this.run();
    // result() hands the same promise out; a caller that never asks must not see an unhandled rejection.
    this.outcome.catch(() => undefined);
    options.signal?.addEventListener('abort', this.onCallerAbort, { once: true });
  }

  /** The latest status seen. */
  get status(): SessionStatus {
    return this.current;
  }

  /** Text for the QR code (scanned by the Yivi app on another device). */
  get qrText(): string {
    return qrLink(this.pointer);
  }

  /** The same-device link for this browser (Android intent or universal link). */
  get sameDeviceLink(): string {
    return sameDeviceLink(this.pointer);
  }

  /** The universal link (iOS, and anywhere app links work). */
  get universalLink(): string {
    return universalLink(this.pointer);
  }

  /** The Android intent link that opens the Yivi app on this phone. */
  get androidIntentLink(): string {
    return androidIntentLink(this.pointer);
  }

  /** Subscribes to status changes; returns the unsubscribe function. */
  onStatus(listener: (status: SessionStatus) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * The session-result JWT once the person disclosed (DONE with a VALID proof). Rejects with
   * SESSION_CANCELLED, SESSION_TIMEOUT, NOT_VALID, ABORTED, or a PKG error.
   */
  result(): Promise<string> {
    return this.outcome;
  }

  /** Ends the session: the identity server is told (best effort) and result() rejects with SESSION_CANCELLED. */
  async cancel(): Promise<void> {
    if (this.ended) return;
    this.cancelled = true;
    this.stop.abort(new PkgClientError(PkgClientErrorCode.SESSION_CANCELLED, 'the session was cancelled'));
    await this.deleteAtIdentityServer();
  }

  private setStatus(status: SessionStatus): void {
    // Statuses only move forward; a poll answered late must not undo a newer event.
    if (status === this.current || isFinalStatus(this.current) || STATUS_RANK[status] < STATUS_RANK[this.current])
      return;
    this.current = status;
    for (const listener of [...this.listeners]) {
      try {
        listener(status);
      } catch {
        // A listener's failure is its own; the session goes on.
      }
    }
  }

  /** DELETE {u}: what the Yivi web widget does to cancel. The answer does not matter. */
  private async deleteAtIdentityServer(): Promise<void> {
    try {
      await withDeadline(this.transport.http, this.pointer.u, undefined, (signal) =>
        this.transport.http.fetch(this.pointer.u, { method: 'DELETE', signal }).then((r) => r.body?.cancel()),
      );
    } catch {
      // best effort: the session times out on its own
    }
  }

  private async run(): Promise<string> {
    const stop = this.stop.signal;
    try {
      let ending = await this.watchEvents(stop);
      if (ending === undefined) ending = await this.poll(stop);
      return await this.finish(ending, stop);
    } catch (error) {
      if (this.cancelled) {
        throw new PkgClientError(PkgClientErrorCode.SESSION_CANCELLED, 'the session was cancelled', { cause: error });
      }
      if (this.options.signal?.aborted) throw aborted(this.options.signal.reason);
      throw error;
    } finally {
      this.ended = true;
      this.unlink();
      this.options.signal?.removeEventListener('abort', this.onCallerAbort);
      this.stop.abort();
    }
  }

  private async finish(ending: Ending, stop: AbortSignal): Promise<string> {
    this.setStatus(ending.status);
    if (ending.status === 'CANCELLED') {
      throw new PkgClientError(
        PkgClientErrorCode.SESSION_CANCELLED,
        'the session was cancelled at the identity server or in the Yivi app',
      );
    }
    if (ending.status === 'TIMEOUT')
      throw new PkgClientError(PkgClientErrorCode.SESSION_TIMEOUT, 'the session timed out');
    const jwt = ending.jwt ?? (await this.fetchJwt(stop));
    const claims = readSessionClaims(jwt);
    const url = `${this.transport.base}/jwt/[token]`;
    if (claims === undefined) throw badResponse(url, 'the session result is not a JWT with a session status');
    if (claims.status !== 'DONE') throw badResponse(url, `the session ended but its result says ${claims.status}`);
    if (claims.proofStatus !== 'VALID') {
      throw new PkgClientError(
        PkgClientErrorCode.NOT_VALID,
        `the disclosure was not valid (${claims.proofStatus ?? 'no proof status'})`,
      );
    }
    return jwt;
  }

  /** GET jwt/{token}: the session result as a JWT (its status may not be final yet). */
  private fetchJwt(signal: AbortSignal): Promise<string> {
    const url = `${this.transport.base}/jwt/${encodeURIComponent(this.token)}`;
    // The token is in the path: errors name the route, not the URL.
    const shown = `${this.transport.base}/jwt/[token]`;
    return withDeadline(this.transport.http, shown, signal, async (s) => {
      const response = await expectOk(
        await this.transport.http.fetch(url, { headers: this.transport.http.headers, signal: s }),
        shown,
      );
      return (await readText(response, shown)).trim();
    });
  }

  /** Follows the event stream; undefined means "could not, poll instead". */
  private watchEvents(stop: AbortSignal): Promise<Ending | undefined> {
    const { EventSource: ES } = this.transport;
    if (ES === null) return Promise.resolve(undefined);
    const url = `${this.transport.base}/statusevents/${encodeURIComponent(this.token)}`;
    return ES === undefined ? this.watchWithFetch(url, stop) : this.watchWithEventSource(ES, url, stop);
  }

  private watchWithEventSource(
    ES: EventSourceConstructor,
    url: string,
    stop: AbortSignal,
  ): Promise<Ending | undefined> {
    return new Promise((resolve) => {
      if (stop.aborted) return resolve(undefined);
      const source = new ES(url);
      let settled = false;
      const settle = (ending: Ending | undefined) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        stop.removeEventListener('abort', onStop);
        source.onopen = source.onmessage = source.onerror = null;
        source.close();
        resolve(ending);
      };
      const onStop = () => settle(undefined);
      const timer = setTimeout(() => settle(undefined), this.transport.eventsConnectTimeoutMs);
      stop.addEventListener('abort', onStop, { once: true });
      source.onopen = () => {
        clearTimeout(timer);
        void this.catchUp(stop).then((ending) => ending && settle(ending));
      };
      source.onmessage = (event: MessageEvent) => {
        const status = typeof event.data === 'string' ? statusFromEventData(event.data) : undefined;
        if (status === undefined) return;
        this.setStatus(status);
        if (isFinalStatus(status)) settle({ status });
      };
      // Any error (refused, dropped, or the reconnect EventSource would try) hands over to polling.
      source.onerror = () => settle(undefined);
    });
  }

  private async watchWithFetch(url: string, stop: AbortSignal): Promise<Ending | undefined> {
    const { controller, release: unlink } = linked(stop);
    const timer = setTimeout(() => controller.abort(), this.transport.eventsConnectTimeoutMs);
    let ending: Ending | undefined;
    try {
      const response = await this.transport.http.fetch(url, {
        headers: { ...this.transport.http.headers, accept: 'text/event-stream' },
        signal: controller.signal,
      });
      clearTimeout(timer);
      const type = response.headers.get('content-type') ?? '';
      if (!response.ok || !type.startsWith('text/event-stream') || response.body === null) {
        await response.body?.cancel().catch(() => undefined);
        return undefined;
      }
      // A final status seen by the catch-up poll ends the watch: the stream is aborted then.
      void this.catchUp(controller.signal).then((caught) => {
        if (caught && ending === undefined) {
          ending = caught;
          controller.abort();
        }
      });
      await readEventStream(
        response.body,
        ({ event, data }) => {
          if (ending !== undefined) return true;
          if (event !== 'message') return false;
          const status = statusFromEventData(data);
          if (status === undefined) return false;
          this.setStatus(status);
          if (isFinalStatus(status)) ending = { status };
          return ending !== undefined;
        },
        controller.signal,
      );
      return ending;
    } catch {
      return ending;
    } finally {
      clearTimeout(timer);
      unlink();
      controller.abort();
    }
  }

  /**
   * One poll once the event stream is open: no event carries the status at subscription time, so
   * a change between start and subscribing (a fast wallet) would otherwise go unseen. A failure
   * here is not the session's: the events keep coming.
   */
  private async catchUp(stop: AbortSignal): Promise<Ending | undefined> {
    try {
      const jwt = await this.fetchJwt(stop);
      const claims = readSessionClaims(jwt);
      if (claims === undefined || stop.aborted) return undefined;
      this.setStatus(claims.status);
      return isFinalStatus(claims.status) ? { status: claims.status, jwt } : undefined;
    } catch {
      return undefined;
    }
  }

  private async poll(stop: AbortSignal): Promise<Ending> {
    let failures = 0;
    for (;;) {
      let wait = this.transport.pollIntervalMs;
      try {
        const jwt = await this.fetchJwt(stop);
        const claims = readSessionClaims(jwt);
        if (claims === undefined)
          throw badResponse(
            `${this.transport.base}/jwt/[token]`,
            'the session result is not a JWT with a session status',
          );
        failures = 0;
        this.setStatus(claims.status);
        if (isFinalStatus(claims.status)) return { status: claims.status, jwt };
      } catch (error) {
        if (!(error instanceof PkgClientError) || error.code === PkgClientErrorCode.ABORTED) throw error;
        if (
          error.code === PkgClientErrorCode.PKG_REJECTED &&
          (error.status === 404 || error.serverCode === 'SESSION_UNKNOWN')
        ) {
          // The identity server forgot the session: it ended long ago.
          return { status: 'TIMEOUT' };
        }
        if (error.code === PkgClientErrorCode.RATE_LIMITED) {
          wait = Math.max(wait * 2, (error.retryAfter ?? 0) * 1000);
        } else if (error.code === PkgClientErrorCode.PKG_UNAVAILABLE) {
          if (++failures >= this.transport.maxPollFailures) throw error;
          wait = wait * 2 ** Math.min(failures, 4);
        } else {
          throw error;
        }
      }
      await sleep(wait, stop, (signal) => signal.reason);
    }
  }
}
