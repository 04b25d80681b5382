/** Time in Unix seconds. Injected everywhere time matters, so tests can move it. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Math.floor(Date.now() / 1000) };

/**
 * How far ahead of our clock a client-supplied time may lie: clocks disagree a little, and clients
 * round. One allowance for everything that checks "not in the future": the JWT's `iat` and `nbf`
 * (idp/jwt.ts) and the timestamp of key/{timestamp} (routes/keys.ts).
 */
export const CLOCK_SKEW_SECONDS = 60;
