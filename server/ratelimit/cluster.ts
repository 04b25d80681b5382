import type { Cluster, Worker } from 'node:cluster';
import type { FastifyBaseLogger } from 'fastify';
import { TIERS, memoryBucketStore, type BucketStore, type TakeResult, type Tier } from './bucket.js';

/**
 * One set of buckets for all workers of a `node:cluster` PKG: workers ask the primary over the cluster
 * IPC channel, and the primary answers from a single store.
 *
 * A refusal from the primary is remembered in the worker until the client's next token is due, and
 * the client's takes are refused locally meanwhile. So a flood from one client costs the primary one
 * message per refill interval per worker instead of one per request; without this the primary fell
 * behind under a flood, workers timed out into their own buckets, and the allowance multiplied.
 *
 * When the primary does not answer (hung, or the channel is gone) a worker neither fails closed (that
 * would turn a stuck primary into a full outage) nor open (that would drop the limit on key-issuing
 * endpoints): it answers from its own memory buckets, so the limit still holds per worker, at most N
 * times the configured one, and logs the switch. After `retryAfterMs` it asks the primary again.
 */

/** Tags our IPC messages, so other cluster traffic passes by untouched. */
export const PROTOCOL = 'pg-pkg/ratelimit';

/** What a worker sends the primary. */
export interface TakeRequest {
  protocol: typeof PROTOCOL;
  id: number;
  key: string;
  tier: Tier;
  ratePerSecond: number;
  burst: number;
}

/** What the primary answers. */
export interface TakeReply extends TakeResult {
  protocol: typeof PROTOCOL;
  id: number;
}

type Log = Pick<FastifyBaseLogger, 'warn' | 'info'>;

/** The worker's side of the IPC channel; by default the process's own channel to the primary. */
export interface ClusterChannel {
  send(message: TakeRequest, onSent: (error: Error | null) => void): void;
  /** Subscribes to messages from the primary; returns the unsubscribe function. */
  onMessage(listener: (message: unknown) => void): () => void;
  readonly connected: boolean;
}

export interface ClusterBucketStoreOptions {
  /** How long to wait for the primary before answering locally (default 250 ms). */
  timeoutMs?: number;
  /** How long to stay local after the primary missed a deadline (default 1 s). */
  retryAfterMs?: number;
  /** Answers while the primary does not (default: a memory store). */
  fallback?: BucketStore;
  logger?: Log;
  channel?: ClusterChannel;
}

function processChannel(): ClusterChannel {
  return {
    send(message, onSent) {
      if (process.send === undefined) {
        onSent(new Error('this process has no IPC channel (not a cluster worker)'));
        return;
      }
      try {
        process.send(message, onSent);
      } catch (error) {
        onSent(error instanceof Error ? error : new Error(String(error)));
      }
    },
    onMessage(listener) {
      process.on('message', listener);
      return () => process.off('message', listener);
    },
    get connected() {
      return process.connected;
    },
  };
}

/** The store for a cluster worker. */
export function clusterBucketStore(options: ClusterBucketStoreOptions = {}): BucketStore {
  const timeoutMs = options.timeoutMs ?? 250;
  const retryAfterMs = options.retryAfterMs ?? 1000;
  const fallback = options.fallback ?? memoryBucketStore();
  const channel = options.channel ?? processChannel();
  const log = options.logger;

  interface Waiting {
    resolve: (result: TakeResult | Promise<TakeResult>) => void;
    answerLocally: () => Promise<TakeResult>;
    timer: NodeJS.Timeout;
  }
  const pending = new Map<number, Waiting>();
  /** `${tier}|${key}` → performance.now() until which the primary's refusal stands. */
  const refusedUntil = new Map<string, { until: number; result: TakeResult }>();
  let nextId = 1;
  let localUntil = 0;
  let local = false;

  const goLocal = (why: string) => {
    localUntil = performance.now() + retryAfterMs;
    if (!local) log?.warn(`rate limiter: the cluster primary ${why}; using this worker's own buckets`);
    local = true;
  };

  const unsubscribe = channel.onMessage((message) => {
    if (!isTakeReply(message)) return;
    const waiting = pending.get(message.id);
    if (waiting === undefined) return; // answered after its deadline: already served locally
    pending.delete(message.id);
    clearTimeout(waiting.timer);
    if (local) log?.info('rate limiter: the cluster primary answers again; using the shared buckets');
    local = false;
    const result: TakeResult = { allowed: message.allowed, retryAfterSeconds: message.retryAfterSeconds };
    if (typeof message.waitMs === 'number' && Number.isFinite(message.waitMs)) result.waitMs = message.waitMs;
    waiting.resolve(result);
  });

  return {
    take(key, tier, ratePerSecond, burst) {
      const answerLocally = () => fallback.take(key, tier, ratePerSecond, burst);
      const cacheKey = `${tier}|${key}`;
      const cached = refusedUntil.get(cacheKey);
      if (cached !== undefined) {
        const left = cached.until - performance.now();
        if (left > 0)
          return Promise.resolve({ ...cached.result, retryAfterSeconds: Math.max(1, Math.ceil(left / 1000)) });
        refusedUntil.delete(cacheKey);
      }
      if (!channel.connected) {
        goLocal('is not connected');
        return answerLocally();
      }
      if (local && performance.now() < localUntil) return answerLocally();
      return new Promise<TakeResult>((resolve) => {
        const id = nextId++;
        const remember = (result: TakeResult) => {
          if (!result.allowed && result.waitMs !== undefined && result.waitMs > 0) {
            if (refusedUntil.size >= MAX_REMEMBERED_REFUSALS) forgetExpired(refusedUntil);
            if (refusedUntil.size < MAX_REMEMBERED_REFUSALS) {
              refusedUntil.set(cacheKey, { until: performance.now() + result.waitMs, result });
            }
          }
          return result;
        };
        const giveUp = (why: string) => {
          if (!pending.delete(id)) return;
          clearTimeout(timer);
          goLocal(why);
          resolve(answerLocally());
        };
        const timer = setTimeout(() => giveUp(`did not answer within ${timeoutMs} ms`), timeoutMs);
        timer.unref();
        pending.set(id, { resolve: (r) => resolve(r instanceof Promise ? r : remember(r)), answerLocally, timer });
        channel.send({ protocol: PROTOCOL, id, key, tier, ratePerSecond, burst }, (error) => {
          if (error !== null) giveUp(`could not be reached (${error.message})`);
        });
      });
    },
    async close() {
      unsubscribe();
      for (const [id, waiting] of pending) {
        pending.delete(id);
        clearTimeout(waiting.timer);
        waiting.resolve(waiting.answerLocally());
      }
      await fallback.close();
    },
  };
}

/**
 * Makes the primary answer its workers' takes from `store`. Call once in the primary, before forking.
 * Malformed messages are ignored; other cluster messages pass untouched.
 */
export function installClusterBucketServer(cluster: Cluster, store: BucketStore): void {
  cluster.on('message', (worker: Worker, message: unknown) => {
    if (!isTakeRequest(message)) return;
    const { id, key, tier, ratePerSecond, burst } = message;
    store.take(key, tier, ratePerSecond, burst).then(
      (result) => {
        if (!worker.isConnected()) return;
        const reply: TakeReply = { protocol: PROTOCOL, id, ...result };
        // A worker that went away between asking and our answer: nothing to do.
        worker.send(reply, () => undefined);
      },
      // Stores do not reject; if one did, the worker's deadline moves it to its own buckets.
      () => undefined,
    );
  });
}

const MAX_KEY_LENGTH = 256;
/** Bounds the worker's memory of refusals under a flood of distinct clients. */
const MAX_REMEMBERED_REFUSALS = 10_000;

function forgetExpired(refusals: Map<string, { until: number }>): void {
  const now = performance.now();
  for (const [k, v] of refusals) if (v.until <= now) refusals.delete(k);
}

function isTakeRequest(message: unknown): message is TakeRequest {
  if (typeof message !== 'object' || message === null) return false;
  const m = message as Partial<TakeRequest>;
  return (
    m.protocol === PROTOCOL &&
    Number.isSafeInteger(m.id) &&
    typeof m.key === 'string' &&
    m.key.length <= MAX_KEY_LENGTH &&
    (TIERS as readonly unknown[]).includes(m.tier) &&
    typeof m.ratePerSecond === 'number' &&
    typeof m.burst === 'number'
  );
}

function isTakeReply(message: unknown): message is TakeReply {
  if (typeof message !== 'object' || message === null) return false;
  const m = message as Partial<TakeReply>;
  return (
    m.protocol === PROTOCOL &&
    typeof m.id === 'number' &&
    typeof m.allowed === 'boolean' &&
    typeof m.retryAfterSeconds === 'number'
  );
}
