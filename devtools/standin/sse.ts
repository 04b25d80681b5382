import type { FastifyReply } from 'fastify';
import { YiviError, sendYiviError } from './errors.js';
import type { Session } from './sessions.js';
import type { SessionStatus } from './protocol.js';
import { isFinalStatus } from './protocol.js';

/**
 * Server-sent status events, framed as irmago's SSE library writes them:
 *
 *   event: open\n\n          ~200 ms after subscribing (no data line; EventSource does not dispatch it)
 *   data: "CONNECTED"\n\n     one unnamed event per status change, the status as a JSON string
 *
 * No event carries the status at subscription time, there are no ids, retries or keep-alive comments,
 * and the response ends after a final status. Frontend channels send `{"status":"…"}` objects instead.
 */

export const SSE_HEADERS = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache',
  connection: 'keep-alive',
  'x-accel-buffering': 'no',
  'access-control-allow-origin': '*',
  'access-control-allow-methods': 'GET, OPTIONS',
  'access-control-allow-headers': 'Keep-Alive,X-Requested-With,Cache-Control,Content-Type,Last-Event-ID',
} as const;

/** One SSE message in go-sse's layout: optional event line, one data line per payload line, blank line. */
export function frameEvent(data: string, event = ''): string {
  let out = '';
  if (event !== '') out += `event: ${event}\n`;
  if (data !== '') for (const line of data.split('\n')) out += `data: ${line}\n`;
  return `${out}\n`;
}

export type Channel = 'status' | 'frontend';

const payloadFor = (channel: Channel, status: SessionStatus): string =>
  channel === 'status' ? JSON.stringify(status) : JSON.stringify({ status });

export interface SseSettings {
  enabled: boolean;
  /** Delay before the `open` event (irmago: 200 ms, so a just-connected browser does not miss it). */
  openDelayMs: number;
}

/** Open streams, so a shutting-down server can end them instead of waiting for them. */
export class SseStreams {
  private readonly open = new Set<() => void>();

  constructor(private readonly settings: SseSettings) {}

  /**
   * Answers a statusevents request. `unknown` is what to send when `session` is undefined (the
   * requestor route answers 501, the client routes 400 SESSION_UNKNOWN).
   */
  subscribe(reply: FastifyReply, session: Session | undefined, channel: Channel, unknown: YiviError): void {
    if (session === undefined) {
      sendYiviError(reply, unknown);
      return;
    }
    if (!this.settings.enabled) {
      sendYiviError(reply, { status: 500, error: 'SSE_DISABLED', description: 'Server sent events disabled' });
      return;
    }
    if (isFinalStatus(session.status)) {
      const message = "Can't subscribe to server sent events of finished session";
      sendYiviError(reply, new YiviError('UNEXPECTED_REQUEST', message));
      return;
    }

    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, SSE_HEADERS);
    res.flushHeaders();

    let ended = false;
    const end = (): void => {
      if (ended) return;
      ended = true;
      clearTimeout(openTimer);
      session.listeners.delete(listener);
      this.open.delete(end);
      res.end();
    };
    const listener = (status: SessionStatus): void => {
      res.write(frameEvent(payloadFor(channel, status)));
      if (isFinalStatus(status)) end();
    };
    const openTimer = setTimeout(() => {
      if (!ended) res.write(frameEvent('', 'open'));
    }, this.settings.openDelayMs);

    session.listeners.add(listener);
    this.open.add(end);
    res.on('close', end);
  }

  closeAll(): void {
    for (const end of [...this.open]) end();
  }
}
