import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { gcraTake, memoryBucketStore, retryAfterSeconds } from './bucket.js';

function manualMs(start = 1_000_000) {
  let now = start;
  return { clock: () => now, advance: (ms: number) => (now += ms) };
}

async function takeMany(take: () => Promise<{ allowed: boolean }>, n: number): Promise<number> {
  let allowed = 0;
  for (let i = 0; i < n; i++) if ((await take()).allowed) allowed++;
  return allowed;
}

const US = 1000; // µs per ms

describe('gcraTake', () => {
  it('allows a full burst at one instant, then refuses with the exact wait', () => {
    let fullAt = 0;
    for (let i = 0; i < 5; i++) {
      const outcome = gcraTake(fullAt, 10_000 * US, 10, 5);
      if (!outcome.allowed) throw new Error(`take ${i} refused`);
      fullAt = outcome.fullAtUs;
    }
    expect(fullAt).toBe(10_500 * US);
    expect(gcraTake(fullAt, 10_000 * US, 10, 5)).toEqual({ allowed: false, waitUs: 100 * US });
    expect(gcraTake(fullAt, 10_040 * US, 10, 5)).toEqual({ allowed: false, waitUs: 60 * US });
    expect(gcraTake(fullAt, 10_100 * US, 10, 5)).toEqual({ allowed: true, fullAtUs: 10_600 * US });
  });

  it('always allows a take from a full bucket', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2e15 }),
        fc.integer({ min: 0, max: 1e9 }),
        fc.integer({ min: 1, max: 1e6 }),
        fc.integer({ min: 1, max: 1000 }),
        (now, elapsed, rate, burst) => gcraTake(Math.max(0, now - elapsed), now, rate, burst).allowed,
      ),
    );
  });

  it('gives exactly the burst at any single instant, at any rate, even at Redis clock magnitudes', () => {
    // In floating-point milliseconds this failed: at 1.1e12 ms, 96 additions of 1000/537 ms drifted past
    // the last token.
    fc.assert(
      fc.property(
        fc.oneof(fc.integer({ min: 0, max: 1e7 }), fc.integer({ min: 1e15, max: 2e15 })),
        fc.integer({ min: 1, max: 1e6 }),
        fc.integer({ min: 1, max: 300 }),
        (now, rate, burst) => {
          let fullAt = 0;
          let allowed = 0;
          for (let i = 0; i <= burst; i++) {
            const outcome = gcraTake(fullAt, now, rate, burst);
            if (outcome.allowed) {
              allowed++;
              fullAt = outcome.fullAtUs;
            }
          }
          return allowed === burst;
        },
      ),
    );
  });

  it('raises bursts below 1, and rates that are not positive (or not finite), to 1', () => {
    for (const low of [0, -3, Number.NaN]) {
      expect(gcraTake(0, 0, low, low)).toEqual({ allowed: true, fullAtUs: 1000 * US });
      expect(gcraTake(1000 * US, 0, low, low)).toEqual({ allowed: false, waitUs: 1000 * US });
    }
    expect(gcraTake(0, 0, 1, 0.5)).toEqual({ allowed: true, fullAtUs: 1000 * US });
  });

  it('keeps a fractional rate: a budget of 10 an hour refills one token every 6 minutes', () => {
    const rate = 10 / 3600;
    let fullAt = 0;
    for (let i = 0; i < 10; i++) {
      const take = gcraTake(fullAt, 0, rate, 10);
      expect(take.allowed).toBe(true);
      if (take.allowed) fullAt = take.fullAtUs;
    }
    expect(gcraTake(fullAt, 0, rate, 10)).toEqual({ allowed: false, waitUs: 360 * 1000 * US });
    expect(gcraTake(fullAt, 360 * 1000 * US, rate, 10).allowed).toBe(true);
  });

  it('matches an integer token-bucket model on every random schedule', () => {
    // Rates that divide 1000 keep the model exact: tokens in thousandths, time in ms.
    const schedule = fc.record({
      rate: fc.constantFrom(1, 2, 4, 5, 10, 20, 50),
      burst: fc.integer({ min: 1, max: 60 }),
      gaps: fc.array(fc.integer({ min: 0, max: 700 }), { maxLength: 200 }),
    });
    fc.assert(
      fc.property(schedule, ({ rate, burst, gaps }) => {
        let fullAt = 0;
        let milliTokens = burst * 1000;
        let now = 0;
        for (const gap of gaps) {
          now += gap;
          milliTokens = Math.min(burst * 1000, milliTokens + gap * rate);
          const modelAllows = milliTokens >= 1000;
          if (modelAllows) milliTokens -= 1000;
          const outcome = gcraTake(fullAt, now * US, rate, burst);
          if (outcome.allowed !== modelAllows) return false;
          if (outcome.allowed) fullAt = outcome.fullAtUs;
          else if (outcome.waitUs !== ((1000 - milliTokens) / rate) * US) return false;
        }
        return true;
      }),
    );
  });
});

describe('retryAfterSeconds', () => {
  it('rounds up to whole seconds and never says 0', () => {
    expect(retryAfterSeconds(0)).toBe(1);
    expect(retryAfterSeconds(1)).toBe(1);
    expect(retryAfterSeconds(1_000_000)).toBe(1);
    expect(retryAfterSeconds(1_000_001)).toBe(2);
    expect(retryAfterSeconds(59_999_999)).toBe(60);
  });
});

describe('memoryBucketStore', () => {
  it('gives the burst at once, then the steady rate', async () => {
    const time = manualMs();
    const store = memoryBucketStore(time.clock);
    const take = () => store.take('192.0.2.1', 'general', 10, 50);
    expect(await takeMany(take, 60)).toBe(50);
    expect(await take()).toEqual({ allowed: false, retryAfterSeconds: 1, waitMs: 100 });
    // Ten seconds at 10/s: 100 more, one every 100 ms, and not one more.
    let allowed = 0;
    for (let i = 0; i < 1000; i++) {
      time.advance(10);
      if ((await take()).allowed) allowed++;
    }
    expect(allowed).toBe(100);
    // An idle client refills to the burst, never above it.
    time.advance(3_600_000);
    expect(await takeMany(take, 60)).toBe(50);
  });

  it('gives exactly the burst when the clock reads fractional milliseconds', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.double({ min: 0, max: 1e7, noNaN: true }), fc.double({ min: 1e12, max: 2e12, noNaN: true })),
        fc.integer({ min: 1, max: 1000 }),
        fc.integer({ min: 1, max: 100 }),
        async (now, rate, burst) => {
          const store = memoryBucketStore(() => now);
          return (await takeMany(() => store.take('k', 'general', rate, burst), burst + 1)) === burst;
        },
      ),
      { numRuns: 50 },
    );
  });

  it('says when to come back: whole seconds, at least 1', async () => {
    const time = manualMs();
    const store = memoryBucketStore(time.clock);
    expect(await store.take('k', 'sensitive', 2, 1)).toEqual({ allowed: true, retryAfterSeconds: 0 });
    expect(await store.take('k', 'sensitive', 2, 1)).toEqual({ allowed: false, retryAfterSeconds: 1, waitMs: 500 });
    time.advance(499);
    expect((await store.take('k', 'sensitive', 2, 1)).retryAfterSeconds).toBe(1);
    time.advance(1);
    expect((await store.take('k', 'sensitive', 2, 1)).allowed).toBe(true);
  });

  it('keeps clients and tiers apart', async () => {
    const time = manualMs();
    const store = memoryBucketStore(time.clock);
    expect(await takeMany(() => store.take('a', 'general', 1, 3), 5)).toBe(3);
    expect(await takeMany(() => store.take('b', 'general', 1, 3), 5)).toBe(3);
    expect(await takeMany(() => store.take('a', 'sensitive', 1, 2), 5)).toBe(2);
    expect((await store.take('a', 'general', 1, 3)).allowed).toBe(false);
  });

  it('forgets full buckets on its periodic sweep', async () => {
    const time = manualMs();
    const store = memoryBucketStore(time.clock, { sweepIntervalMs: 1000 });
    for (let i = 0; i < 500; i++) await store.take(`client-${i}`, 'general', 10, 5);
    expect(store.size).toBe(500);
    time.advance(1000); // one token each, 100 ms after the take: all full again
    await store.take('latecomer', 'general', 10, 5);
    expect(store.size).toBe(1);
  });

  it('stays within maxBuckets under a flood of new clients, and keeps a client that keeps coming', async () => {
    const time = manualMs();
    const store = memoryBucketStore(time.clock, { maxBuckets: 100 });
    const drained = () => store.take('203.0.113.9', 'general', 1, 5);
    expect(await takeMany(drained, 5)).toBe(5);
    for (let i = 0; i < 20_000; i++) {
      // No time passes: nothing is full, so the store must drop live buckets to stay bounded.
      await store.take(`flood-${i}`, 'general', 1, 5);
      expect(store.size).toBeLessThanOrEqual(100);
      if (i % 10 === 0) expect((await drained()).allowed).toBe(false);
    }
  });
});
