import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ErrorCode } from '../errors.js';
import { hashWorker, serveHashing, startHashWorker, stopHashWorker } from './hash-worker.js';
import { inlineSegmentHasher } from './segment-hasher.js';
import { createShake128 } from './shake-node.js';

/**
 * The browser's hashing worker, driven here over a MessageChannel: one port stands for the nested
 * Worker the crypto worker starts, the other for that worker's global scope. The engines suite
 * (e2e/engines/runtime.spec.ts) checks that Chromium, Firefox and WebKit start the real one.
 */

const header = new TextEncoder().encode('a header');

interface FakeWorker {
  worker: Worker;
  terminated: () => boolean;
  /** Raises the worker's error event, as a crash inside it would. */
  crash(): void;
}

function fakeWorker(serve: boolean): FakeWorker {
  const { port1, port2 } = new MessageChannel();
  let terminated = false;
  const worker = Object.assign(port1, {
    onerror: null as ((e: Event) => void) | null,
    terminate() {
      terminated = true;
      port1.close();
      port2.close();
    },
  }) as unknown as Worker;
  if (serve) serveHashing(port2 as unknown as DedicatedWorkerGlobalScope, createShake128);
  return {
    worker,
    terminated: () => terminated,
    crash: () => worker.onerror?.(new Event('error') as ErrorEvent),
  };
}

afterEach(() => {
  stopHashWorker();
  vi.useRealTimers();
});

describe('the hashing worker (browsers)', () => {
  it('answers true once up; streams then hash there with the digests of the inline transcript', async () => {
    const fake = fakeWorker(true);
    expect(hashWorker()).toBeUndefined();
    expect(await startHashWorker(() => fake.worker)).toBe(true);
    const remote = hashWorker()!;
    await fc.assert(
      fc.asyncProperty(fc.array(fc.uint8Array({ maxLength: 2000 }), { maxLength: 4 }), async (pieces) => {
        const there = remote.open(header);
        const here = inlineSegmentHasher(createShake128().update(header));
        const tail = new Uint8Array([1, 2, 3]);
        const answers = pieces.map((p) => there.absorbAndFork(p.slice(), 0, p.length, [tail]));
        for (const [i, p] of pieces.entries()) {
          const expected = await here.absorbAndFork(p, 0, p.length, [tail]);
          const got = await answers[i]!;
          expect(got.digests).toEqual(expected.digests);
          expect(got.buffer).toEqual(p);
        }
        there.close();
      }),
      { numRuns: 25 },
    );
  });

  it('a second start while one runs reuses it', async () => {
    const fake = fakeWorker(true);
    expect(await startHashWorker(() => fake.worker)).toBe(true);
    let spawned = false;
    expect(
      await startHashWorker(() => {
        spawned = true;
        return fakeWorker(true).worker;
      }),
    ).toBe(true);
    expect(spawned).toBe(false);
  });

  it('a worker that cannot be made, or errors as it starts, answers false; streams stay inline; a later start tries again', async () => {
    expect(
      await startHashWorker(() => {
        throw new DOMException('refused by policy', 'SecurityError');
      }),
    ).toBe(false);
    const broken = fakeWorker(false);
    const starting = startHashWorker(() => broken.worker);
    broken.crash();
    expect(await starting).toBe(false);
    expect(broken.terminated()).toBe(true);
    expect(hashWorker()).toBeUndefined();
    expect(await startHashWorker(() => fakeWorker(true).worker)).toBe(true);
  });

  it('a worker that never says it is ready is given up after 10 s', async () => {
    vi.useFakeTimers();
    const silent = fakeWorker(false);
    const starting = startHashWorker(() => silent.worker);
    await vi.advanceTimersByTimeAsync(9_999);
    expect(silent.terminated()).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(await starting).toBe(false);
    expect(silent.terminated()).toBe(true);
  });

  it('a worker that dies mid-stream fails the stream with INVALID_STATE, now and on later calls', async () => {
    const fake = fakeWorker(true);
    expect(await startHashWorker(() => fake.worker)).toBe(true);
    const stream = hashWorker()!.open(header);
    await stream.absorbAndFork(new Uint8Array(10), 0, 10, []);
    const pending = stream.absorbAndFork(new Uint8Array(10), 0, 10, []);
    fake.crash();
    await expect(pending).rejects.toMatchObject({ code: ErrorCode.INVALID_STATE });
    await expect(stream.absorbAndFork(new Uint8Array(1), 0, 1, [])).rejects.toMatchObject({
      code: ErrorCode.INVALID_STATE,
    });
    expect(hashWorker()).toBeUndefined();
  });
});
