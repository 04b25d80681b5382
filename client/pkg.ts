import {
  PkgClient,
  PkgClientErrorCode,
  isPkgClientError,
  keyRequestCon,
  keyTimestamp,
  memoryStore,
  type IdentitySession,
  type KeyValueStore,
  type SigningKeys,
} from '../lib/pkg/index.js';
import type { Policy } from '../lib/policy.js';
import type { UserKeys, VerifyingKeys } from '../lib/unseal.js';
import type { ElementLike } from '../lib/web-types.js';
import type { ResolvedConfig } from './config.js';
import { ClientError, ClientErrorCode } from './errors.js';
import { showSessionIn } from './qr-panel.js';
import type { SessionCallback, SignMethod } from './sign.js';

/**
 * What the client asks the PKG, through the library's PKG client (postguard-ts/pkg): the public
 * keys, signing keys for each of the three ways to sign, and a recipient's decryption key. This
 * module only chooses the flow and turns the PKG client's errors into the client's codes.
 */

export type { IssuedSigningKey, SigningKeys } from '../lib/pkg/index.js';

/** The client's code for each of the PKG client's: what an app would handle differently. */
function clientCode(code: PkgClientErrorCode, status: number | undefined): ClientErrorCode {
  switch (code) {
    case PkgClientErrorCode.PKG_UNAVAILABLE:
    case PkgClientErrorCode.RATE_LIMITED:
      return ClientErrorCode.PKG_UNAVAILABLE;
    case PkgClientErrorCode.UNAUTHORIZED:
      return ClientErrorCode.API_KEY_REJECTED;
    case PkgClientErrorCode.ABORTED:
      return ClientErrorCode.ABORTED;
    case PkgClientErrorCode.SESSION_CANCELLED:
    case PkgClientErrorCode.SESSION_TIMEOUT:
    case PkgClientErrorCode.NOT_VALID:
      return ClientErrorCode.SESSION_FAILED;
    case PkgClientErrorCode.PKG_REJECTED:
      return status === 403 ? ClientErrorCode.API_KEY_REJECTED : ClientErrorCode.PKG_BAD_RESPONSE;
    default:
      return ClientErrorCode.PKG_BAD_RESPONSE;
  }
}

export function asClientError(error: unknown): unknown {
  if (!isPkgClientError(error)) return error;
  const details = {
    cause: error,
    ...(error.status === undefined ? {} : { status: error.status }),
    ...(error.url === undefined ? {} : { url: error.url }),
  };
  return new ClientError(clientCode(error.code, error.status), error.message, details);
}

const translated = <T>(promise: Promise<T>): Promise<T> =>
  promise.catch((e: unknown) => Promise.reject(asClientError(e)));

/** Where an identity session is shown: into an element, or handed to the app. */
export interface SessionDisplay {
  element?: string | ElementLike | undefined;
  onSession?: ((session: IdentitySession) => void) | undefined;
}

function presenter(display: SessionDisplay): ((session: IdentitySession) => void) | undefined {
  const { element, onSession } = display;
  if (element === undefined) return onSession;
  return (session) => {
    const hide = showSessionIn(element, session);
    session.result().then(hide, hide);
    onSession?.(session);
  };
}

/** A recipient's decryption key: from the cache, a session shown in the page, or the app's callback. */
export interface DecryptionKeyRequest extends SessionDisplay {
  recipientId: string;
  policy: Policy;
  session?: SessionCallback | undefined;
  enableCache?: boolean | undefined;
  signal?: AbortSignal | undefined;
}

export class ClientPkg {
  readonly client: PkgClient;

  constructor(
    private readonly config: ResolvedConfig,
    store: KeyValueStore | Promise<KeyValueStore> | undefined,
  ) {
    this.client = new PkgClient({
      url: config.pkgUrl,
      fetch: config.fetch as typeof fetch,
      headers: config.headers,
      timeoutMs: config.timeouts.pkgMs,
      // A sending service may run for months: ask each time, with If-None-Match, instead of trusting a copy.
      parametersMaxAgeMs: store === undefined ? 0 : 5 * 60_000,
      // Without a store nothing goes to disk: a server keeps no keys between calls.
      store: store ?? memoryStore(),
    });
  }

  /** The master public key (base64). */
  masterPublicKey(signal?: AbortSignal): Promise<string> {
    return translated(this.client.masterPublicKey({ signal }));
  }

  /** The verifying key (base64). */
  verificationKey(signal?: AbortSignal): Promise<string> {
    return translated(this.client.verificationKey({ signal }));
  }

  /** Every verifying key of the PKG's key set (or its one key), as the unsealers take them. */
  verificationKeys(signal?: AbortSignal): Promise<VerifyingKeys> {
    return translated(this.client.verificationKeys({ signal }));
  }

  /**
   * Signing keys for the sender, by the method they chose. An API key: the identity the PKG
   * registered for it. A session: what the sender disclosed, the e-mail address publicly and the
   * other attributes privately (only recipients see them).
   */
  signingKeys(method: SignMethod, signal?: AbortSignal): Promise<SigningKeys> {
    const email = this.config.attributes.email;
    const pubSignId = [{ t: email }];
    switch (method.type) {
      case 'apiKey':
        return translated(this.client.signingKeys({ apiKey: method.apiKey }, { pubSignId }, { signal }));
      case 'session':
        return translated(
          (async () => {
            const con = [method.senderEmail === undefined ? { t: email } : { t: email, v: method.senderEmail }];
            const jwt = await method.callback({ con, sort: 'Signing' });
            return this.client.signingKeys({ jwt }, { pubSignId }, { signal });
          })(),
        );
      case 'yivi': {
        const o = method.options;
        const extra = o.attributes ?? [];
        const con = [
          o.senderEmail === undefined ? { t: email } : { t: email, v: o.senderEmail },
          ...extra.map((a) => (a.v === undefined ? { t: a.t } : { t: a.t, v: a.v })),
        ];
        const show = presenter(o);
        return translated(
          this.client.signingKeysWithSession({
            con,
            pubSignId,
            ...(extra.length === 0 ? {} : { privSignId: extra.map((a) => ({ t: a.t })) }),
            ...(show === undefined ? {} : { onSession: show }),
            ...(signal === undefined ? {} : { signal }),
          }),
        );
      }
    }
  }

  /**
   * The user secret key for `recipientId`, as pg-js gets it (its key request rules: keyRequestCon):
   * from a PKG with a key set, one per key that still opens files of the policy's time (one session).
   */
  async decryptionKey(request: DecryptionKeyRequest): Promise<UserKeys> {
    const { recipientId, policy, signal } = request;
    if (request.session !== undefined) {
      const con = keyRequestCon(recipientId, policy);
      const hints = policy.con.map((a) => (a.t === this.config.attributes.email ? { t: a.t, v: recipientId } : a));
      const jwt = await request.session({ con, sort: 'Decryption', hints });
      return translated(this.client.userSecretKeys(jwt, keyTimestamp(policy), { signal }));
    }
    const show = presenter(request);
    if (show === undefined && request.enableCache !== true) {
      throw new ClientError(ClientErrorCode.INVALID_INPUT, 'decrypt: give element, onSession or session');
    }
    const key = await translated(
      this.client.decryptionKey({
        recipientId,
        policy,
        ...(show === undefined ? {} : { onSession: show }),
        ...(signal === undefined ? {} : { signal }),
        cache: request.enableCache === true,
      }),
    );
    return key.usks ?? key.usk;
  }
}
