/**
 * What the client runs in, as pg-js tells the storage service and the PKG in
 * X-POSTGUARD-CLIENT-VERSION (`<host>,<host version>`): Node with its version, a browser page or
 * worker (no version: a user agent is not ours to send), else unknown.
 */

/** A page or a worker of one: where an API key must never be used. */
export function isBrowser(): boolean {
  const g = globalThis as { window?: unknown; document?: unknown; WorkerGlobalScope?: unknown; process?: unknown };
  return (g.window !== undefined && g.document !== undefined) || g.WorkerGlobalScope !== undefined;
}

export function hostDescription(): string {
  const node = (globalThis as { process?: { versions?: { node?: string } } }).process?.versions?.node;
  if (node !== undefined && !isBrowser()) return `node,${node.replaceAll(',', '.')}`;
  return isBrowser() ? 'browser,unknown' : 'unknown,unknown';
}
