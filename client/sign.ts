import { ClientError, ClientErrorCode } from './errors.js';

/**
 * Signing methods. The sending-side SDK signs with an organisation's API key: the PKG issues
 * signing keys for the identity registered with that key (for example the organisation's
 * e-mail address and name), so recipients see who sent the files.
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

/** A way for the sender to sign, for `EncryptInput.sign` (so far only {@link ApiKeySign}). */
export type SignMethod = ApiKeySign;

export const isSignMethod = (value: unknown): value is SignMethod =>
  typeof value === 'object' && value !== null && SIGN in value;

/** `PG-` and then printable ASCII only: anything else cannot be a key and must not reach a header. */
const API_KEY = /^PG-[\x21-\x7e]+$/;

export function apiKeySign(apiKey: unknown): ApiKeySign {
  if (typeof apiKey !== 'string' || !API_KEY.test(apiKey)) {
    throw new ClientError(ClientErrorCode.INVALID_API_KEY, 'an API key is "PG-" followed by printable characters');
  }
  return new ApiKeySign(apiKey);
}
