import { PassThrough, type Readable } from 'node:stream';
import { PkgError } from '../errors.js';

/**
 * Status-event streams (GET …/statusevents/{token}), bounded and shared.
 *
 * Each stream the PKG relays costs an upstream connection to the identity server for as long as the
 * session lives (Yivi: up to 15 minutes idle). So:
 *
 * - caps: at most `perClient` streams per client (the rate limiter's key) and `total` in all; beyond
 *   them 429 TOO_MANY_STREAMS with Retry-After;
 * - fan-out: all listeners of one session share ONE upstream subscription, opened by the first and
 *   closed when the last one leaves;
 * - an end: a final status (DONE, CANCELLED, TIMEOUT) in the events ends every listener and the
 *   upstream, whether or not the identity server closes its side; so does `maxDurationMs`.
 *
 * Bytes pass through unchanged, but whole events at a time: a listener that joins a running upstream
 * starts at an event boundary, never in the middle of one. It first gets the `open` event the upstream
 * sent before any status (irmago sends one to each subscriber), as its own subscription would have.
 */

export interface StatusStreamLimits {
  /** Streams one client may have open at once. 10. */
  perClient: number;
  /** Streams open at once in this process. 2000. */
  total: number;
  /** Longest a stream (and its upstream) stays open, in ms. 15 minutes, Yivi's session lifetime. */
  maxDurationMs: number;
  /** Retry-After for a refused stream, in seconds. 5. */
  retryAfterSeconds: number;
}

export const DEFAULT_STATUS_STREAM_LIMITS: Readonly<StatusStreamLimits> = Object.freeze({
  perClient: 10,
  total: 2000,
  maxDurationMs: 15 * 60 * 1000,
  retryAfterSeconds: 5,
});

/** Opens the identity server's stream for a session; `signal` ends it. Rejects with a PkgError. */
export type OpenUpstream = (token: string, signal: AbortSignal) => Promise<ReadableStream<Uint8Array>>;

/** An upstream event without its end this long is not SSE: the upstream is dropped. */
const MAX_PENDING_EVENT_BYTES = 64 * 1024;
/** A listener that reads nothing while this much is queued for it is dropped. */
const MAX_QUEUED_BYTES = 256 * 1024;
const FINAL_STATUS =
  /^data: ?(?:"(?:DONE|CANCELLED|TIMEOUT)"|\{.*"status"\s*:\s*"(?:DONE|CANCELLED|TIMEOUT)".*\})\s*$/m;
const EVENT_END = /\r?\n\r?\n/g;

interface Upstream {
  readonly token: string;
  readonly listeners: Set<PassThrough>;
  readonly abort: AbortController;
  /** Settles when the upstream answered (or failed to). */
  readonly opened: Promise<void>;
  /** The upstream's leading `open` event(s), for listeners that join later. */
  greeting: string;
  /** Whether a status event has come (after it, nothing more is greeting). */
  statusSeen: boolean;
  ended: boolean;
}

export interface StatusStreamCounts {
  /** Listeners (client-facing streams) open. */
  listeners: number;
  /** Upstream subscriptions open or opening. */
  upstreams: number;
  /** Clients with at least one stream. */
  clients: number;
}

export class StatusStreams {
  private readonly limits: StatusStreamLimits;
  private readonly upstreams = new Map<string, Upstream>();
  private readonly perClient = new Map<string, number>();
  private open = 0;

  constructor(
    private readonly openUpstream: OpenUpstream,
    limits: Partial<StatusStreamLimits> = {},
  ) {
    this.limits = { ...DEFAULT_STATUS_STREAM_LIMITS, ...limits };
  }

  get counts(): StatusStreamCounts {
    return { listeners: this.open, upstreams: this.upstreams.size, clients: this.perClient.size };
  }

  /**
   * A stream of the session's events for one client. Throws TOO_MANY_STREAMS over a cap, or the
   * upstream's PkgError (SESSION_UNKNOWN, IDP_ERROR, IDP_UNAVAILABLE). `gone` is the client leaving:
   * the stream is then destroyed and its slot freed.
   */
  async subscribe(token: string, client: string, gone: AbortSignal): Promise<Readable> {
    const held = this.perClient.get(client) ?? 0;
    if (held >= this.limits.perClient || this.open >= this.limits.total) {
      throw new PkgError('TOO_MANY_STREAMS', undefined, { retryAfterSeconds: this.limits.retryAfterSeconds });
    }
    // The slot is taken before any await, so concurrent requests cannot overshoot the caps.
    this.perClient.set(client, held + 1);
    this.open++;
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      this.open--;
      const left = (this.perClient.get(client) ?? 1) - 1;
      if (left <= 0) this.perClient.delete(client);
      else this.perClient.set(client, left);
    };

    const listener = new PassThrough();
    listener.on('error', () => undefined);
    listener.once('close', release);
    const upstream = this.upstreams.get(token) ?? this.start(token);
    upstream.listeners.add(listener);
    if (upstream.greeting !== '') listener.write(upstream.greeting);
    const leave = (): void => {
      upstream.listeners.delete(listener);
      listener.destroy();
      if (upstream.listeners.size === 0) this.stop(upstream);
    };
    listener.once('close', leave);
    if (gone.aborted) leave();
    else gone.addEventListener('abort', leave, { once: true });

    try {
      await upstream.opened;
    } catch (e) {
      leave();
      // A client that left while its stream opened hears nothing either way; no warning in the log
      // for the upstream we closed on its behalf.
      if (gone.aborted) throw new PkgError('REQUEST_TIMEOUT', 'the client left', { cause: e });
      throw e;
    }
    if (listener.destroyed)
      throw new PkgError('SESSION_UNKNOWN', undefined, { cause: new Error('stream ended before it began') });
    return listener;
  }

  /** Ends every stream (server shutdown). */
  closeAll(): void {
    for (const upstream of [...this.upstreams.values()]) this.finish(upstream);
  }

  private start(token: string): Upstream {
    const abort = new AbortController();
    let opened!: (body: ReadableStream<Uint8Array>) => void;
    let failed!: (e: unknown) => void;
    const upstream: Upstream = {
      token,
      listeners: new Set(),
      abort,
      opened: new Promise<ReadableStream<Uint8Array>>((resolve, reject) => {
        opened = resolve;
        failed = reject;
      }).then(() => undefined),
      greeting: '',
      statusSeen: false,
      ended: false,
    };
    // Listeners that are waiting observe the failure; nobody else should see an unhandled rejection.
    upstream.opened.catch(() => undefined);
    this.upstreams.set(token, upstream);

    const deadline = setTimeout(() => this.finish(upstream), this.limits.maxDurationMs);
    deadline.unref();
    abort.signal.addEventListener('abort', () => clearTimeout(deadline), { once: true });

    this.openUpstream(token, abort.signal).then(
      (body) => {
        if (upstream.ended) {
          // Everyone left (or the server is closing) while it connected: nobody to relay to.
          void body.cancel().catch(() => undefined);
          failed(new PkgError('IDP_UNAVAILABLE', undefined, { cause: new Error('stream closed while it opened') }));
          return;
        }
        opened(body);
        void this.pump(upstream, body);
      },
      (e: unknown) => {
        failed(e);
        // Listeners have their error from `opened`; drop the entry so the next request tries afresh.
        this.forget(upstream);
        abort.abort();
      },
    );
    return upstream;
  }

  /** Reads the upstream and hands whole events to every listener; ends all on a final status. */
  private async pump(upstream: Upstream, body: ReadableStream<Uint8Array>): Promise<void> {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let pending = '';
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done || upstream.ended) break;
        pending += decoder.decode(value, { stream: true });
        let cut = 0;
        for (const match of pending.matchAll(EVENT_END)) cut = match.index + match[0].length;
        if (cut > 0) {
          const events = pending.slice(0, cut);
          pending = pending.slice(cut);
          if (!upstream.statusSeen) this.noteGreeting(upstream, events);
          this.broadcast(upstream, events);
          if (FINAL_STATUS.test(events)) break;
        }
        if (pending.length > MAX_PENDING_EVENT_BYTES) break;
      }
    } catch {
      // An upstream that breaks off just ends the streams; there is no one to report it to.
    } finally {
      reader.cancel().catch(() => undefined);
      this.finish(upstream);
    }
  }

  /** Events without data before the first status (irmago: `event: open`) greet later listeners too. */
  private noteGreeting(upstream: Upstream, events: string): void {
    for (const event of events.split(/(?<=\n\r?\n)/)) {
      if (/^data/m.test(event)) {
        upstream.statusSeen = true;
        return;
      }
      if (upstream.greeting.length + event.length <= MAX_PENDING_EVENT_BYTES) upstream.greeting += event;
    }
  }

  private broadcast(upstream: Upstream, events: string): void {
    const bytes = Buffer.from(events, 'utf8');
    for (const listener of upstream.listeners) {
      if (listener.destroyed) continue;
      if (listener.writableLength > MAX_QUEUED_BYTES) listener.destroy();
      else listener.write(bytes);
    }
  }

  /** The session is over (or the deadline passed): end every listener and the upstream. */
  private finish(upstream: Upstream): void {
    if (upstream.ended) return;
    upstream.ended = true;
    this.forget(upstream);
    upstream.abort.abort();
    for (const listener of [...upstream.listeners]) listener.end();
  }

  /** The last listener left: nobody needs the upstream any more. */
  private stop(upstream: Upstream): void {
    if (upstream.ended) return;
    upstream.ended = true;
    this.forget(upstream);
    upstream.abort.abort();
  }

  private forget(upstream: Upstream): void {
    if (this.upstreams.get(upstream.token) === upstream) this.upstreams.delete(upstream.token);
  }
}
