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
    });
    return { ...services, client };
  });
  return made;
}
