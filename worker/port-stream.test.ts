import { describe, expect, it } from 'vitest';
import { ErrorCode, FormatError, PostGuardError } from '../lib/errors.js';
import { chunkedSource, collector, readAll } from '../test/streams.js';
import { portToReadable, portToWritable, readableToPort, writableToPort } from './port-stream.js';

/** The MessagePort relay (the fallback for browsers without transferable streams), in Node's MessageChannel. */

const bytes = (n: number) => Uint8Array.from({ length: n }, (_, i) => (i * 7 + 3) & 255);

describe('readable over a port', () => {
  it('delivers every byte in order', async () => {
    const data = bytes(300_000);
    expect(await readAll(portToReadable(readableToPort(chunkedSource(data, 4096))))).toEqual(data);
  });

  it('reads the source only as the receiver pulls (no unbounded buffering)', async () => {
    let reads = 0;
    const source = new ReadableStream<Uint8Array>({
      pull(controller) {
        reads++;
        controller.enqueue(new Uint8Array(1024));
      },
    }, { highWaterMark: 0 });
    const received = portToReadable(readableToPort(source));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(reads).toBeLessThanOrEqual(2);
    const reader = received.getReader();
    for (let i = 0; i < 10; i++) await reader.read();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(reads).toBeLessThanOrEqual(13);
    await reader.cancel();
  });

  it('a source error arrives with its class and code', async () => {
    const source = new ReadableStream<Uint8Array>({
      pull: (c) => c.error(new FormatError(ErrorCode.TRUNCATED, 'cut short')),
    });
    const error = await readAll(portToReadable(readableToPort(source))).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FormatError);
    expect(error).toMatchObject({ code: 'TRUNCATED', message: 'cut short' });
  });

  it("the receiver's cancel reaches the source with its reason", async () => {
    let reason: unknown;
    const source = new ReadableStream<Uint8Array>({
      pull: (c) => c.enqueue(new Uint8Array(8)),
      cancel: (r) => void (reason = r),
    });
    const reader = portToReadable(readableToPort(source)).getReader();
    await reader.read();
    await reader.cancel(new PostGuardError(ErrorCode.SINK_FAILED, 'gone'));
    await expect.poll(() => reason).toBeInstanceOf(PostGuardError);
    expect(reason).toMatchObject({ code: 'SINK_FAILED' });
  });

  it('a chunk that cannot be cloned fails the stream instead of hanging', async () => {
    const source = new ReadableStream<unknown>({ pull: (c) => c.enqueue(() => 1) });
    const error = await readAll(portToReadable(readableToPort(source)) as ReadableStream<Uint8Array>).catch((e: unknown) => e);
    expect((error as Error).name).toBe('DataCloneError');
  });
});

describe('writable over a port', () => {
  it('writes every byte in order and closes', async () => {
    const out = collector();
    const data = bytes(200_000);
    await chunkedSource(data, 1000).pipeTo(portToWritable(writableToPort(out.writable).port));
    expect(out.state()).toBe('closed');
    expect(out.bytes()).toEqual(data);
  });

  it("an abort reaches the owner's sink with class and code", async () => {
    const out = collector();
    const writer = portToWritable(writableToPort(out.writable).port).getWriter();
    await writer.write(new Uint8Array(4));
    await writer.abort(new FormatError(ErrorCode.TRUNCATED, 'stream cut'));
    await expect.poll(() => out.state()).toBe('aborted');
    expect(out.abortReason()).toBeInstanceOf(FormatError);
    expect(out.abortReason()).toMatchObject({ code: 'TRUNCATED' });
  });

  it("the owner's sink failing fails the writer with its code, and nothing is written after", async () => {
    let written = 0;
    const sink = new WritableStream<Uint8Array>({
      write() {
        if (++written === 2) throw new PostGuardError(ErrorCode.SINK_FAILED, 'disk full');
      },
    });
    const writer = portToWritable(writableToPort(sink).port).getWriter();
    await writer.write(new Uint8Array(1));
    const error = await writer.write(new Uint8Array(1)).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'SINK_FAILED', message: 'disk full' });
    await expect(writer.write(new Uint8Array(1))).rejects.toMatchObject({ code: 'SINK_FAILED' });
    expect(written).toBe(2);
  });
});
