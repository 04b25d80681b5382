import { PostGuard } from 'postguard-ts/client';
import { EMAIL, EMAIL_DOMAIN } from './attributes.js';
import { DemoError } from './messages.js';
import { getServices, type Services } from './runtime.js';

/**
 * The send and receive pages' client: postguard-ts/client over the services in /config.json, on
 * the page's crypto worker (one worker for the page, not two), saving downloads through the demo's
 * service worker (sw.js carries the library's decrypter).
 */

export interface ClientServices extends Services {
  client: PostGuard;
}

/**
 * WORKAROUND, to delete once postguard-ts/client sends a chunk as bytes in a page: its chunk PUT
 * has a ReadableStream body (duplex 'half') with a Content-Length header. Browsers drop that header;
 * Chromium refuses a streamed body over HTTP/1.1 (seen here: every chunk failed as unreachable), and
 * Firefox and WebKit take no stream as a fetch body at all (web-features "fetch-request-streams";
 * Firefox bug 1387483). A chunk is at most the service's chunk size and the client holds it in
 * memory anyway, so reading it back into one buffer costs one chunk.
 */
const fetchWithBufferedBodies: typeof fetch = async (input, init) => {
  if (!(init?.body instanceof ReadableStream)) return fetch(input, init);
  const body = new Uint8Array(await new Response(init.body).arrayBuffer());
  const headers = new Headers(init.headers);
  headers.delete('content-length');
  const { duplex: _duplex, ...rest } = init as RequestInit & { duplex?: string };
  return fetch(input, { ...rest, headers, body });
};

let made: Promise<ClientServices> | undefined;

/** The client once /config.json is read; DemoError NO_STORAGE where the config names no storage service. */
export function getClient(): Promise<ClientServices> {
  made ??= getServices().then((services) => {
    const { pkgUrl, cryptifyUrl } = services.config;
    if (cryptifyUrl === null) throw new DemoError('NO_STORAGE', 'config.json names no storage service (cryptifyUrl)');
    const client = new PostGuard({
      pkgUrl,
      cryptifyUrl,
      // Only loosens the https rule for http://localhost, 127.0.0.1 and [::1]: the dev stack.
      allowInsecureUrls: true,
      emailAttributes: { email: EMAIL, domain: EMAIL_DOMAIN },
      engine: services.pg,
      serviceWorker: './sw.js',
      cryptifySource: 'postguard-ts-demo',
      fetch: fetchWithBufferedBodies,
    });
    return { ...services, client };
  });
  return made;
}
