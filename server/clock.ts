/** Time in Unix seconds. Injected everywhere time matters, so tests can move it. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Math.floor(Date.now() / 1000) };
