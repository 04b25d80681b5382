import { describe, expect, it } from 'vitest';
import { ErrorCode, FormatError, InputError, PostGuardError } from '../lib/errors.js';
import { PkgClientError } from '../lib/pkg/errors.js';
import { chunkedSource, collector, readAll } from '../test/streams.js';
import { portToReadable, portToWritable, readableToPort, spendChunksOnRead, writableToPort } from './port-stream.js';

/**
 * The stream relay between threads (port-stream.ts), over Node's MessageChannel: the credit window,
 * batching and its flush, copy on read and transfer on write, and coded errors and cancellation in
 * both directions.
 */

const bytes = (n: number, seed = 3) => Uint8Array.from({ length: n }, (_, i) => (i * 7 + seed) & 255);
/** Byte equality without vitest's element-by-element diffing (slow on megabytes). */
const same = (a: Uint8Array, b: Uint8Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(b);
const concatAll = (chunks: Uint8Array[]) => {
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  chunks.reduce((at, c) => (out.set(c, at), at + c.length), 0);
  return out;
};
const tick = (ms = 0) => new Promise((resolve) => setTimeout(resolve, ms));
const KIB = 1024;

/** A source of `chunk`-byte chunks that counts what was read from it; endless unless `total`. */
function countingSource(chunk: number, total = Infinity) {
  const state = { read: 0, cancelled: undefined as unknown };
  const stream = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        if (state.read >= total) return controller.close();
        const n = Math.min(chunk, total - state.read);
        controller.enqueue(bytes(n, state.read & 255));
        state.read += n;
      },
      cancel: (reason) => void (state.cancelled = reason),
    },
    { highWaterMark: 0 },
  );
  return { stream, state };
}

/** A sink whose writes wait until released; counts what it has been given and finished. */
function stallingSink() {
  const state = { started: 0, finished: 0, closed: false, aborted: undefined as unknown, chunks: [] as Uint8Array[] };
  let release: () => void = () => undefined;
  let gate = new Promise<void>((resolve) => (release = resolve));
  const writable = new WritableStream<Uint8Array>({
    async write(chunk) {
      state.started += chunk.byteLength;
      state.chunks.push(chunk.slice());
      await gate;
      state.finished += chunk.byteLength;
    },
    close: () => void (state.closed = true),
    abort: (reason) => void (state.aborted = reason),
  });
  return {
    writable,
    state,
    open() {
      release();
      gate = Promise.resolve();
    },
  };
}

describe('readable → port → readable', () => {
  it('delivers every byte in order, for chunks from 1 byte to several windows', async () => {
    for (const chunk of [1, 4096, 300_000, 5_000_000]) {
      const data = bytes(chunk === 1 ? 3000 : 6_000_000, chunk & 255);
      expect(same(await readAll(portToReadable(readableToPort(chunkedSource(data, chunk)))), data)).toBe(true);
    }
  });

  it('a consumer that stops reading holds the source to the window (memory stays bounded)', async () => {
    const source = countingSource(4 * KIB);
    const window = 64 * KIB;
    const batch = 16 * KIB;
    const reader = portToReadable(readableToPort(source.stream, { batchBytes: batch }), {
      windowBytes: window,
    }).getReader();
    // Sent but not taken: under the window plus the batch that crossed it; gathering: under a batch.
    const bound = window + 2 * batch + 4 * KIB;
    await tick(100);
    expect(source.state.read).toBeGreaterThan(window / 2);
    expect(source.state.read).toBeLessThanOrEqual(bound);
    let taken = 0;
    for (let i = 0; i < 40; i++) taken += (await reader.read()).value!.byteLength;
    await tick(100);
    expect(taken).toBeGreaterThan(window);
    expect(source.state.read - taken).toBeLessThanOrEqual(bound);
    await reader.cancel();
  });

  it('while the consumer is busy, small chunks travel in full batches', async () => {
    const source = countingSource(KIB, 256 * KIB);
    const reader = portToReadable(readableToPort(source.stream, { batchBytes: 32 * KIB }), {
      windowBytes: 128 * KIB,
    }).getReader();
    await tick(100);
    const sizes: number[] = [];
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      sizes.push(value.byteLength);
    }
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(256 * KIB);
    // The first chunk went alone (nothing else was waiting); the rest gathered while nobody read.
    expect(sizes[0]).toBe(KIB);
    expect(sizes.filter((n) => n === 32 * KIB).length).toBeGreaterThanOrEqual(6);
    expect(sizes.length).toBeLessThan(20);
  });

  it('a part-filled batch is sent at once when the consumer has taken everything (no added latency)', async () => {
    let resume!: () => void;
    let step = 0;
    const source = new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          step++;
          if (step === 1) return controller.enqueue(bytes(100));
          if (step === 2) await new Promise<void>((resolve) => (resume = resolve));
          if (step <= 4) return controller.enqueue(bytes(10, step));
          controller.close();
        },
      },
      { highWaterMark: 0 },
    );
    const reader = portToReadable(readableToPort(source)).getReader();
    // 100 bytes of a 256 KiB batch, and the source stalls: they arrive anyway.
    const first = await Promise.race([reader.read(), tick(2000).then(() => 'stuck' as const)]);
    expect(first).toMatchObject({ done: false, value: bytes(100) });
    resume();
    const rest = await readAll(
      new ReadableStream({
        pull: async (c) => {
          const { done, value } = await reader.read();
          if (done) c.close();
          else c.enqueue(value);
        },
      }),
    );
    expect(rest).toEqual(new Uint8Array([...bytes(10, 2), ...bytes(10, 3), ...bytes(10, 4)]));
  });

  it('copies each chunk as it is read: the source may reuse its buffer for the next one', async () => {
    const shared = new Uint8Array(1000);
    let n = 0;
    const source = new ReadableStream<Uint8Array>(
      {
        pull(controller) {
          if (n === 50) return controller.close();
          // The same buffer every time, overwritten as soon as the next chunk is asked for.
          shared.fill(n++);
          controller.enqueue(shared);
        },
      },
      // Asked only when a read waits (a queue would have the source overwrite a chunk before anyone read it).
      { highWaterMark: 0 },
    );
    const out = await readAll(portToReadable(readableToPort(source)));
    expect(out.length).toBe(50_000);
    for (let i = 0; i < 50; i++) expect(out.subarray(i * 1000, (i + 1) * 1000).every((b) => b === i)).toBe(true);
  });

  it('a consumer that spends chunks on read sends each batch back for reuse, and reads every byte intact', async () => {
    const data = bytes(3_000_000, 9);
    const batch = 64 * KIB;
    const readable = portToReadable(readableToPort(chunkedSource(data, 10_000), { batchBytes: batch }));
    expect(spendChunksOnRead(readable)).toBe(true);
    const reader = readable.getReader();
    const out = new Uint8Array(data.length);
    let at = 0;
    let previous: Uint8Array | undefined;
    let returned = 0;
    for (;;) {
      const { done, value } = await reader.read();
      // The chunk before went back to the sender with this read: detached here.
      if (previous !== undefined && previous.byteLength === 0) returned++;
      if (done) break;
      out.set(value, at);
      at += value.length;
      previous = value;
    }
    expect(at).toBe(data.length);
    expect(same(out, data)).toBe(true);
    // Every full batch but the last went back (the sender reuses them; an intact copy above shows how).
    expect(returned).toBeGreaterThanOrEqual(Math.floor(data.length / batch) - 1);
  });

  it('without spendChunksOnRead, chunks stay the consumer’s; other readables are refused', async () => {
    const data = bytes(600_000);
    const reader = portToReadable(readableToPort(chunkedSource(data, 100_000), { batchBytes: 64 * KIB })).getReader();
    const kept: Uint8Array[] = [];
    for (let r = await reader.read(); !r.done; r = await reader.read()) kept.push(r.value);
    expect(same(concatAll(kept), data)).toBe(true);
    expect(spendChunksOnRead(chunkedSource(data))).toBe(false);
  });

  it('zero-length chunks carry nothing and end nothing', async () => {
    const parts = [0, 3, 0, 0, 5, 0].map((n) => bytes(n));
    const source = new ReadableStream<Uint8Array>({
      pull: (c) => (parts.length ? c.enqueue(parts.shift()!) : c.close()),
    });
    expect(await readAll(portToReadable(readableToPort(source)))).toEqual(new Uint8Array([...bytes(3), ...bytes(5)]));
    let empties = 0;
    const onlyEmpty = new ReadableStream<Uint8Array>({
      pull: (c) => (empties++ < 100 ? c.enqueue(new Uint8Array(0)) : c.close()),
    });
    expect(await readAll(portToReadable(readableToPort(onlyEmpty)))).toEqual(new Uint8Array(0));
  });

  it('takes any byte chunk (ArrayBuffer, DataView, other typed arrays) as its bytes', async () => {
    const data = bytes(64);
    const chunks: unknown[] = [
      data.slice(0, 16).buffer,
      new DataView(data.slice(16, 32).buffer),
      new Uint16Array(data.slice(32, 64).buffer),
    ];
    const source = new ReadableStream<unknown>({
      pull: (c) => (chunks.length ? c.enqueue(chunks.shift()) : c.close()),
    });
    expect(await readAll(portToReadable(readableToPort(source)))).toEqual(data);
  });

  it('a chunk that is not bytes fails the receiver with INVALID_INPUT and cancels the source with it', async () => {
    let cancelled: unknown;
    const values: unknown[] = [bytes(10), 'text'];
    const source = new ReadableStream<unknown>({
      pull: (c) => c.enqueue(values.shift() ?? 'more'),
      cancel: (reason) => void (cancelled = reason),
    });
    const error = await readAll(portToReadable(readableToPort(source))).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InputError);
    expect(error).toMatchObject({ code: 'INVALID_INPUT' });
    expect(cancelled).toBeInstanceOf(InputError);
  });

  it('a source error arrives with its class and code (PostGuardError and PkgClientError)', async () => {
    for (const thrown of [
      new FormatError(ErrorCode.TRUNCATED, 'cut short'),
      new PkgClientError('PKG_UNAVAILABLE', 'the PKG is down', { status: 503 }),
    ]) {
      const source = new ReadableStream<Uint8Array>({
        start: (c) => c.enqueue(bytes(10)),
        pull: (c) => c.error(thrown),
      });
      const error = await readAll(portToReadable(readableToPort(source))).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(thrown.constructor);
      expect(error).toMatchObject({ code: thrown.code, message: thrown.message });
    }
  });

  it("the consumer's cancel reaches the source with its class and code, also while a read waits", async () => {
    for (const slow of [false, true]) {
      let reason: unknown;
      const source = new ReadableStream<Uint8Array>({
        pull: (c) => (slow ? new Promise<void>(() => undefined) : c.enqueue(bytes(8))),
        cancel: (r) => void (reason = r),
      });
      const reader = portToReadable(readableToPort(source)).getReader();
      if (!slow) await reader.read();
      await tick(20);
      await reader.cancel(new PostGuardError(ErrorCode.TAMPERED, 'segment 3 does not authenticate'));
      await expect.poll(() => reason).toBeInstanceOf(PostGuardError);
      expect(reason).toMatchObject({ code: 'TAMPERED' });
    }
  });

  it('a sender that overruns the granted window fails the stream with INVALID_STATE', async () => {
    const { port1, port2 } = new MessageChannel();
    const control: unknown[] = [];
    port1.onmessage = ({ data }) => control.push(data);
    const reader = portToReadable(port2, { windowBytes: 1024 }).getReader();
    port1.postMessage({ t: 'bytes', chunk: bytes(2048) });
    port1.postMessage({ t: 'bytes', chunk: bytes(10) });
    await tick(20);
    expect((await reader.read()).value).toEqual(bytes(2048));
    await expect(reader.read()).rejects.toMatchObject({ code: 'INVALID_STATE' });
    expect(control[0]).toEqual({ t: 'window', bytes: 1024 });
    expect(control).toContainEqual(expect.objectContaining({ t: 'cancel' }));
    port1.close();
  });

  it('a message that is not part of the protocol (an older relay) fails the stream instead of hanging it', async () => {
    for (const message of [{ t: 'chunk', chunk: bytes(5) }, { t: 'bytes', chunk: 'text' }, null]) {
      const { port1, port2 } = new MessageChannel();
      const reader = portToReadable(port2).getReader();
      port1.postMessage(message);
      await expect(reader.read()).rejects.toMatchObject({ code: 'INVALID_STATE' });
      port1.close();
    }
  });
});

describe('writable → port → writable', () => {
  it('writes every byte in order; close resolves only after the sink closed', async () => {
    const out = collector();
    const data = bytes(3_000_000);
    const { port, settled } = writableToPort(out.writable);
    await chunkedSource(data, 100_000).pipeTo(portToWritable(port));
    expect(out.state()).toBe('closed');
    expect(same(out.bytes(), data)).toBe(true);
    await expect(settled).resolves.toBeUndefined();
  });

  it('a slow sink holds the writer to the window (memory stays bounded)', async () => {
    const sink = stallingSink();
    const window = 64 * KIB;
    const writer = portToWritable(writableToPort(sink.writable, { windowBytes: window }).port).getWriter();
    let accepted = 0;
    const writing = (async () => {
      for (let i = 0; i < 100; i++) {
        await writer.ready;
        const chunk = bytes(8 * KIB, i);
        void writer.write(chunk).then(() => (accepted += 8 * KIB));
      }
      await writer.close();
    })();
    await tick(100);
    // The sink holds its first chunk; the window, one chunk over it and the stream's queue of one wait.
    expect(sink.state.started).toBe(8 * KIB);
    expect(accepted).toBeGreaterThanOrEqual(window - 8 * KIB);
    expect(accepted).toBeLessThanOrEqual(window + 2 * 8 * KIB);
    sink.open();
    await writing;
    expect(sink.state.finished).toBe(800 * KIB);
    expect(sink.state.closed).toBe(true);
  });

  it("moves a written chunk's buffer instead of copying it; a second chunk over it fails with INVALID_STATE", async () => {
    const out = collector();
    const { port, settled } = writableToPort(out.writable);
    const writer = portToWritable(port).getWriter();
    const buffer = new ArrayBuffer(100);
    const first = new Uint8Array(buffer, 0, 50).fill(1);
    const second = new Uint8Array(buffer, 50, 50).fill(2);
    await writer.write(first);
    expect(buffer.byteLength).toBe(0); // transferred: detached on this side
    expect(second.byteLength).toBe(0); // so a second view reads as empty
    const error = await writer.write(second).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'INVALID_STATE' });
    await expect(settled).rejects.toMatchObject({ code: 'INVALID_STATE' });
    expect(out.bytes()).toEqual(new Uint8Array(50).fill(1));
    expect(out.state()).toBe('aborted');
  });

  it('zero-length writes resolve and reach the sink as nothing', async () => {
    const out = collector();
    const writer = portToWritable(writableToPort(out.writable).port).getWriter();
    for (const n of [0, 4, 0, 0, 6, 0]) await writer.write(bytes(n));
    await writer.close();
    expect(out.chunks.map((c) => c.byteLength)).toEqual([4, 6]);
    expect(out.state()).toBe('closed');
  });

  it('a write that is not bytes fails with INVALID_INPUT, and the sink is aborted with it', async () => {
    const out = collector();
    const writer = portToWritable(writableToPort(out.writable).port).getWriter();
    await writer.write(bytes(3));
    const error = await writer.write('text' as never).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InputError);
    expect(error).toMatchObject({ code: 'INVALID_INPUT' });
    await expect.poll(() => out.state()).toBe('aborted');
    expect(out.abortReason()).toBeInstanceOf(InputError);
    expect(out.bytes()).toEqual(bytes(3));
  });

  it("an abort reaches the sink with class and code, and settles the sink's side as failed", async () => {
    const out = collector();
    const { port, settled } = writableToPort(out.writable);
    const writer = portToWritable(port).getWriter();
    await writer.write(bytes(4));
    await writer.abort(new FormatError(ErrorCode.TRUNCATED, 'stream cut'));
    await expect.poll(() => out.state()).toBe('aborted');
    expect(out.abortReason()).toBeInstanceOf(FormatError);
    expect(out.abortReason()).toMatchObject({ code: 'TRUNCATED' });
    await expect(settled).rejects.toMatchObject({ code: 'TRUNCATED' });
  });

  it('an abort ends a write that waits for room', async () => {
    const sink = stallingSink();
    const writer = portToWritable(writableToPort(sink.writable, { windowBytes: 1024 }).port).getWriter();
    await writer.write(bytes(2048));
    await tick(20);
    const waiting = writer.write(bytes(10)).catch((e: unknown) => e);
    await tick(20);
    await writer.abort(new PostGuardError(ErrorCode.TAMPERED, 'bad segment'));
    expect(await waiting).toMatchObject({ code: 'TAMPERED' });
    sink.open();
    await expect.poll(() => sink.state.aborted).toMatchObject({ code: 'TAMPERED' });
  });

  it("the sink's failure fails the writer with its class and code, and nothing is written after", async () => {
    let written = 0;
    const sink = new WritableStream<Uint8Array>({
      write() {
        if (++written === 2) throw new PkgClientError('RATE_LIMITED', 'slow down', { retryAfter: 3 });
      },
    });
    const writer = portToWritable(writableToPort(sink).port).getWriter();
    await writer.write(bytes(1));
    await writer.write(bytes(1));
    await expect
      .poll(() =>
        writer.ready.then(
          () => 'ready',
          (e: unknown) => e,
        ),
      )
      .toBeInstanceOf(PkgClientError);
    await expect(writer.write(bytes(1))).rejects.toMatchObject({ code: 'RATE_LIMITED', retryAfter: 3 });
    expect(written).toBe(2);
  });

  it('a sink that fails between writes fails the writer at once, without a write to find out', async () => {
    let fail!: (e: unknown) => void;
    let written = 0;
    const sink = new WritableStream<Uint8Array>({
      start: (c) => void (fail = (e) => c.error(e)),
      write: () => void written++,
    });
    const writer = portToWritable(writableToPort(sink).port).getWriter();
    await writer.write(bytes(3));
    await expect.poll(() => written).toBe(1);
    await tick(20); // the relay is idle now, waiting for the next chunk
    fail(new PostGuardError(ErrorCode.SINK_FAILED, 'connection reset'));
    // The writer's closed promise is what a pump waiting on its source watches.
    await expect(writer.closed).rejects.toMatchObject({ code: 'SINK_FAILED', message: 'connection reset' });
  });

  it("a sink whose close fails fails the writer's close with its code", async () => {
    const sink = new WritableStream<Uint8Array>({
      close() {
        throw new PostGuardError(ErrorCode.SINK_FAILED, 'could not flush');
      },
    });
    const writer = portToWritable(writableToPort(sink).port).getWriter();
    await writer.write(bytes(5));
    await expect(writer.close()).rejects.toMatchObject({ code: 'SINK_FAILED', message: 'could not flush' });
  });
});
