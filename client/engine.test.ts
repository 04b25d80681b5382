import { describe, expect, it } from 'vitest';
import type { SealOptions } from '../lib/seal.js';
import { lazyEngine, type CryptoEngine, type EngineUnsealer } from './engine.js';

/**
 * The client's engine is loaded on first use (issue 30: no crypto in a page's first chunk). What
 * the lazy wrapper must keep of the engine's contract: nothing loads before a call, one load
 * serves every call, and a load that fails fails that call as the engine would (its streams
 * cancelled and aborted, not left open) and is tried again by the next.
 */

const options = {} as SealOptions;

/** An engine that records its calls and seals by copying. */
function recordingEngine(calls: string[]): CryptoEngine {
  return {
    async sealStream(mpk, _options, readable, writable) {
      calls.push(`seal ${mpk}`);
      await readable.pipeTo(writable);
    },
    StreamUnsealer: {
      new: async (readable, vk) => {
        calls.push(`open ${vk}`);
        await readable.cancel();
        return { inspect_header: () => new Map(), unseal: async () => ({}) as never } satisfies EngineUnsealer;
      },
    },
  };
}

/** A readable of one chunk that says whether it was cancelled, and a writable that says whether it was aborted. */
function streams() {
  const seen = { cancelled: undefined as unknown, aborted: undefined as unknown, written: [] as Uint8Array[] };
  const readable = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new Uint8Array([1, 2, 3]));
      controller.close();
    },
    cancel(reason) {
      seen.cancelled = reason;
    },
  });
  const writable = new WritableStream<Uint8Array>({
    write(chunk) {
      seen.written.push(chunk);
    },
    abort(reason) {
      seen.aborted = reason;
    },
  });
  return { readable, writable, seen };
}

describe('lazyEngine', () => {
  it('loads nothing until the first call, then once for every call', async () => {
    const calls: string[] = [];
    let loads = 0;
    const engine = lazyEngine(async () => {
      loads++;
      return recordingEngine(calls);
    });
    expect(loads).toBe(0);
    const a = streams();
    const b = streams();
    await Promise.all([
      engine.sealStream('mpk', options, a.readable, a.writable),
      engine.StreamUnsealer.new(b.readable, 'vk'),
    ]);
    await engine.sealStream('mpk2', options, streams().readable, streams().writable);
    expect(loads).toBe(1);
    expect(calls.sort()).toEqual(['open vk', 'seal mpk', 'seal mpk2']);
    expect(a.seen.written).toEqual([new Uint8Array([1, 2, 3])]);
  });

  it('a load that fails fails the call, cancels and aborts its streams, and the next call loads again', async () => {
    const calls: string[] = [];
    const failure = new Error('the chunk did not arrive');
    let loads = 0;
    const engine = lazyEngine(async () => {
      loads++;
      if (loads === 1) throw failure;
      return recordingEngine(calls);
    });
    const first = streams();
    await expect(engine.sealStream('mpk', options, first.readable, first.writable)).rejects.toBe(failure);
    expect(first.seen.cancelled).toBe(failure);
    expect(first.seen.aborted).toBe(failure);

    const second = streams();
    await engine.sealStream('mpk', options, second.readable, second.writable);
    expect(loads).toBe(2);
    expect(calls).toEqual(['seal mpk']);
    expect(second.seen.written).toEqual([new Uint8Array([1, 2, 3])]);
  });

  it('an open whose load fails cancels its ciphertext stream', async () => {
    const failure = new Error('offline');
    const engine = lazyEngine(() => Promise.reject(failure));
    const { readable, seen } = streams();
    await expect(engine.StreamUnsealer.new(readable, 'vk')).rejects.toBe(failure);
    expect(seen.cancelled).toBe(failure);
  });
});
