import { PkgClient, PkgClientErrorCode, isPkgClientError, memoryStore, type SigningKeys } from '../lib/pkg/index.js';
import type { ResolvedConfig } from './config.js';
import { ClientError, ClientErrorCode } from './errors.js';

/**
 * What the SDK asks the PKG, through the library's PKG client (postguard-ts/pkg): the master
 * public key (revalidated with its ETag on every call, so an unchanged key is not downloaded again)
 * and signing keys for an API key (POST /v2/irma/sign/key with `Authorization: Bearer PG-…`).
 * This module only turns the client's errors into the SDK's codes.
 */

export type { IssuedSigningKey, SigningKeys } from '../lib/pkg/index.js';

/** The SDK's code for each of the client's: what a sending service would handle differently. */
function sdkCode(code: PkgClientErrorCode, status: number | undefined): ClientErrorCode {
  switch (code) {
    case PkgClientErrorCode.PKG_UNAVAILABLE:
    case PkgClientErrorCode.RATE_LIMITED:
      return ClientErrorCode.PKG_UNAVAILABLE;
    case PkgClientErrorCode.UNAUTHORIZED:
      return ClientErrorCode.API_KEY_REJECTED;
    case PkgClientErrorCode.ABORTED:
      return ClientErrorCode.ABORTED;
    case PkgClientErrorCode.PKG_REJECTED:
      return status === 403 ? ClientErrorCode.API_KEY_REJECTED : ClientErrorCode.PKG_BAD_RESPONSE;
    default:
      return ClientErrorCode.PKG_BAD_RESPONSE;
  }
}

function asClientError(error: unknown): unknown {
  if (!isPkgClientError(error)) return error;
  const details = {
    cause: error,
    ...(error.status === undefined ? {} : { status: error.status }),
    ...(error.url === undefined ? {} : { url: error.url }),
  };
  return new ClientError(sdkCode(error.code, error.status), error.message, details);
}

export class ClientPkg {
  private readonly client: PkgClient;

  constructor(private readonly config: ResolvedConfig) {
    this.client = new PkgClient({
      url: config.pkgUrl,
      fetch: config.fetch as typeof fetch,
      headers: config.headers,
      timeoutMs: config.timeouts.pkgMs,
      // A sending service may run for months: ask each time, with If-None-Match, instead of trusting a copy.
      parametersMaxAgeMs: 0,
      // Nothing secret is cached (signing keys are fetched per sealed object), and nothing goes to disk.
      store: memoryStore(),
    });
  }

  /** The master public key (base64). */
  masterPublicKey(signal?: AbortSignal): Promise<string> {
    return this.client.masterPublicKey({ signal }).catch((e: unknown) => Promise.reject(asClientError(e)));
  }

  /** Signing keys for the identity the API key stands for (the PKG decides it; the request only names the e-mail type). */
  signingKeys(apiKey: string, signal?: AbortSignal): Promise<SigningKeys> {
    return this.client
      .signingKeys({ apiKey }, { pubSignId: [{ t: this.config.attributes.email }] }, { signal })
      .catch((e: unknown) => Promise.reject(asClientError(e)));
  }
}
