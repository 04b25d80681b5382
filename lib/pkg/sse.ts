/**
 * A server-sent-events parser over a byte stream, for runtimes without EventSource (Node, service
 * workers) and for reading a stream with fetch's control over headers and aborts. It follows the
 * HTML event-stream rules that matter here: UTF-8, CR / LF / CRLF line ends, `:` comments, the
 * `event` and `data` fields, and no dispatch for an event without data (so the Yivi server's
 * `event: open` is skipped, as an EventSource would).
 */

export interface ServerSentEvent {
  /** `message` unless the stream named it. */
  event: string;
  data: string;
}

/** A line longer than this is not a status event: the stream is refused rather than buffered. */
export const MAX_LINE_CHARS = 64 * 1024;

export class EventStreamParser {
  private buffer = '';
  private data: string[] = [];
  private type = '';
  private pendingCr = false;

  constructor(private readonly onEvent: (event: ServerSentEvent) => void) {}

  /** Feeds decoded text; dispatches every complete event. */
  push(text: string): void {
    let input = text;
    // A CR at the end of the previous piece may be the first half of a CRLF.
    if (this.pendingCr && input.startsWith('\n')) input = input.slice(1);
    this.pendingCr = false;
    let start = 0;
    for (let i = 0; i < input.length; i++) {
      const c = input.charCodeAt(i);
      if (c !== 0x0a && c !== 0x0d) continue;
      this.line(this.buffer + input.slice(start, i));
      this.buffer = '';
      if (c === 0x0d) {
        if (i + 1 < input.length) {
          if (input.charCodeAt(i + 1) === 0x0a) i++;
        } else {
          this.pendingCr = true;
        }
      }
      start = i + 1;
    }
    this.buffer += input.slice(start);
    if (this.buffer.length > MAX_LINE_CHARS)
      throw new Error(`event-stream line longer than ${MAX_LINE_CHARS} characters`);
  }

  private line(line: string): void {
    if (line === '') {
      if (this.data.length > 0) this.onEvent({ event: this.type || 'message', data: this.data.join('\n') });
      this.data = [];
      this.type = '';
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.data.push(value);
    else if (field === 'event') this.type = value;
    // id and retry mean nothing to a one-shot status watcher.
  }
}

/**
 * Reads `body` until it ends or errors, calling `onEvent` per event; when `onEvent` returns true
 * the stream is cancelled and reading stops. (Cancelling the stream, rather than aborting the
 * fetch, is what reliably ends a read in Node 20's fetch when the body is just completing.)
 */
export async function readEventStream(
  body: ReadableStream<Uint8Array>,
  onEvent: (event: ServerSentEvent) => boolean | void,
  signal?: AbortSignal,
): Promise<void> {
  let stop = false;
  const parser = new EventStreamParser((event) => {
    if (!stop && onEvent(event) === true) stop = true;
  });
  const decoder = new TextDecoder();
  const reader = body.getReader();
  // An abort cancels the stream, which settles a pending read at once.
  const onAbort = () => void reader.cancel(signal?.reason).catch(() => undefined);
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    signal?.throwIfAborted();
    while (!stop) {
      const { done, value } = await reader.read();
      signal?.throwIfAborted();
      if (done) {
        parser.push(decoder.decode());
        return;
      }
      parser.push(decoder.decode(value, { stream: true }));
    }
    await reader.cancel().catch(() => undefined);
  } catch (error) {
    await reader.cancel(error).catch(() => undefined);
    throw error;
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
}
