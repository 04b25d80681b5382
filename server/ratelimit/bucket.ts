/**
 * Token buckets for the PKG's rate limiter, and the in-process store that keeps them.
 *
 * A bucket holds up to `burst` tokens and gains `ratePerSecond` tokens per second; a request takes one.
 * We keep each bucket as a single number, its "theoretical arrival time" (GCRA): the instant, in whole
 * microseconds, at which the bucket would be full again. That is the whole state, the same in every store (memory, cluster primary,
 * Redis), and a bucket whose instant has passed is full, so it can be forgotten without changing anything.
 */

/**
 * The limiter's two tiers per client address, and the two per-key budgets (server/budgets.ts), whose
 * buckets are keyed by the API key's id.
 */
export const TIERS = ['general', 'sensitive', 'key-hour', 'key-day'] as const;
export type Tier = (typeof TIERS)[number];

export interface TakeResult {
  allowed: boolean;
  /** Whole seconds until a token is available again: 0 when allowed, at least 1 when not. */
  retryAfterSeconds: number;
  /** When refused and the store knows it: milliseconds until the next token, unrounded. */
  waitMs?: number;
}

/** A store whose backend is unreachable and whose policy is to refuse rather than answer locally. */
export class BucketStoreUnavailableError extends Error {
  override readonly name = 'BucketStoreUnavailableError';
}

export interface BucketStore {
  /**
   * Takes one token from the bucket of (`key`, `tier`). When their backend is unreachable, stores answer
   * from a local fallback (see each store), or, if so configured, reject with BucketStoreUnavailableError.
   */
  take(key: string, tier: Tier, ratePerSecond: number, burst: number): Promise<TakeResult>;
  close(): Promise<void>;
}

/** Bursts below 1 (or not a finite number) are raised to 1, as the reference PKG does. */
export function atLeastOne(value: number): number {
  return Number.isFinite(value) && value >= 1 ? value : 1;
}

/**
 * A rate that is not a positive finite number is 1 token per second (the reference PKG's floor for its
 * settings); a positive fraction is kept, so that a budget of 1000 an hour refills at 1000/3600 per second.
 */
export function positiveRate(value: number): number {
  return Number.isFinite(value) && value > 0 ? value : 1;
}

/**
 * Microseconds between two tokens, rounded to a whole microsecond (at least 1).
 *
 * All bucket arithmetic is in whole microseconds, so it is exact: in floating-point milliseconds at Redis's
 * clock (1.7e12 ms) each addition rounds, and a burst taken at one instant lost its last token to the
 * accumulated error. The price is a rate off by at most half a microsecond per token (3/s refills at
 * 3.000003/s).
 */
export function tokenIntervalUs(ratePerSecond: number): number {
  return Math.max(1, Math.round(1_000_000 / positiveRate(ratePerSecond)));
}

export type GcraOutcome = { allowed: true; fullAtUs: number } | { allowed: false; waitUs: number };

/**
 * One take against a bucket that is full at `fullAtUs` (whole µs; 0 or any past instant for a full
 * bucket) at `nowUs` (whole µs). Allowed: the bucket's new full instant. Refused: how long until one token
 * is there.
 */
export function gcraTake(fullAtUs: number, nowUs: number, ratePerSecond: number, burst: number): GcraOutcome {
  const interval = tokenIntervalUs(ratePerSecond);
  const backlog = Math.max(fullAtUs - nowUs, 0); // time until full; the bucket holds burst - backlog / interval
  const headroom = (Math.floor(atLeastOne(burst)) - 1) * interval; // the most backlog that still leaves a token
  if (backlog > headroom) return { allowed: false, waitUs: backlog - headroom };
  return { allowed: true, fullAtUs: nowUs + backlog + interval };
}

/** Whole seconds for Retry-After: rounded up, never 0 (a client told "retry in 0 s" retries at once). */
export function retryAfterSeconds(waitUs: number): number {
  return Math.max(1, Math.ceil(waitUs / 1_000_000));
}

export const ALLOWED: TakeResult = Object.freeze({ allowed: true, retryAfterSeconds: 0 });

export const refused = (waitUs: number): TakeResult => ({
  allowed: false,
  retryAfterSeconds: retryAfterSeconds(waitUs),
  waitMs: waitUs / 1000,
});

export interface MemoryBucketStoreOptions {
  /** Hard bound on the number of buckets kept (default 100 000, roughly 10 MB). */
  maxBuckets?: number;
  /** How often (in clock ms) a take also sweeps out full buckets (default 10 s). */
  sweepIntervalMs?: number;
}

export interface MemoryBucketStore extends BucketStore {
  /** Buckets currently held (full buckets may linger until the next sweep). */
  readonly size: number;
}

/**
 * Buckets in a Map, kept in least-recently-used order (a take moves its bucket to the end).
 *
 * Memory stays bounded: full buckets are swept out every `sweepIntervalMs`, and when a flood of new
 * clients reaches `maxBuckets` the store sweeps and then drops the least recently used tenth. Dropping a
 * bucket that was not yet full hands that (least recently seen) client a fresh burst; that is the price of the bound.
 *
 * `clock` gives milliseconds (fractions welcome); by default the monotonic `performance.now()`.
 */
export function memoryBucketStore(
  clock: () => number = () => performance.now(),
  options: MemoryBucketStoreOptions = {},
): MemoryBucketStore {
  const maxBuckets = Math.max(1, Math.floor(options.maxBuckets ?? 100_000));
  const sweepIntervalMs = options.sweepIntervalMs ?? 10_000;
  const buckets = new Map<string, number>();
  // Instants in whole µs (see tokenIntervalUs).
  let lastSweep = Math.round(clock() * 1000);

  const sweep = (now: number) => {
    lastSweep = now;
    for (const [id, fullAt] of buckets) if (fullAt <= now) buckets.delete(id);
  };

  const makeRoom = (now: number) => {
    sweep(now);
    // Leave a tenth free so the next O(n) sweep is at least maxBuckets / 10 new clients away.
    const target = maxBuckets - Math.ceil(maxBuckets / 10);
    for (const id of buckets.keys()) {
      if (buckets.size <= target) break;
      buckets.delete(id);
    }
  };

  return {
    get size() {
      return buckets.size;
    },
    take(key, tier, ratePerSecond, burst) {
      const now = Math.round(clock() * 1000);
      if (now - lastSweep >= sweepIntervalMs * 1000) sweep(now);
      const id = `${tier}|${key}`;
      const fullAt = buckets.get(id);
      if (fullAt === undefined && buckets.size >= maxBuckets) makeRoom(now);
      const outcome = gcraTake(fullAt ?? 0, now, ratePerSecond, burst);
      // Re-inserting moves the bucket to the recent end, refused takes included: a client that keeps
      // hammering must not become the least recently used and be forgotten.
      buckets.delete(id);
      if (!outcome.allowed) {
        if (fullAt !== undefined) buckets.set(id, fullAt);
        return Promise.resolve(refused(outcome.waitUs));
      }
      buckets.set(id, outcome.fullAtUs);
      return Promise.resolve(ALLOWED);
    },
    close() {
      buckets.clear();
      return Promise.resolve();
    },
  };
}
