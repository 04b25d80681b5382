import { generateKeyPairSync } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { buildStandin } from './app.js';
import type { Clock } from './sessions.js';
import type { StandinOptions } from './settings.js';

/**
 * Helpers for tests that need a running stand-in (the PKG's, the CLI's, e2e): a clock the test moves,
 * and a server on an ephemeral loopback port.
 */

export interface ManualClock extends Clock {
  set(seconds: number): void;
  advance(seconds: number): void;
}

/** A clock that only moves when told to. Starts at `start` (Unix seconds). */
export function manualClock(start = 1_760_000_000): ManualClock {
  let t = start;
  return {
    now: () => t,
    set: (seconds) => {
      t = seconds;
    },
    advance: (seconds) => {
      t += seconds;
    },
  };
}

let sharedKeyPem: string | undefined;

/** One RSA key per process for tests that do not care which key it is (generating one costs ~0.1 s). */
export function testKeyPem(): string {
  sharedKeyPem ??= generateKeyPairSync('rsa', { modulusLength: 2048 })
    .privateKey.export({ type: 'pkcs8', format: 'pem' })
    .toString();
  return sharedKeyPem;
}

export interface RunningStandin {
  app: FastifyInstance;
  /** Base URL, e.g. http://127.0.0.1:41234 (no trailing slash). */
  url: string;
  close(): Promise<void>;
}

/**
 * Builds a stand-in and listens on 127.0.0.1 at a free port. Without `privateKeyPem` or `keyPath`
 * it uses the process-wide test key, so no key file is written.
 */
export async function startStandin(options: StandinOptions = {}): Promise<RunningStandin> {
  const withKey =
    options.privateKeyPem === undefined && options.keyPath === undefined
      ? { ...options, privateKeyPem: testKeyPem() }
      : options;
  const app = buildStandin(withKey);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.address();
  if (typeof address !== 'object' || address === null) throw new Error('stand-in did not bind a TCP port');
  return { app, url: `http://127.0.0.1:${address.port}`, close: () => app.close() };
}
