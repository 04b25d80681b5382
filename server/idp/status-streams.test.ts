import type { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { PkgError } from '../errors.js';
import { StatusStreams } from './status-streams.js';

/**
 * StatusStreams on its own, with an upstream the test writes by hand: sharing while the upstream
 * opens, failures, clients that leave early, whole events only, and the bound on an event.
 */

interface FakeUpstream {
  opens: number;
  aborted: number;
  /** Resolves the pending open with a stream the test writes to. */
  answer(): { write(text: string): void; end(): void };
  fail(error: unknown): void;
  open(token: string, signal: AbortSignal): Promise<ReadableStream<Uint8Array>>;
}

function fakeUpstream(): FakeUpstream {
  let pending: { resolve: (body: ReadableStream<Uint8Array>) => void; reject: (e: unknown) => void } | undefined;
  const fake: FakeUpstream = {
    opens: 0,
    aborted: 0,
    open(_token, signal) {
      fake.opens++;
      signal.addEventListener('abort', () => fake.aborted++, { once: true });
      return new Promise((resolve, reject) => {
        pending = { resolve, reject };
        signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
      });
    },
    answer() {
      let controller!: ReadableStreamDefaultController<Uint8Array>;
      const body = new ReadableStream<Uint8Array>({ start: (c) => void (controller = c) });
      pending!.resolve(body);
      return {
        write: (text) => controller.enqueue(new TextEncoder().encode(text)),
        end: () => controller.close(),
      };
    },
    fail(error) {
      pending!.reject(error);
    },
  };
  return fake;
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 10));
const TOKEN = 'A'.repeat(20);

function collect(stream: Readable): { text(): string; ended: Promise<void> } {
  let text = '';
  stream.on('data', (chunk: Buffer) => (text += chunk.toString()));
  const ended = new Promise<void>((resolve) => stream.once('close', () => resolve()));
  return { text: () => text, ended };
}

describe('StatusStreams', () => {
  it('listeners that arrive while the upstream opens share it, and all see the same events', async () => {
    const upstream = fakeUpstream();
    const streams = new StatusStreams((t, s) => upstream.open(t, s));
    const a = streams.subscribe(TOKEN, 'a', new AbortController().signal);
    const b = streams.subscribe(TOKEN, 'b', new AbortController().signal);
    await tick();
    expect(upstream.opens).toBe(1);
    const writer = upstream.answer();
    const [ra, rb] = [collect(await a), collect(await b)];
    writer.write('data: "CONNECTED"\n\ndata: "DONE"\n\n');
    await Promise.all([ra.ended, rb.ended]);
    expect(ra.text()).toBe('data: "CONNECTED"\n\ndata: "DONE"\n\n');
    expect(rb.text()).toBe(ra.text());
    expect(streams.counts).toEqual({ listeners: 0, upstreams: 0, clients: 0 });
    expect(upstream.aborted).toBe(1);
  });

  it('an upstream that fails to open fails every waiting listener and frees their slots', async () => {
    const upstream = fakeUpstream();
    const streams = new StatusStreams((t, s) => upstream.open(t, s), { perClient: 1 });
    const a = streams.subscribe(TOKEN, 'a', new AbortController().signal);
    const b = streams.subscribe(TOKEN, 'b', new AbortController().signal);
    await tick();
    upstream.fail(new PkgError('SESSION_UNKNOWN'));
    await expect(a).rejects.toMatchObject({ code: 'SESSION_UNKNOWN' });
    await expect(b).rejects.toMatchObject({ code: 'SESSION_UNKNOWN' });
    await tick();
    expect(streams.counts).toEqual({ listeners: 0, upstreams: 0, clients: 0 });
    // The next request tries afresh.
    void streams.subscribe(TOKEN, 'a', new AbortController().signal).catch(() => undefined);
    await tick();
    expect(upstream.opens).toBe(2);
    streams.closeAll();
  });

  it('a client that leaves while its stream opens frees its slot and closes the upstream, quietly', async () => {
    const upstream = fakeUpstream();
    const streams = new StatusStreams((t, s) => upstream.open(t, s), { perClient: 1 });
    const gone = new AbortController();
    const a = streams.subscribe(TOKEN, 'a', gone.signal);
    await tick();
    gone.abort();
    await expect(a).rejects.toMatchObject({ code: 'REQUEST_TIMEOUT' });
    await tick();
    expect(upstream.aborted).toBe(1);
    expect(streams.counts).toEqual({ listeners: 0, upstreams: 0, clients: 0 });
  });

  it('hands out whole events only: a listener joining mid-event starts at the next one, after the greeting', async () => {
    const upstream = fakeUpstream();
    const streams = new StatusStreams((t, s) => upstream.open(t, s));
    const first = streams.subscribe(TOKEN, 'a', new AbortController().signal);
    await tick();
    const writer = upstream.answer();
    const ra = collect(await first);
    writer.write('event: open\n\n');
    writer.write('data: "CONN');
    await tick();
    expect(ra.text()).toBe('event: open\n\n');
    const rb = collect(await streams.subscribe(TOKEN, 'b', new AbortController().signal));
    writer.write('ECTED"\n\n');
    await tick();
    const late = collect(await streams.subscribe(TOKEN, 'c', new AbortController().signal));
    writer.write('data: "DONE"\n\n');
    await Promise.all([ra.ended, rb.ended, late.ended]);
    expect(ra.text()).toBe('event: open\n\ndata: "CONNECTED"\n\ndata: "DONE"\n\n');
    expect(rb.text()).toBe(ra.text());
    // Joined after CONNECTED: the greeting, then what came after.
    expect(late.text()).toBe('event: open\n\ndata: "DONE"\n\n');
  });

  it('an upstream event without an end within 64 KiB is not SSE: the streams end', async () => {
    const upstream = fakeUpstream();
    const streams = new StatusStreams((t, s) => upstream.open(t, s));
    const first = streams.subscribe(TOKEN, 'a', new AbortController().signal);
    await tick();
    const writer = upstream.answer();
    const ra = collect(await first);
    writer.write(`data: ${'x'.repeat(70 * 1024)}`);
    await ra.ended;
    expect(ra.text()).toBe('');
    expect(upstream.aborted).toBe(1);
  });

  it('caps per client and in all; 429 TOO_MANY_STREAMS carries its Retry-After', async () => {
    const upstream = fakeUpstream();
    const streams = new StatusStreams((t, s) => upstream.open(t, s), { perClient: 2, total: 3, retryAfterSeconds: 7 });
    const opened = [
      streams.subscribe(TOKEN, 'a', new AbortController().signal),
      streams.subscribe(TOKEN, 'a', new AbortController().signal),
    ];
    await expect(streams.subscribe(TOKEN, 'a', new AbortController().signal)).rejects.toMatchObject({
      code: 'TOO_MANY_STREAMS',
      retryAfterSeconds: 7,
    });
    opened.push(streams.subscribe(TOKEN, 'b', new AbortController().signal));
    await expect(streams.subscribe(TOKEN, 'c', new AbortController().signal)).rejects.toMatchObject({
      code: 'TOO_MANY_STREAMS',
    });
    await tick();
    upstream.answer();
    await Promise.all(opened);
    streams.closeAll();
  });
});
