import { spawn, type ChildProcess } from 'node:child_process';
import type { Cluster, Worker } from 'node:cluster';
import { EventEmitter } from 'node:events';
import { request } from 'node:http';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { recordingLogger } from '../db/testing.js';
import { memoryBucketStore, type BucketStore, type TakeResult } from './bucket.js';
import {
  clusterBucketStore,
  installClusterBucketServer,
  PROTOCOL,
  type ClusterChannel,
  type TakeRequest,
} from './cluster.js';

function fakeChannel() {
  const listeners = new Set<(message: unknown) => void>();
  const state = { connected: true, sendError: null as Error | null };
  const sent: TakeRequest[] = [];
  const channel: ClusterChannel = {
    send(message, onSent) {
      sent.push(message);
      queueMicrotask(() => onSent(state.sendError));
    },
    onMessage(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    get connected() {
      return state.connected;
    },
  };
  const deliver = (message: unknown) => {
    for (const listener of listeners) listener(message);
  };
  const reply = (id: number, result: TakeResult) => deliver({ protocol: PROTOCOL, id, ...result });
  return { channel, sent, state, deliver, reply, listeners };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const REFUSED: TakeResult = { allowed: false, retryAfterSeconds: 7 };

describe('clusterBucketStore (worker side)', () => {
  it('asks the primary and matches answers to questions by id, in any order', async () => {
    const { channel, sent, reply } = fakeChannel();
    const store = clusterBucketStore({ channel, timeoutMs: 5000 });
    const first = store.take('a', 'general', 10, 50);
    const second = store.take('b', 'sensitive', 2, 10);
    expect(sent).toEqual([
      { protocol: PROTOCOL, id: 1, key: 'a', tier: 'general', ratePerSecond: 10, burst: 50 },
      { protocol: PROTOCOL, id: 2, key: 'b', tier: 'sensitive', ratePerSecond: 2, burst: 10 },
    ]);
    reply(2, REFUSED);
    reply(1, { allowed: true, retryAfterSeconds: 0 });
    expect(await second).toEqual(REFUSED);
    expect(await first).toEqual({ allowed: true, retryAfterSeconds: 0 });
    await store.close();
  });

  it("remembers the primary's refusal until the next token, so a flood does not reach the primary", async () => {
    const { channel, sent, reply } = fakeChannel();
    const store = clusterBucketStore({ channel, timeoutMs: 5000 });
    const first = store.take('a', 'sensitive', 2, 10);
    reply(1, { allowed: false, retryAfterSeconds: 1, waitMs: 80 });
    expect(await first).toMatchObject({ allowed: false });
    // Refused locally, without a message, while the refusal stands; other clients and tiers still ask.
    for (let i = 0; i < 100; i++) expect((await store.take('a', 'sensitive', 2, 10)).allowed).toBe(false);
    expect(sent).toHaveLength(1);
    void store.take('a', 'general', 10, 50);
    void store.take('b', 'sensitive', 2, 10);
    expect(sent).toHaveLength(3);
    // Once the next token is due, the primary decides again.
    await sleep(90);
    const again = store.take('a', 'sensitive', 2, 10);
    expect(sent).toHaveLength(4);
    reply(4, { allowed: true, retryAfterSeconds: 0 });
    expect(await again).toEqual({ allowed: true, retryAfterSeconds: 0 });
    await store.close();
  });

  it('ignores messages that are not answers to its own questions', async () => {
    const { channel, deliver, reply } = fakeChannel();
    const store = clusterBucketStore({ channel, timeoutMs: 5000 });
    const pending = store.take('a', 'general', 1, 1);
    let settled = false;
    void pending.then(() => (settled = true));
    for (const noise of [
      null,
      'x',
      { id: 1 },
      { protocol: 'other', id: 1, allowed: false, retryAfterSeconds: 1 },
      { protocol: PROTOCOL, id: 1, allowed: 'no', retryAfterSeconds: 1 },
      { protocol: PROTOCOL, id: 99, ...REFUSED },
    ]) {
      deliver(noise);
    }
    await sleep(10);
    expect(settled).toBe(false);
    reply(1, REFUSED);
    expect(await pending).toEqual(REFUSED);
    await store.close();
  });

  it('answers from its own buckets when the primary misses the deadline, then asks again later', async () => {
    const { channel, sent, reply } = fakeChannel();
    const { lines, logger } = recordingLogger();
    const store = clusterBucketStore({ channel, timeoutMs: 30, retryAfterMs: 150, logger });
    // The local fallback is a real bucket: burst 2, then refused.
    expect(await store.take('a', 'general', 1, 2)).toEqual({ allowed: true, retryAfterSeconds: 0 });
    expect(lines).toEqual([['warn', expect.stringContaining('did not answer within 30 ms')]]);
    reply(1, REFUSED); // too late: ignored
    // Within retryAfterMs nothing is sent: no request waits for a primary known to be stuck.
    expect(await store.take('a', 'general', 1, 2)).toEqual({ allowed: true, retryAfterSeconds: 0 });
    expect((await store.take('a', 'general', 1, 2)).allowed).toBe(false);
    expect(sent).toHaveLength(1);

    await sleep(160);
    const asked = store.take('a', 'general', 1, 2);
    expect(sent).toHaveLength(2);
    reply(2, { allowed: true, retryAfterSeconds: 0 });
    expect(await asked).toEqual({ allowed: true, retryAfterSeconds: 0 });
    expect(lines).toHaveLength(2);
    expect(lines[1]).toEqual(['info', expect.stringContaining('answers again')]);
    await store.close();
  });

  it('does not wait for the deadline when the message cannot be sent or the channel is gone', async () => {
    const { channel, sent, state } = fakeChannel();
    const store = clusterBucketStore({ channel, timeoutMs: 60_000, retryAfterMs: 0 });
    state.sendError = new Error('channel closed');
    expect(await store.take('a', 'general', 1, 1)).toEqual({ allowed: true, retryAfterSeconds: 0 });
    state.connected = false;
    expect((await store.take('a', 'general', 1, 1)).allowed).toBe(false);
    expect(sent).toHaveLength(1);
    await store.close();
  });

  it('settles pending takes locally and stops listening on close', async () => {
    const { channel, listeners } = fakeChannel();
    const store = clusterBucketStore({ channel, timeoutMs: 60_000 });
    const pending = store.take('a', 'general', 1, 1);
    expect(listeners.size).toBe(1);
    await store.close();
    expect(await pending).toEqual({ allowed: true, retryAfterSeconds: 0 });
    expect(listeners.size).toBe(0);
  });
});

describe('installClusterBucketServer (primary side)', () => {
  function fakeWorker(connected = true) {
    const sent: unknown[] = [];
    const worker = {
      isConnected: () => connected,
      send: (message: unknown, callback: () => void) => {
        sent.push(message);
        callback();
        return true;
      },
    };
    return { worker: worker as unknown as Worker, sent };
  }

  it('answers every well-formed take from the one store, to the worker that asked', async () => {
    const cluster = new EventEmitter();
    installClusterBucketServer(
      cluster as unknown as Cluster,
      memoryBucketStore(() => 0),
    );
    const one = fakeWorker();
    const two = fakeWorker();
    const ask = (w: Worker, id: number) =>
      cluster.emit('message', w, { protocol: PROTOCOL, id, key: 'k', tier: 'general', ratePerSecond: 1, burst: 2 });
    ask(one.worker, 1);
    ask(two.worker, 1);
    ask(one.worker, 2);
    await sleep(0);
    expect(one.sent).toEqual([
      { protocol: PROTOCOL, id: 1, allowed: true, retryAfterSeconds: 0 },
      { protocol: PROTOCOL, id: 2, allowed: false, retryAfterSeconds: 1, waitMs: 1000 },
    ]);
    expect(two.sent).toEqual([{ protocol: PROTOCOL, id: 1, allowed: true, retryAfterSeconds: 0 }]);
  });

  it('ignores malformed requests and workers that are gone', async () => {
    const cluster = new EventEmitter();
    const calls: string[] = [];
    const store: BucketStore = {
      take: (key) => {
        calls.push(key);
        return Promise.resolve({ allowed: true, retryAfterSeconds: 0 });
      },
      close: () => Promise.resolve(),
    };
    installClusterBucketServer(cluster as unknown as Cluster, store);
    const { worker, sent } = fakeWorker();
    const good = { protocol: PROTOCOL, id: 1, key: 'k', tier: 'general', ratePerSecond: 1, burst: 2 };
    for (const bad of [
      null,
      { ...good, protocol: 'other' },
      { ...good, id: 1.5 },
      { ...good, key: 7 },
      { ...good, key: 'x'.repeat(257) },
      { ...good, tier: 'admin' },
      { ...good, burst: '2' },
    ]) {
      cluster.emit('message', worker, bad);
    }
    const gone = fakeWorker(false);
    cluster.emit('message', gone.worker, good);
    await sleep(0);
    expect(calls).toEqual(['k']);
    expect(sent).toEqual([]);
    expect(gone.sent).toEqual([]);
  });
});

describe('a real node:cluster', () => {
  const fixture = fileURLToPath(new URL('./cluster.fixture.ts', import.meta.url));
  const cwd = fileURLToPath(new URL('..', import.meta.url));
  let running: ChildProcess | undefined;

  afterEach(async () => {
    if (running === undefined || running.exitCode !== null) return;
    const exited = new Promise((resolve) => running?.once('exit', resolve));
    running.stdin?.end();
    await exited;
    running = undefined;
  });

  async function startCluster(env: Record<string, string>): Promise<number> {
    const child = spawn(process.execPath, ['--import', 'tsx', fixture], {
      cwd,
      env: { ...process.env, ...env },
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    running = child;
    return new Promise((resolve, reject) => {
      let out = '';
      child.stdout?.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        const ready = /READY (\d+)/.exec(out);
        if (ready) resolve(Number(ready[1]));
      });
      child.once('exit', (code) => reject(new Error(`cluster exited early (${code}): ${out}`)));
    });
  }

  /** One request on its own connection, so the primary deals it to the next worker. */
  function whoami(port: number): Promise<{ status: number; worker?: number }> {
    return new Promise((resolve, reject) => {
      const req = request({ port, host: '127.0.0.1', path: '/v2/whoami', agent: false }, (res) => {
        let body = '';
        res.on('data', (chunk: Buffer) => (body += chunk.toString()));
        res.on('end', () => {
          const status = res.statusCode ?? 0;
          resolve(status === 200 ? { status, worker: (JSON.parse(body) as { worker: number }).worker } : { status });
        });
      });
      req.on('error', reject);
      req.end();
    });
  }

  async function hammer(port: number, total: number, concurrency: number) {
    const results: Array<{ status: number; worker?: number }> = [];
    const started = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next++ < total) results.push(await whoami(port));
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    const allowed = results.filter((r) => r.status === 200);
    return {
      seconds,
      allowed: allowed.length,
      refused: results.filter((r) => r.status === 429).length,
      workers: new Set(allowed.map((r) => r.worker)),
    };
  }

  it('gives all workers together the allowance of one bucket, not one per worker', async () => {
    const port = await startCluster({ WORKERS: '3', BURST: '20' });
    const { seconds, allowed, refused, workers } = await hammer(port, 120, 6);
    // Burst 20 plus the 1/s refill over the run; three separate buckets would allow 60.
    expect(allowed).toBeGreaterThanOrEqual(20);
    expect(allowed).toBeLessThanOrEqual(20 + Math.ceil(seconds) + 1);
    expect(allowed + refused).toBe(120);
    expect(workers.size).toBeGreaterThan(1);
  });

  it('keeps serving, limited per worker, when the primary does not answer', async () => {
    const port = await startCluster({ WORKERS: '3', BURST: '10', PRIMARY: 'silent' });
    const { seconds, allowed, refused, workers } = await hammer(port, 90, 6);
    expect(allowed + refused).toBe(90);
    expect(workers.size).toBeGreaterThan(1);
    expect(allowed).toBeGreaterThan(10);
    expect(allowed).toBeLessThanOrEqual(3 * (10 + Math.ceil(seconds) + 1));
  });
});
