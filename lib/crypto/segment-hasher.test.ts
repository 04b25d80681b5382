import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { chunkedSource, collector } from '../../test/streams.js';
import { ErrorCode } from '../errors.js';
import { extractSigningKey, generateKemKeys, generateSigningKeys } from '../keys.js';
import { sealStream, StreamUnsealer } from '../index.js';
import { extractUsk } from '../keys.js';
import { inlineSegmentHasher, type SegmentHasher } from './segment-hasher.js';
import { segmentHasher, startHashThread, stopHashThread } from './segment-hasher-node.js';
import { createShake128 } from './shake-node.js';
import { RemoteHashing, type HashRequest } from './segment-hasher-remote.js';

const header = new TextEncoder().encode('the header bytes start every transcript');
const started = () => createShake128().update(header);

/** What a transcript that absorbed `header` and then each of `pieces` would give for a fork with `tail`. */
function expected(pieces: Uint8Array[], tail: Uint8Array): Uint8Array {
  const x = started();
  for (const p of pieces) x.update(p);
  return x.update(tail).digest(64);
}

afterAll(() => stopHashThread());

describe('the segment transcript on a thread of its own (Node)', () => {
  it('starts with the first stream and answers true once up; until then streams hash inline', async () => {
    await stopHashThread();
    expect(segmentHasher(started(), header).constructor.name).not.toBe('RemoteSegmentHasher');
    expect(await startHashThread()).toBe(true);
    expect(segmentHasher(started(), header).constructor.name).toBe('RemoteSegmentHasher');
  });

  it('property: the same digests as the transcript on this thread, and every byte handed back', async () => {
    expect(await startHashThread()).toBe(true);
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.tuple(
            fc.uint8Array({ maxLength: 3000 }),
            fc.nat(40),
            fc.nat(40),
            fc.array(fc.uint8Array({ maxLength: 80 }), { maxLength: 3 }),
          ),
          {
            maxLength: 8,
          },
        ),
        async (segments) => {
          const hashers: SegmentHasher[] = [segmentHasher(started(), header), inlineSegmentHasher(started())];
          for (const hasher of hashers) {
            const absorbed: Uint8Array[] = [];
            // Several in flight at once, as a stream has them; answers come in order.
            const calls = segments.map(([bytes, cutStart, cutEnd, tails]) => {
              const start = Math.min(cutStart, bytes.length);
              const end = Math.max(start, bytes.length - cutEnd);
              const copy = bytes.slice();
              absorbed.push(bytes.subarray(start, end));
              const want = tails.map((t) => expected(absorbed, t));
              return { call: hasher.absorbAndFork(copy, start, end, tails), bytes, want };
            });
            for (const { call, bytes, want } of calls) {
              const { buffer, digests } = await call;
              expect(buffer).toEqual(bytes);
              expect(digests).toEqual(want);
            }
            hasher.close();
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  it('copies a view that does not own its whole buffer, leaving the caller’s bytes where they are', async () => {
    expect(await startHashThread()).toBe(true);
    const hasher = segmentHasher(started(), header);
    const whole = new Uint8Array(100).map((_, i) => i);
    const view = whole.subarray(10, 60);
    const { buffer, digests } = await hasher.absorbAndFork(view, 5, 45, [new Uint8Array([1])]);
    expect(whole.byteLength).toBe(100); // not moved away
    expect(buffer).toEqual(whole.subarray(10, 60));
    expect(digests[0]).toEqual(expected([whole.subarray(15, 55)], new Uint8Array([1])));
    hasher.close();
  });

  it('opens a transcript with the absorbed bytes alone, not the rest of the buffer they are a view of', () => {
    // A header read from a source that gave the whole file as one chunk is a view into that chunk:
    // the open message is cloned, and a clone of a view takes its whole ArrayBuffer along.
    const posted: HashRequest[] = [];
    const hashing = new RemoteHashing({ post: (request) => posted.push(request), hold: () => {} });
    const file = new Uint8Array(8 << 20).map((_, i) => i & 255);
    hashing.open(file.subarray(0, header.length)).close();
    const open = posted.find((r) => r.op === 'open');
    expect(open?.op === 'open' && open.absorbed.buffer.byteLength).toBe(header.length);
    expect(open?.op === 'open' && open.absorbed).toEqual(file.subarray(0, header.length));
  });

  it('close rejects what is pending and what comes after, with INVALID_STATE', async () => {
    expect(await startHashThread()).toBe(true);
    const hasher = segmentHasher(started(), header);
    const pending = Promise.resolve(hasher.absorbAndFork(new Uint8Array(1 << 20), 0, 1 << 20, [new Uint8Array(1)]));
    hasher.close();
    await expect(pending).rejects.toMatchObject({ code: ErrorCode.INVALID_STATE });
    await expect(Promise.resolve(hasher.absorbAndFork(new Uint8Array(8), 0, 8, []))).rejects.toMatchObject({
      code: ErrorCode.INVALID_STATE,
    });
  });

  it('a thread that dies fails its streams at once (no hang); the next stream starts a new one', async () => {
    expect(await startHashThread()).toBe(true);
    const hasher = segmentHasher(started(), header);
    const pending = Array.from({ length: 8 }, () =>
      Promise.resolve(hasher.absorbAndFork(new Uint8Array(1 << 20), 0, 1 << 20, [new Uint8Array(1)])),
    );
    await stopHashThread();
    // Every call settles: answered if the thread got to it first, else INVALID_STATE; none waits on.
    for (const r of await Promise.allSettled(pending)) {
      if (r.status === 'rejected') expect(r.reason).toMatchObject({ code: ErrorCode.INVALID_STATE });
    }
    await expect(Promise.resolve(hasher.absorbAndFork(new Uint8Array(8), 0, 8, []))).rejects.toMatchObject({
      code: ErrorCode.INVALID_STATE,
    });
    expect(await startHashThread()).toBe(true);
    const again = segmentHasher(started(), header);
    const { digests } = await again.absorbAndFork(new Uint8Array([7]), 0, 1, [new Uint8Array([8])]);
    expect(digests[0]).toEqual(expected([new Uint8Array([7])], new Uint8Array([8])));
    again.close();
  });

  it('sealStream and StreamUnsealer on the thread: a round trip, and a sealer whose thread dies mid-stream fails typed', async () => {
    const kem = generateKemKeys();
    const ibs = generateSigningKeys();
    const policy = { ts: 1_700_000_000, con: [{ t: 'pbdf.sidn-pbdf.email.email', v: 'bob@example.org' }] };
    const options = { policy: { bob: policy }, pubSignKey: { key: extractSigningKey(ibs.sk, policy), policy } };
    const message = new Uint8Array(3 * 262_144 + 1234).map((_, i) => (i * 31) & 255);
    expect(await startHashThread()).toBe(true);
    const sealed = collector();
    await sealStream(kem.mpk, options, chunkedSource(message, 50_000), sealed.writable);
    const opened = collector();
    const u = await StreamUnsealer.new(chunkedSource(sealed.bytes(), 70_000), ibs.vk);
    await u.unseal('bob', extractUsk(kem.msk, policy), opened.writable);
    expect(opened.bytes()).toEqual(message);

    // A source that never ends: the thread is stopped while the stream runs.
    let sent = 0;
    const endless = new ReadableStream<Uint8Array>({
      pull(c) {
        sent += 1 << 16;
        c.enqueue(new Uint8Array(1 << 16));
        if (sent === 1 << 21) void stopHashThread();
      },
    });
    await expect(sealStream(kem.mpk, options, endless, collector().writable)).rejects.toMatchObject({
      code: ErrorCode.INVALID_STATE,
    });
  });

  it('never keeps a process alive: a script that started the thread, used or not, exits by itself', () => {
    const idle = `
      import { startHashThread } from ${JSON.stringify(fileURLToPath(new URL('./segment-hasher-node.ts', import.meta.url)))};
      if (!(await startHashThread())) process.exit(3);
    `;
    const quiet = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', idle], {
      timeout: 20_000,
      encoding: 'utf8',
    });
    expect([quiet.status, quiet.signal, quiet.stderr]).toEqual([0, null, '']);
    const script = `
      import { startHashThread, segmentHasher } from ${JSON.stringify(fileURLToPath(new URL('./segment-hasher-node.ts', import.meta.url)))};
      import { createShake128 } from ${JSON.stringify(fileURLToPath(new URL('./shake-node.ts', import.meta.url)))};
      if (!(await startHashThread())) process.exit(3);
      const h = segmentHasher(createShake128(), new Uint8Array());
      const { digests } = await h.absorbAndFork(new Uint8Array(10), 0, 10, [new Uint8Array(1)]);
      if (digests[0].length !== 64) process.exit(4);
      // no close, no stop: the process must still end
    `;
    const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      timeout: 20_000,
      encoding: 'utf8',
    });
    expect([run.status, run.signal, run.stderr]).toEqual([0, null, '']);
  });
});
