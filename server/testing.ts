import type { FastifyInstance } from 'fastify';
import { generatePkgKeys, type PkgKeys } from '../lib/keys.js';
import { buildApp, type AppDeps } from './app.js';
import type { Clock } from './clock.js';
import { memoryBucketStore, type BucketStore, type RateLimitSettings } from './ratelimit/index.js';
import { manualClock, startStandin, type ManualClock, type RunningStandin } from '../devtools/standin/testing.js';
import type { StandinOptions } from '../devtools/standin/settings.js';

/**
 * Helpers for tests that need a running PKG: real HTTP on loopback, in front of the real stand-in
 * identity server, sharing one manual clock (so a test can expire JWTs and sessions by moving it).
 */

let sharedKeys: PkgKeys | undefined;

/** One set of master keys per test process (generation is not free). */
export function testKeys(): PkgKeys {
  sharedKeys ??= generatePkgKeys();
  return sharedKeys;
}

export const NO_RATE_LIMIT: RateLimitSettings = {
  perSecond: 10,
  burst: 50,
  sensitivePerSecond: 2,
  sensitiveBurst: 10,
  disabled: true,
  trustForwardedFor: false,
};

export interface RunningPkg {
  app: FastifyInstance;
  /** e.g. http://127.0.0.1:41234 */
  url: string;
  keys: PkgKeys;
  clock: ManualClock;
  yivi: RunningStandin;
  close(): Promise<void>;
}

export interface StartPkgOptions extends Partial<Omit<AppDeps, 'clock' | 'rateLimit'>> {
  clock?: ManualClock;
  rateLimit?: { settings: RateLimitSettings; store?: BucketStore };
  standin?: StandinOptions;
  /** Use this stand-in instead of starting one (it is then not closed either). */
  yivi?: RunningStandin;
}

/** Listens on 127.0.0.1 at a free port; starts a stand-in unless one is given. */
export async function startPkg(options: StartPkgOptions = {}): Promise<RunningPkg> {
  const clock = options.clock ?? manualClock(Math.floor(Date.now() / 1000));
  const ownStandin = options.yivi === undefined;
  const yivi =
    options.yivi ??
    (await startStandin({ clock, sweepIntervalMs: 0, sseOpenDelayMs: 20, pairingHint: false, ...options.standin }));
  const keys = options.keys ?? testKeys();
  const { standin: _standin, yivi: _yivi, rateLimit, ...rest } = options;
  const app = buildApp({
    keys,
    identityServer: { url: yivi.url },
    allowedOrigins: ['http://app.example'],
    processMetrics: false,
    ...rest,
    clock: clock as Clock,
    rateLimit: {
      settings: rateLimit?.settings ?? NO_RATE_LIMIT,
      store: rateLimit?.store ?? memoryBucketStore(),
    },
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.address();
  if (typeof address !== 'object' || address === null) throw new Error('PKG did not bind a TCP port');
  return {
    app,
    url: `http://127.0.0.1:${address.port}`,
    keys,
    clock,
    yivi,
    close: async () => {
      // Tests do not wait for lingering keep-alive sockets (an aborted fetch leaves one behind).
      const closing = app.close();
      app.server.closeAllConnections();
      await closing;
      if (ownStandin) {
        const closingStandin = yivi.close();
        yivi.app.server.closeAllConnections();
        await closingStandin;
      }
    },
  };
}
