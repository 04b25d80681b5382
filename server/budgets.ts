import type { KeyBudgets } from './db.js';
import { PkgError } from './errors.js';
import { BucketStoreUnavailableError, type BucketStore } from './ratelimit/index.js';

/**
 * Per-key budgets: how many signing requests one API key may make per hour and per day, counted in the
 * rate limiter's bucket store (memory, the cluster primary, or Redis: shared by every instance, as the
 * per-address limits are). Each budget is a token bucket that holds the whole budget and refills
 * evenly over its period: a key with 1000 an hour may spend 1000 at once, then one every 3.6 s. A key
 * without a budget spends nothing. After a rotation the old and the new key spend the same counters
 * (`budgets.counter`), so the grace period does not double the budget.
 */

const HOUR_S = 3600;
const DAY_S = 86_400;

/** Spends one request of the key's budgets; API_KEY_BUDGET_EXCEEDED (429 + Retry-After) when one is spent. */
export async function spendBudget(store: BucketStore, budgets: KeyBudgets): Promise<void> {
  const limits: Array<['key-hour' | 'key-day', number, number]> = [];
  if (budgets.perHour !== null) limits.push(['key-hour', budgets.perHour, HOUR_S]);
  if (budgets.perDay !== null) limits.push(['key-day', budgets.perDay, DAY_S]);
  for (const [tier, budget, period] of limits) {
    let take;
    try {
      take = await store.take(budgets.counter, tier, budget / period, budget);
    } catch (error) {
      if (error instanceof BucketStoreUnavailableError)
        throw new PkgError('RATE_LIMITER_UNAVAILABLE', undefined, { retryAfterSeconds: 1, cause: error });
      throw error;
    }
    if (!take.allowed) {
      const per = tier === 'key-hour' ? 'hour' : 'day';
      throw new PkgError('API_KEY_BUDGET_EXCEEDED', `this API key's budget of ${budget} per ${per} is spent`, {
        retryAfterSeconds: take.retryAfterSeconds,
      });
    }
  }
}
