/**
 * Token buckets for the PKG's rate limiter, and the in-process store that keeps them.
 *
 * A bucket holds up to `burst` tokens and gains `ratePerSecond` tokens per second; a request takes one.
 * We keep each bucket as a single number, its "theoretical arrival time" (GCRA): the instant at which the
 * bucket would be full again. That is the whole state, the same in every store (memory, cluster primary,
 * Redis), and a bucket whose instant has passed is full, so it can be forgotten without changing anything.
 */

export type Tier = 'general' | 'sensitive';

export interface TakeResult {
  allowed: boolean;
  /** Whole seconds until a token is available again: 0 when allowed, at least 1 when not. */
  retryAfterSeconds: number;
}

export interface BucketStore {
  /**
   * Takes one token from the bucket of (`key`, `tier`). Stores never reject: when their backend is
   * unreachable they answer from a local fallback (see each store).
   */
  take(key: string, tier: Tier, ratePerSecond: number, burst: number): Promise<TakeResult>;
  close(): Promise<void>;
}

/** Settings below 1 (or not a finite number) are raised to 1, as the reference PKG does. */
export function atLeastOne(value: number): number {
  return Number.isFinite(value) && value >= 1 ? value : 1;
}

/** Milliseconds between two tokens. */
export function tokenInterval(ratePerSecond: number): number {
  return 1000 / atLeastOne(ratePerSecond);
}

/**
 * Slack for floating-point rounding of instants (ms). Clock readings are fractional and as large as
 * 1.7e12 (Redis time), where one unit in the last place is about 0.0002 ms; without slack a burst taken at
 * one instant could lose its last token to rounding. Ten microseconds early is no gift to anyone.
 */
export const ROUNDING_SLACK_MS = 0.01;

export type GcraOutcome = { allowed: true; fullAt: number } | { allowed: false; waitMs: number };

/**
 * One take against a bucket that is full at `fullAt` (ms; 0 or any past instant for a full bucket).
 * Allowed: the bucket's new `fullAt`. Refused: how long until one token is there.
 */
export function gcraTake(fullAt: number, now: number, ratePerSecond: number, burst: number): GcraOutcome {
  const interval = tokenInterval(ratePerSecond);
  // Work with the backlog (ms until full) rather than absolute instants: a full bucket then has a backlog
  // of exactly 0 and always allows, whatever rounding `now + interval - interval` would do.
  const backlog = Math.max(fullAt - now, 0);
  // The take needs one token: burst - backlog / interval >= 1.
  const headroom = (Math.floor(atLeastOne(burst)) - 1) * interval;
  if (backlog > headroom + ROUNDING_SLACK_MS) return { allowed: false, waitMs: backlog - headroom };
  return { allowed: true, fullAt: now + backlog + interval };
}

/** Whole seconds for Retry-After: rounded up, never 0 (a client told "retry in 0 s" retries at once). */
export function retryAfterSeconds(waitMs: number): number {
  return Math.max(1, Math.ceil(waitMs / 1000));
}

export const ALLOWED: TakeResult = Object.freeze({ allowed: true, retryAfterSeconds: 0 });

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
 * bucket that was not yet full hands that (long idle) client a fresh burst; that is the price of the bound.
 *
 * `clock` gives milliseconds; by default the monotonic `performance.now()`.
 */
export function memoryBucketStore(
  clock: () => number = () => performance.now(),
  options: MemoryBucketStoreOptions = {},
): MemoryBucketStore {
  const maxBuckets = Math.max(1, Math.floor(options.maxBuckets ?? 100_000));
  const sweepIntervalMs = options.sweepIntervalMs ?? 10_000;
  const buckets = new Map<string, number>();
  let lastSweep = clock();

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
      const now = clock();
      if (now - lastSweep >= sweepIntervalMs) sweep(now);
      const id = `${tier}|${key}`;
      const fullAt = buckets.get(id);
      if (fullAt === undefined && buckets.size >= maxBuckets) makeRoom(now);
      const outcome = gcraTake(fullAt ?? 0, now, ratePerSecond, burst);
      // Re-inserting moves the bucket to the recent end, refused takes included: a client that keeps
      // hammering must not become the least recently used and be forgotten.
      buckets.delete(id);
      if (!outcome.allowed) {
        if (fullAt !== undefined) buckets.set(id, fullAt);
        return Promise.resolve({ allowed: false, retryAfterSeconds: retryAfterSeconds(outcome.waitMs) });
      }
      buckets.set(id, outcome.fullAt);
      return Promise.resolve(ALLOWED);
    },
    close() {
      buckets.clear();
      return Promise.resolve();
    },
  };
}
