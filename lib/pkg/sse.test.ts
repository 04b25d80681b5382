import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EventStreamParser, MAX_LINE_CHARS, readEventStream, type ServerSentEvent } from './sse.js';
import { statusFromEventData } from './session.js';

const parse = (pieces: string[]): ServerSentEvent[] => {
  const events: ServerSentEvent[] = [];
  const parser = new EventStreamParser((e) => events.push(e));
  for (const piece of pieces) parser.push(piece);
  return events;
};

describe('EventStreamParser', () => {
  it('reads the Yivi status stream: the data-less open event is not dispatched', () => {
    const wire = 'event: open\n\ndata: "CONNECTED"\n\ndata: "DONE"\n\n';
    expect(parse([wire])).toEqual([
      { event: 'message', data: '"CONNECTED"' },
      { event: 'message', data: '"DONE"' },
    ]);
  });

  it('handles CR, LF and CRLF line ends, comments, named events and multi-line data', () => {
    const wire = ': keep-alive\r\nevent: status\rdata: a\r\ndata:b\n\r\nid: 7\nretry: 10\ndata\n\n';
    expect(parse([wire])).toEqual([
      { event: 'status', data: 'a\nb' },
      { event: 'message', data: '' },
    ]);
  });

  it('gives the same events however the stream is cut (including inside a CRLF)', () => {
    const wire = 'event: open\r\n\r\ndata: "CONNECTED"\r\n\r\n: c\r\ndata: x\r\ndata: y\r\n\r\ndata: "DONE"\n\n';
    const whole = parse([wire]);
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: wire.length }), { maxLength: 12 }), (cuts) => {
        const points = [...new Set(cuts)].sort((a, b) => a - b);
        const pieces: string[] = [];
        let last = 0;
        for (const p of points) {
          pieces.push(wire.slice(last, p));
          last = p;
        }
        pieces.push(wire.slice(last));
        expect(parse(pieces)).toEqual(whole);
      }),
    );
  });

  it('does not dispatch an event that was not terminated by a blank line', () => {
    expect(parse(['data: "DONE"\n'])).toEqual([]);
  });

  it('refuses an endless line instead of buffering it', () => {
    const parser = new EventStreamParser(() => undefined);
    expect(() => parser.push('data: ' + 'x'.repeat(MAX_LINE_CHARS + 1))).toThrow(/longer than/);
  });

  it('reads a byte stream with multi-byte characters split across chunks', async () => {
    const bytes = new TextEncoder().encode('data: "ĆÖNNECTED ✓"\n\n');
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const b of bytes) controller.enqueue(Uint8Array.of(b));
        controller.close();
      },
    });
    const events: ServerSentEvent[] = [];
    await readEventStream(body, (e) => void events.push(e));
    expect(events).toEqual([{ event: 'message', data: '"ĆÖNNECTED ✓"' }]);
  });

  it('cancels the stream when the parser gives up', async () => {
    let cancelled: unknown;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        controller.enqueue(new TextEncoder().encode('x'.repeat(16 * 1024)));
      },
      cancel(reason) {
        cancelled = reason;
      },
    });
    await expect(readEventStream(body, () => undefined)).rejects.toThrow(/longer than/);
    expect(cancelled).toBeInstanceOf(Error);
  });
});

describe('readEventStream stopping', () => {
  const endless = (cancelled: unknown[]) =>
    new ReadableStream<Uint8Array>({
      pull(controller) {
        controller.enqueue(new TextEncoder().encode('data: "CONNECTED"\n\n'));
      },
      cancel(reason) {
        cancelled.push(reason);
      },
    });

  it('stops and cancels the stream when onEvent returns true', async () => {
    const cancelled: unknown[] = [];
    let seen = 0;
    await readEventStream(endless(cancelled), () => {
      seen += 1;
      return seen === 3;
    });
    expect(seen).toBe(3);
    expect(cancelled).toHaveLength(1);
  });

  it('an abort settles a pending read and rejects with the reason', async () => {
    const cancelled: unknown[] = [];
    const never = new ReadableStream<Uint8Array>({ cancel: (r) => void cancelled.push(r) });
    const controller = new AbortController();
    const reading = readEventStream(never, () => false, controller.signal);
    controller.abort(new Error('stop'));
    await expect(reading).rejects.toThrow('stop');
    expect(cancelled).toHaveLength(1);
  });
});

describe('statusFromEventData', () => {
  it('reads JSON strings, frontend objects and bare words; nothing else', () => {
    expect(statusFromEventData('"DONE"')).toBe('DONE');
    expect(statusFromEventData('{"status":"CANCELLED","nextSession":null}')).toBe('CANCELLED');
    expect(statusFromEventData('TIMEOUT')).toBe('TIMEOUT');
    expect(statusFromEventData('"done"')).toBeUndefined();
    expect(statusFromEventData('{"status":42}')).toBeUndefined();
    expect(statusFromEventData('')).toBeUndefined();
  });
});
