import type { IdentitySession } from '../lib/pkg/index.js';
import type { ElementLike } from '../lib/web-types.js';
import { ClientError, ClientErrorCode, invalidInput } from './errors.js';
import { isBrowser } from './host.js';

/**
 * Signing methods, pg-js's three: an organisation's API key (a server's, never a page's: the key
 * would be readable by anyone who opens the page), a Yivi session the sender completes in the page
 * (QR or same-device link), or a session the app runs itself and hands over as a JWT. Each gives
 * the PKG's signing keys for what was proved, so recipients see who sent the files.
 */

const SIGN = Symbol('postguard-ts sign method');

/**
 * Signing with an organisation's API key (`PG-…`): the PKG issues signing keys for the identity
 * registered with that key, which recipients see as the sender. Made by `pg.sign.apiKey()`.
 */
export class ApiKeySign {
  /** @internal */
  readonly [SIGN] = true;
  /** Which signing method this is. */
  readonly type = 'apiKey' as const;
  readonly #apiKey: string;

  /** Use `pg.sign.apiKey()`. */
  constructor(apiKey: string) {
    this.#apiKey = apiKey;
  }

  /** @internal */
  get apiKey(): string {
    return this.#apiKey;
  }

  /** Never print the key. */
  toJSON(): { type: 'apiKey' } {
    return { type: 'apiKey' };
  }
}

/** One attribute the sender is asked to disclose besides the e-mail address (`{t}` any value, `{t, v}` exactly v). */
export interface SenderAttribute {
  /** The attribute type, e.g. `pbdf.gemeente.personalData.fullname`. */
  t: string;
  /** The value it must have; without it, whatever the sender's credential holds. */
  v?: string;
}

/** What `pg.sign.yivi()` takes. */
export interface YiviSignOptions {
  /**
   * Where to show the QR code and the same-device link: an element or a CSS selector. It is
   * emptied and filled while the session runs, and emptied again after. Give this or `onSession`.
   */
  element?: string | ElementLike;
  /** Called with the session when a scan is needed, to show it yourself (`session.qrText`, `session.sameDeviceLink`). */
  onSession?: (session: IdentitySession) => void;
  /** The sender must disclose exactly this e-mail address (else any address of theirs). */
  senderEmail?: string;
  /** More attributes to disclose; they sign privately (only recipients see them). */
  attributes?: readonly SenderAttribute[];
  /** Add the sender's own address as a recipient, so the sender can open the message too (needs `senderEmail`). */
  includeSender?: boolean;
}

/** Signing with a Yivi session in the page. Made by `pg.sign.yivi()`. */
export class YiviSign {
  /** @internal */
  readonly [SIGN] = true;
  /** Which signing method this is. */
  readonly type = 'yivi' as const;
  /** Use `pg.sign.yivi()`. */
  constructor(
    /** What the sender is asked to disclose and where the session is shown. */
    readonly options: Readonly<YiviSignOptions>,
  ) {}
}

/** What a session callback is asked to run: pg-js's `SessionRequest`. */
export interface SessionRequest {
  /** The attributes to disclose (a Yivi condiscon's inner conjunction). */
  con: Array<{ t: string; v?: string }>;
  /** What the session is for. */
  sort: 'Signing' | 'Decryption';
  /** For decryption: the recipient's hidden policy with the e-mail value filled in, to show the user. */
  hints?: Array<{ t: string; v?: string }>;
}

/** Runs an identity session at the PKG however the app likes and resolves with its result JWT. */
export type SessionCallback = (request: SessionRequest) => Promise<string>;

/** Signing with a session the app runs itself (e-mail add-ins). Made by `pg.sign.session()`. */
export class SessionSign {
  /** @internal */
  readonly [SIGN] = true;
  /** Which signing method this is. */
  readonly type = 'session' as const;
  /** Use `pg.sign.session()`. */
  constructor(
    /** Runs the session and returns its JWT. */
    readonly callback: SessionCallback,
    /** The address the sender must disclose, when the app knows it. */
    readonly senderEmail: string | undefined,
  ) {}
}

/** A way for the sender to sign, for `EncryptInput.sign`. */
export type SignMethod = ApiKeySign | YiviSign | SessionSign;

export const isSignMethod = (value: unknown): value is SignMethod =>
  typeof value === 'object' && value !== null && SIGN in value;

/** `PG-` and then printable ASCII only: anything else cannot be a key and must not reach a header. */
const API_KEY = /^PG-[\x21-\x7e]+$/;

export function apiKeySign(apiKey: unknown): ApiKeySign {
  if (isBrowser()) {
    throw new ClientError(
      ClientErrorCode.API_KEY_IN_BROWSER,
      'an API key signs on a server: in a page anyone could read it. Sign with pg.sign.yivi() or pg.sign.session() here',
    );
  }
  if (typeof apiKey !== 'string' || !API_KEY.test(apiKey)) {
    throw new ClientError(ClientErrorCode.INVALID_API_KEY, 'an API key is "PG-" followed by printable characters');
  }
  return new ApiKeySign(apiKey);
}

const EMAIL = /^[^@\s]+@[^@\s]+$/;

export function yiviSign(options: unknown): YiviSign {
  if (typeof options !== 'object' || options === null)
    throw invalidInput('sign.yivi: expected {element} or {onSession}');
  const o = options as YiviSignOptions;
  const hasElement = typeof o.element === 'string' || (typeof Element !== 'undefined' && o.element instanceof Element);
  if (!hasElement && typeof o.onSession !== 'function')
    throw invalidInput('sign.yivi: give element (an element or a CSS selector) or onSession (a function)');
  if (o.senderEmail !== undefined && (typeof o.senderEmail !== 'string' || !EMAIL.test(o.senderEmail)))
    throw invalidInput(`sign.yivi: senderEmail ${JSON.stringify(o.senderEmail)} is not an e-mail address`);
  if (o.includeSender === true && o.senderEmail === undefined)
    throw invalidInput('sign.yivi: includeSender needs senderEmail');
  const attributes = o.attributes ?? [];
  if (!Array.isArray(attributes)) throw invalidInput('sign.yivi: attributes must be an array of {t, v?}');
  attributes.forEach((a: unknown, i) => {
    const { t, v } = (typeof a === 'object' && a !== null ? a : {}) as SenderAttribute;
    if (typeof t !== 'string' || t === '' || (v !== undefined && typeof v !== 'string'))
      throw invalidInput(`sign.yivi: attributes[${i}] must be {t: string, v?: string}`);
  });
  return new YiviSign({ ...o, attributes: attributes.map((a) => ({ ...a })) });
}

export function sessionSign(callback: unknown, options: { senderEmail?: unknown } = {}): SessionSign {
  if (typeof callback !== 'function') throw invalidInput('sign.session: expected a callback that returns a JWT');
  const senderEmail = options?.senderEmail;
  if (senderEmail !== undefined && (typeof senderEmail !== 'string' || !EMAIL.test(senderEmail)))
    throw invalidInput(`sign.session: senderEmail ${JSON.stringify(senderEmail)} is not an e-mail address`);
  return new SessionSign(callback as SessionCallback, senderEmail);
}
