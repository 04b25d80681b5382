import { describe, expect, it } from 'vitest';
import { expectSameBytes } from '../test/bytes.js';
import { blobStream, openSource, isWebKit } from './sw-source.js';

const noFetch = (() => Promise.reject(new Error('no network here'))) as typeof fetch;

describe('the watched source', () => {
  it('a source that ends short of its size is TRUNCATED', async () => {
    const raw = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(new Uint8Array(10));
        c.close();
      },
    });
    const opened = await openSource({ kind: 'stream', stream: raw }, 100, noFetch, new AbortController().signal, 5000);
    const reader = opened.stream.getReader();
    await reader.read();
    await expect(reader.read()).rejects.toMatchObject({ code: 'TRUNCATED' });
    expect(opened.failure).toMatchObject({ code: 'TRUNCATED' });
  });

  it('cancelled by its reader while a read is in flight, it is not called TRUNCATED (the reader failed, not the source)', async () => {
    // The underlying source answers its pending read only when cancelled, as a Blob's stream does.
    let answer: (() => void) | undefined;
    const raw = new ReadableStream<Uint8Array>(
      {
        pull: () => new Promise<void>((resolve) => (answer = resolve)),
        cancel: () => answer?.(),
      },
      { highWaterMark: 0 },
    );
    const opened = await openSource({ kind: 'stream', stream: raw }, 100, noFetch, new AbortController().signal, 5000);
    const reader = opened.stream.getReader();
    const inFlight = reader.read().catch(() => undefined);
    await new Promise((r) => setTimeout(r, 10));
    await reader.cancel(new Error('the unsealer found a tampered segment'));
    await inFlight;
    expect(opened.failure).toBeUndefined();
  });

  it('a Blob read in slices (WebKit) gives its bytes in order, 1 MiB at a time, and stops when cancelled', async () => {
    const bytes = Uint8Array.from({ length: 2.5 * 2 ** 20 }, (_, i) => (i * 7) & 255);
    const blob = new Blob([bytes as BlobPart]);
    const chunks: number[] = [];
    const parts: Uint8Array[] = [];
    const reader = blobStream(blob, true).getReader();
    for (let r = await reader.read(); !r.done; r = await reader.read()) {
      chunks.push(r.value.byteLength);
      parts.push(r.value);
    }
    expect(chunks).toEqual([2 ** 20, 2 ** 20, 2 ** 19]);
    expectSameBytes(new Uint8Array(await new Blob(parts as BlobPart[]).arrayBuffer()), bytes);
    const cancelled = blobStream(blob, true).getReader();
    await cancelled.read();
    await cancelled.cancel();
    expect(await cancelled.closed).toBeUndefined();
  });

  it('tells WebKit from Chromium, headless or not, and Firefox (WebKit alone slices Blobs)', () => {
    const chromium =
      'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36';
    expect(isWebKit(chromium)).toBe(false);
    expect(isWebKit(chromium.replace('Chrome/', 'HeadlessChrome/'))).toBe(false);
    expect(isWebKit('Mozilla/5.0 (X11; Linux x86_64; rv:153.0) Gecko/20100101 Firefox/153.0')).toBe(false);
    expect(
      isWebKit('Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/60.5 Safari/605.1.15'),
    ).toBe(true);
  });
});
