import type { ResolvedConfig } from './config.js';
import { SdkError, SdkErrorCode } from './errors.js';
import { discard, exchange, excerpt, isTransientStatus, readJson } from './http.js';

/**
 * What the SDK asks the PKG: the master public key (GET /v2/parameters, revalidated with its
 * ETag so an unchanged key is not downloaded again) and signing keys for an API key
 * (POST /v2/irma/sign/key with `Authorization: Bearer PG-…`).
 */

/** A signing key as the PKG issues it; handed to the sealer unchanged. */
export interface IssuedSigningKey {
  key: string;
  policy: { ts: number; con: Array<{ t: string; v?: string }> };
}

export interface SigningKeys {
  pubSignKey: IssuedSigningKey;
  privSignKey?: IssuedSigningKey;
}

const unavailable = (url: string, message: string, details: { status?: number; cause?: unknown } = {}) =>
  new SdkError(SdkErrorCode.PKG_UNAVAILABLE, message, { url, ...details });

const badResponse = (url: string, message: string, status?: number) =>
  new SdkError(SdkErrorCode.PKG_BAD_RESPONSE, message, status === undefined ? { url } : { url, status });

async function send(config: ResolvedConfig, url: string, init: RequestInit, signal: AbortSignal | undefined): Promise<Response> {
  const result = await exchange(config.fetch, url, init, config.timeouts.pkgMs, signal);
  if (!result.ok) {
    const what = result.reason === 'timeout' ? `no answer within ${config.timeouts.pkgMs} ms` : 'the PKG could not be reached';
    throw unavailable(url, `${what} (${url})`, { cause: result.cause });
  }
  const { response } = result;
  if (isTransientStatus(response.status)) {
    await discard(response);
    throw unavailable(url, `HTTP ${response.status} from the PKG (${url})`, { status: response.status });
  }
  return response;
}

function isIssuedKey(value: unknown): value is IssuedSigningKey {
  if (typeof value !== 'object' || value === null) return false;
  const { key, policy } = value as { key?: unknown; policy?: unknown };
  if (typeof key !== 'string' || typeof policy !== 'object' || policy === null) return false;
  const { ts, con } = policy as { ts?: unknown; con?: unknown };
  return typeof ts === 'number' && Array.isArray(con);
}

export class PkgClient {
  private parameters: { publicKey: string; etag: string | undefined } | undefined;

  constructor(private readonly config: ResolvedConfig) {}

  /** The master public key (base64). Cached; each call revalidates with If-None-Match. */
  async masterPublicKey(signal?: AbortSignal): Promise<string> {
    const url = `${this.config.pkgUrl}/v2/parameters`;
    const cached = this.parameters;
    const headers: Record<string, string> = { ...this.config.headers, accept: 'application/json' };
    if (cached?.etag !== undefined) headers['if-none-match'] = cached.etag;
    const response = await send(this.config, url, { method: 'GET', headers }, signal);
    if (response.status === 304 && cached !== undefined) {
      await discard(response);
      return cached.publicKey;
    }
    if (response.status !== 200) {
      throw badResponse(url, `HTTP ${response.status} from GET /v2/parameters: ${await excerpt(response)}`, response.status);
    }
    const body = (await readJson(response)) as { publicKey?: unknown } | undefined;
    if (typeof body?.publicKey !== 'string') throw badResponse(url, 'GET /v2/parameters did not return a publicKey');
    this.parameters = { publicKey: body.publicKey, etag: response.headers.get('etag') ?? undefined };
    return body.publicKey;
  }

  /** Signing keys for the identity the API key stands for (the PKG decides it; the request only names the e-mail type). */
  async signingKeys(apiKey: string, signal?: AbortSignal): Promise<SigningKeys> {
    const url = `${this.config.pkgUrl}/v2/irma/sign/key`;
    const response = await send(
      this.config,
      url,
      {
        method: 'POST',
        headers: {
          ...this.config.headers,
          'content-type': 'application/json',
          accept: 'application/json',
          authorization: `Bearer ${apiKey}`,
        },
        body: JSON.stringify({ pubSignId: [{ t: this.config.attributes.email }] }),
      },
      signal,
    );
    if (response.status === 401 || response.status === 403) {
      await discard(response);
      throw new SdkError(SdkErrorCode.API_KEY_REJECTED, `the PKG rejected the API key (HTTP ${response.status})`, {
        url,
        status: response.status,
      });
    }
    if (response.status !== 200) {
      throw badResponse(url, `HTTP ${response.status} from POST /v2/irma/sign/key: ${await excerpt(response)}`, response.status);
    }
    const body = (await readJson(response)) as Record<string, unknown> | undefined;
    if (body === undefined || typeof body !== 'object' || body === null) {
      throw badResponse(url, 'POST /v2/irma/sign/key did not return JSON');
    }
    if (body['status'] !== undefined && body['status'] !== 'DONE') {
      throw badResponse(url, `the PKG answered status ${JSON.stringify(body['status'])} instead of DONE`);
    }
    if (body['proofStatus'] !== undefined && body['proofStatus'] !== 'VALID') {
      throw badResponse(url, `the PKG answered proofStatus ${JSON.stringify(body['proofStatus'])} instead of VALID`);
    }
    const { pubSignKey, privSignKey } = body;
    if (!isIssuedKey(pubSignKey)) throw badResponse(url, 'POST /v2/irma/sign/key did not return a usable pubSignKey');
    if (privSignKey === undefined || privSignKey === null) return { pubSignKey };
    if (!isIssuedKey(privSignKey)) throw badResponse(url, 'POST /v2/irma/sign/key returned an unusable privSignKey');
    return { pubSignKey, privSignKey };
  }
}
