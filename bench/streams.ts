/**
 * The byte streams the Node stream benchmarks feed and drain: generated on the fly or replayed from
 * memory, pulled one chunk at a time (no queue), so what is timed is the library, not the harness.
 */

/** `total` bytes in `chunkBytes`-sized pieces, generated as they are pulled (flat memory). */
export function generatedSource(total: number, chunkBytes: number): ReadableStream<Uint8Array> {
  const chunk = new Uint8Array(chunkBytes).map((_, i) => i & 255);
  let sent = 0;
  return new ReadableStream<Uint8Array>(
    {
      pull(c) {
        if (sent >= total) return c.close();
        const n = Math.min(chunkBytes, total - sent);
        c.enqueue(chunk.slice(0, n));
        sent += n;
      },
    },
    { highWaterMark: 0 },
  );
}

/** Chunks kept in memory, replayed in order. */
export function fromChunks(chunks: Uint8Array[]): ReadableStream<Uint8Array> {
  let i = 0;
  return new ReadableStream<Uint8Array>(
    {
      pull(c) {
        if (i >= chunks.length) return c.close();
        c.enqueue(chunks[i++]!);
      },
    },
    { highWaterMark: 0 },
  );
}

export const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
