import { describe, expect, it } from 'vitest';
import { ChunkFeed, type FeedItem } from './upload.js';

const chunk = (n: number, fill: number) => new Uint8Array(n).fill(fill);
const describeItem = (item: FeedItem) => ('chunk' in item ? `${item.offset}:${item.chunk[0]}` : `from ${item.from}`);

describe('ChunkFeed: sealed chunks handed to an upload beside the sealer', () => {
  it('gives the chunks in order with their offsets, then the end as the total', async () => {
    const feed = new ChunkFeed(100, 1000);
    await feed.offer(chunk(10, 1));
    await feed.offer(chunk(5, 2));
    feed.end();
    const got: string[] = [];
    for (;;) {
      const item = await feed.next(undefined);
      got.push(describeItem(item));
      if (!('chunk' in item)) break;
    }
    expect(got).toEqual(['0:1', '10:2', 'from 15']);
  });

  it('paces the sealer while the upload keeps up: a chunk that finds the feed full waits for room', async () => {
    const feed = new ChunkFeed(10, 60_000);
    await feed.offer(chunk(10, 1));
    let offered = false;
    const second = feed.offer(chunk(10, 2)).then(() => (offered = true));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(offered).toBe(false);
    expect(describeItem(await feed.next(undefined))).toBe('0:1');
    await second;
    expect(describeItem(await feed.next(undefined))).toBe('10:2');
  });

  it('lets the sealer run on when the upload stalls: from the chunk that could not wait, the rest comes from the kept bytes', async () => {
    const feed = new ChunkFeed(10, 20);
    await feed.offer(chunk(10, 1));
    const started = Date.now();
    await feed.offer(chunk(10, 2));
    expect(Date.now() - started).toBeGreaterThanOrEqual(15);
    // Dropped from here on, at once: the sealer never waits again.
    await feed.offer(chunk(10, 3));
    feed.end();
    expect(describeItem(await feed.next(undefined))).toBe('0:1');
    expect(describeItem(await feed.next(undefined))).toBe('from 10');
  });

  it('holds one chunk larger than its bound rather than none', async () => {
    const feed = new ChunkFeed(10, 60_000);
    await feed.offer(chunk(50, 7));
    expect(describeItem(await feed.next(undefined))).toBe('0:7');
  });

  it("a consumer waiting for a chunk gets the sealer's failure, or ABORTED", async () => {
    const feed = new ChunkFeed(10, 1000);
    const waiting = feed.next(undefined);
    feed.fail(new Error('sealing broke'));
    await expect(waiting).rejects.toThrow('sealing broke');

    const stop = new AbortController();
    const other = new ChunkFeed(10, 1000).next(stop.signal);
    stop.abort();
    await expect(other).rejects.toMatchObject({ code: 'ABORTED' });
  });

  it('after stop() the queue is dropped and a waiting sealer goes on at once', async () => {
    const feed = new ChunkFeed(10, 60_000);
    await feed.offer(chunk(10, 1));
    const waiting = feed.offer(chunk(10, 2));
    feed.stop();
    await waiting;
    expect(describeItem(await feed.next(undefined))).toBe('from 0');
  });
});
