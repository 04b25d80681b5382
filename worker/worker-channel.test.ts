import { describe, expect, it } from 'vitest';
import { portToReadable, portToWritable, serveReadable, serveWritable } from './port-stream.js';
import { WorkerChannel, type ChannelTarget } from './worker-channel.js';
import { concat } from '../test/streams.js';

/**
 * Relayed streams multiplexed over one channel (worker-channel.ts): here the two ends of a
 * MessageChannel stand in for a page's Worker and the worker's global scope.
 */

function pair() {
  const { port1, port2 } = new MessageChannel();
  const page = new WorkerChannel(port1 as unknown as ChannelTarget);
  const worker = new WorkerChannel(port2 as unknown as ChannelTarget);
  return { page, worker, close: () => (port1.close(), port2.close()) };
}

const bytes = (n: number, seed: number) => Uint8Array.from({ length: n }, (_, i) => (i * 31 + seed) & 255);

async function readAll(readable: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  const reader = readable.getReader();
  const parts: Uint8Array[] = [];
  for (let r = await reader.read(); !r.done; r = await reader.read()) parts.push(r.value.slice());
  return concat(parts);
}

describe('WorkerChannel', () => {
  it('carries several streams at once, each to its own port, in both directions', async () => {
    const { page, worker, close } = pair();
    const a = bytes(2_500_000, 1);
    const b = bytes(700_000, 2);
    const [pa, pb] = [page.open(), page.open()];
    serveReadable(new Blob([a]).stream(), pa);
    serveReadable(new Blob([b]).stream(), pb);
    // The worker writes back what it reads from b, into a writable the page serves.
    const back: Uint8Array[] = [];
    const pw = page.open();
    const served = serveWritable(new WritableStream({ write: (c) => void back.push(c.slice()) }), pw);
    const [gotA] = await Promise.all([
      readAll(portToReadable(worker.accept(pa.id))),
      portToReadable(worker.accept(pb.id)).pipeTo(portToWritable(worker.accept(pw.id))),
    ]);
    await served;
    // Compared as Buffers: toEqual walks megabytes element by element.
    expect(Buffer.from(gotA).equals(a)).toBe(true);
    expect(Buffer.from(concat(back)).equals(b)).toBe(true);
    close();
  });

  it("keeps what arrives for a port before this side accepts it (a writable's window grant)", async () => {
    const { page, worker, close } = pair();
    const got: Uint8Array[] = [];
    const port = page.open();
    const served = serveWritable(new WritableStream({ write: (c) => void got.push(c.slice()) }), port);
    // The window grant is on its way before the worker opens its end.
    await new Promise((resolve) => setTimeout(resolve, 20));
    const writable = portToWritable(worker.accept(port.id));
    const writer = writable.getWriter();
    await writer.write(bytes(1000, 3));
    await writer.close();
    await served;
    expect(got).toEqual([bytes(1000, 3)]);
    expect(() => worker.accept(port.id)).toThrow(/already opened/);
    close();
  });

  it("shows comlink (its endpoint) every message but the relays' own", async () => {
    const { page, worker, close } = pair();
    const seen: unknown[] = [];
    worker.endpoint.addEventListener('message', (e) => void seen.push((e as MessageEvent).data));
    const port = page.open();
    const accepted = worker.accept(port.id);
    const relayed = new Promise((resolve) => (accepted.onmessage = (e) => resolve(e.data)));
    port.postMessage({ t: 'end' });
    page.endpoint.postMessage({ id: 'x', type: 'GET' });
    expect(await relayed).toEqual({ t: 'end' });
    await expect.poll(() => seen).toEqual([{ id: 'x', type: 'GET' }]);
    close();
  });

  it('drops what arrives for a port this side has closed', async () => {
    const { page, worker, close } = pair();
    const port = page.open();
    const accepted = worker.accept(port.id);
    const received: unknown[] = [];
    accepted.onmessage = (e) => received.push(e.data);
    accepted.close();
    port.postMessage({ t: 'end' });
    const later = page.open();
    const next = new Promise((resolve) => (worker.accept(later.id).onmessage = (e) => resolve(e.data)));
    later.postMessage('after');
    expect(await next).toBe('after');
    expect(received).toEqual([]);
    close();
  });
});
