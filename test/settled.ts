/** How a promise settles (its error, or undefined), and how many ms after `from()` it did. */
export async function settled(promise: Promise<unknown>, from: () => number): Promise<{ error: unknown; ms: number }> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  return { error, ms: Date.now() - from() };
}

/** A signal aborted `ms` from now (as a user who went away), and when it was (Infinity before). */
export function abortLater(ms: number): { signal: AbortSignal; abortedAt: () => number } {
  const stop = new AbortController();
  let at = Infinity;
  setTimeout(() => {
    at = Date.now();
    stop.abort(new Error('the user went away'));
  }, ms);
  return { signal: stop.signal, abortedAt: () => at };
}
