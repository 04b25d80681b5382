/// <reference lib="webworker" />
import { errorResponse, unknownDownload } from './sw-headers.js';
import { MESSAGE_KEEPALIVE, MESSAGE_REGISTER, MESSAGE_REVOKE, type RegisterRequest } from './sw-protocol.js';
import { respondHead, respondRange } from './sw-range.js';
import { DownloadRegistry } from './sw-registry.js';
import { decrypterSettings, type DecrypterOptions } from './sw-settings.js';
import { respondWhole, type WholeContext } from './sw-whole.js';

/**
 * The decrypting service worker's router, installable into any service worker (worker/sw.ts is the
 * ready-made script). A page registers a ciphertext source with the recipient id and keys
 * (sw-registry.ts) and gets a URL under the worker's scope; a fetch of (or navigation to) that URL
 * is answered with the plaintext as it is decrypted: the whole file (sw-whole.ts), each segment
 * only after it authenticated, with flat memory whatever the size, or for a seekable registration
 * the range asked for (sw-range.ts). If anything fails after a response started, its body stream
 * errors, so a download is marked failed rather than saved short or corrupt.
 */

export type { DecrypterOptions } from './sw-settings.js';
export { HEARTBEAT_MS } from './sw-settings.js';
export { contentDisposition, safeFilename } from './sw-headers.js';

/**
 * The decrypter as a route, for a service worker with a router of its own (workbox's
 * `registerRoute(route.match, route.handler)` style), plus the page's messages, which it needs too.
 */
export interface DecrypterRoute {
  /** Whether a request is for one of the decrypter's download URLs (a GET or HEAD under its path). */
  match(options: { url: URL; request: Request }): boolean;
  /** Answers a request that `match` accepted; `event` is kept alive while the body streams. */
  handler(options: { request: Request; event?: ExtendableEvent }): Promise<Response>;
  /** The pages' messages (registrations, revocations, keep-alives): the worker's `message` listener. */
  onMessage(event: ExtendableMessageEvent): void;
}

/** The decrypter for `scope` as a route; {@link installDecrypter} mounts it on the worker's own events. */
export function createDecrypterRoute(scope: ServiceWorkerGlobalScope, options: DecrypterOptions = {}): DecrypterRoute {
  const settings = decrypterSettings(scope, options);
  const scopeUrl = scope.registration.scope;
  const registry = new DownloadRegistry(settings, scopeUrl);
  const ctx: WholeContext = { settings, registry };
  const origin = new URL(scopeUrl).origin;
  const prefix = new URL(settings.path, scopeUrl).pathname;

  /**
   * Keeps the worker alive until every body it started has been sent, not just until the headers;
   * but never past `maxEventMs` for one event (Chromium stops a worker whose event runs five
   * minutes). Longer downloads are kept alive by the page's keep-alive messages (download.ts).
   */
  const keepAlive = (event: ExtendableEvent | undefined) => {
    const lifetimes: Promise<unknown>[] = [];
    let release!: () => void;
    const alive = new Promise<void>((resolve) => (release = resolve));
    const cap = setTimeout(() => release(), settings.maxEventMs);
    void alive.then(() => clearTimeout(cap));
    event?.waitUntil(alive);
    return {
      track: (p: Promise<unknown>) => void lifetimes.push(p),
      done: () => void Promise.allSettled(lifetimes).then(() => release()),
    };
  };

  async function answer(request: Request, event: ExtendableEvent | undefined): Promise<Response> {
    const id = new URL(request.url).pathname.slice(prefix.length).split('/')[0] ?? '';
    if (request.method === 'HEAD') {
      // A one-shot download has no HEAD: it is served once, and a HEAD must not spend it.
      const known = registry.peek(id);
      if (known === undefined) return unknownDownload();
      if (!known.seekable)
        return errorResponse(405, 'METHOD_NOT_ALLOWED', 'a download is served once, to a GET', { allow: 'GET' });
      return respondHead(known, ctx);
    }
    const entry = registry.claim(id);
    if (entry === undefined) return unknownDownload();
    const life = keepAlive(event);
    const range = request.headers.get('range');
    // If-Range asks for a range only if the representation is unchanged; with no validator of ours
    // to compare it with, the condition is false, and HTTP then says: send the whole representation.
    const ranged = entry.seekable && range !== null && !request.headers.has('if-range');
    try {
      return await (ranged ? respondRange(entry, range, ctx, life.track) : respondWhole(entry, ctx, life.track));
    } finally {
      life.done();
    }
  }

  return {
    match: ({ url, request }) =>
      url.origin === origin &&
      url.pathname.startsWith(prefix) &&
      (request.method === 'GET' || request.method === 'HEAD'),
    handler: ({ request, event }) => answer(request, event),
    onMessage(event) {
      const data = event.data as { type?: unknown; request?: RegisterRequest; id?: unknown } | null;
      if (typeof data !== 'object' || data === null) return;
      if (data.type === MESSAGE_REGISTER) {
        const reply = event.ports[0];
        if (reply !== undefined) registry.register(data.request as RegisterRequest, reply);
      } else if (data.type === MESSAGE_REVOKE && typeof data.id === 'string') {
        registry.revoke(data.id);
      } else if (data.type === MESSAGE_KEEPALIVE) {
        // Each message extends the worker's life a little; pages send one while downloads run.
        event.waitUntil(new Promise((resolve) => setTimeout(resolve, 1000)));
      }
    },
  };
}

/**
 * Makes `scope`, your own service worker, answer the URLs that `prepareDownload` gives pages, as
 * the ready-built `postguard-ts/sw/script` does: it adds a `message` listener (registrations) and a
 * `fetch` listener that answers only requests under its path and leaves every other to your code.
 */
export function installDecrypter(scope: ServiceWorkerGlobalScope, options: DecrypterOptions = {}): void {
  const route = createDecrypterRoute(scope, options);
  scope.addEventListener('message', (event) => route.onMessage(event));
  scope.addEventListener('fetch', (event) => {
    if (route.match({ url: new URL(event.request.url), request: event.request }))
      event.respondWith(route.handler({ request: event.request, event }));
  });
}
