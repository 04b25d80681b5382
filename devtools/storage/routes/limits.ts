import type { FastifyInstance } from 'fastify';
import type { StorageContext } from '../context.js';

/**
 * GET /limits, as Cryptify serves it: the default tier's caps, unauthenticated, so a client can
 * refuse an over-limit file before its user scans a QR code. The API-key tier is not shown: the
 * caller has not said who it is.
 */

/** The body of GET /limits. */
export interface LimitsBody {
  per_upload_limit_bytes: number;
  rolling_limit_bytes: number;
  /** Whole days, rounded down, as Cryptify reports its window. */
  window_days: number;
}

export function limitsBody(ctx: StorageContext): LimitsBody {
  const { perUploadLimit, rollingLimit, rollingWindowSeconds } = ctx.settings;
  return {
    per_upload_limit_bytes: perUploadLimit,
    rolling_limit_bytes: rollingLimit,
    window_days: Math.floor(rollingWindowSeconds / 86_400),
  };
}

export async function limitsRoutes(app: FastifyInstance, ctx: StorageContext): Promise<void> {
  app.get('/limits', async () => limitsBody(ctx));
}
