/**
 * One tab per upload: the tab that is sending holds a Web Lock named after the upload, and a tab
 * that finds the upload unfinished on load resumes it only if it gets the lock at once, so two
 * tabs never send the same chunks side by side. Without Web Locks (an old engine) every tab may try.
 */

const lockName = (uuid: string) => `postguard-demo-upload:${uuid}`;

/** Holds the upload's lock until `work` settles. */
export function holdWhile(uuid: string, work: Promise<unknown>): void {
  if (!('locks' in navigator)) return;
  void navigator.locks.request(lockName(uuid), () => work.catch(() => undefined)).catch(() => undefined);
}

/** Runs `work` under the upload's lock; resolves undefined without running it if another tab holds it. */
export async function ifUnclaimed<T>(uuid: string, work: () => Promise<T>): Promise<T | undefined> {
  if (!('locks' in navigator)) return work();
  return navigator.locks.request(lockName(uuid), { ifAvailable: true }, (lock) => (lock === null ? undefined : work()));
}
