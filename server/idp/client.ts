import { readLimitedText } from 'postguard-ts/pkg';
import { PkgError } from '../errors.js';
import type { ExtendedDisclosureRequest } from './request.js';
import { SESSION_TOKEN_PATTERN, checkSessionToken } from './token.js';

/**
 * The PKG's side of the Yivi requestor API: start a disclosure session, fetch its result JWT, relay
 * its status events, fetch the JWT public key. Every call has a deadline and every body read is
 * bounded, so a slow or hostile identity server costs a request a few seconds and a few KiB, never
 * the process. Failures become PkgErrors: IDP_UNAVAILABLE when the server cannot be reached (or is
 * too slow), IDP_ERROR when it answers outside the protocol, SESSION_UNKNOWN for Yivi's own
 * "unknown or expired session".
 */

export interface IdentityServerOptions {
  /** Base URL, e.g. https://is.yivi.app. A trailing slash is ignored; a path is kept. */
  url: string;
  /** Requestor token, sent as the raw `Authorization` value (no "Bearer"), as Yivi expects. */
  token?: string | undefined;
  /** Deadline per call in milliseconds (for status events: until the response headers). 5000. */
  timeoutMs?: number;
  /** Defaults to the global fetch. */
  fetch?: typeof fetch;
}

export type SessionType = 'disclosing' | 'signing' | 'issuing';

export interface SessionPackage {
  sessionPtr: { u: string; irmaqr: SessionType };
  token: string;
}

/** Upper bounds for what we read from the identity server. */
const MAX_SESSION_PACKAGE_BYTES = 64 * 1024;
const MAX_JWT_BYTES = 64 * 1024;
const MAX_PUBLIC_KEY_BYTES = 16 * 1024;
const MAX_ERROR_BYTES = 8 * 1024;

const STATUS_EVENTS_CALL = 'GET statusevents';
const JWS_COMPACT = /^[\w-]+\.[\w-]+\.[\w-]*$/;
const SESSION_TYPES: ReadonlySet<string> = new Set(['disclosing', 'signing', 'issuing']);

/** Reads at most `limit` bytes of a body; more is a protocol violation. */
async function readLimited(response: Response, limit: number, what: string): Promise<string> {
  const text = await readLimitedText(response, limit);
  if (text === undefined)
    throw new PkgError('IDP_ERROR', undefined, { cause: new Error(`${what} exceeds ${limit} bytes`) });
  return text;
}

/** Yivi's error type (e.g. SESSION_UNKNOWN) from a non-2xx answer, if its body has one. */
async function remoteErrorType(response: Response): Promise<string | undefined> {
  try {
    const body = JSON.parse(await readLimited(response, MAX_ERROR_BYTES, 'error body')) as { error?: unknown };
    return typeof body?.error === 'string' ? body.error : undefined;
  } catch {
    return undefined;
  }
}

async function upstreamFailure(response: Response, call: string): Promise<PkgError> {
  const type = await remoteErrorType(response);
  const cause = new Error(`${call}: identity server answered ${response.status}${type ? ` ${type}` : ''}`);
  if (type === 'SESSION_UNKNOWN') return new PkgError('SESSION_UNKNOWN', undefined, { cause });
  // irmago's requestor statusevents route answers an unknown (or forgotten) session with 501 UNSUPPORTED.
  if (type === 'UNSUPPORTED' && call === STATUS_EVENTS_CALL)
    return new PkgError('SESSION_UNKNOWN', undefined, { cause });
  if (type === 'SSE_DISABLED') {
    return new PkgError('IDP_ERROR', 'the identity server does not serve status events', { cause });
  }
  if (type === 'UNEXPECTED_REQUEST') {
    return new PkgError('IDP_ERROR', 'the session has already finished', { cause });
  }
  return new PkgError('IDP_ERROR', undefined, { cause });
}

function parseSessionPackage(text: string): SessionPackage {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new PkgError('IDP_ERROR', undefined, { cause: e });
  }
  const pkg = value as { sessionPtr?: { u?: unknown; irmaqr?: unknown }; token?: unknown } | null;
  const ptr = pkg?.sessionPtr;
  const ok =
    typeof ptr === 'object' &&
    ptr !== null &&
    typeof ptr.u === 'string' &&
    /^https?:\/\//.test(ptr.u) &&
    typeof ptr.irmaqr === 'string' &&
    SESSION_TYPES.has(ptr.irmaqr) &&
    typeof pkg?.token === 'string' &&
    SESSION_TOKEN_PATTERN.test(pkg.token);
  if (!ok) throw new PkgError('IDP_ERROR', undefined, { cause: new Error('malformed session package') });
  // Only these fields go back to the client (pg-pkg drops frontendRequest too).
  return { sessionPtr: { u: ptr.u as string, irmaqr: ptr.irmaqr as SessionType }, token: pkg!.token as string };
}

export class IdentityServerClient {
  readonly baseUrl: string;
  private readonly token: string | undefined;
  private readonly timeoutMs: number;
  private readonly fetch: typeof fetch;

  constructor(options: IdentityServerOptions) {
    this.baseUrl = options.url.replace(/(?<!\/)\/+$/, '');
    this.token = options.token;
    this.timeoutMs = options.timeoutMs ?? 5000;
    this.fetch = options.fetch ?? globalThis.fetch;
  }

  private async call(path: string, init: RequestInit, signal: AbortSignal): Promise<Response> {
    try {
      return await this.fetch(`${this.baseUrl}${path}`, { ...init, signal, redirect: 'error' });
    } catch (e) {
      throw new PkgError('IDP_UNAVAILABLE', undefined, { cause: e });
    }
  }

  /** Runs `body` under the call deadline; an abort while reading is "unavailable" as well. */
  private async withDeadline<T>(run: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const signal = AbortSignal.timeout(this.timeoutMs);
    try {
      return await run(signal);
    } catch (e) {
      if (e instanceof PkgError) throw e;
      throw new PkgError('IDP_UNAVAILABLE', undefined, { cause: e });
    }
  }

  /** POST /session with the extended disclosure request. */
  startSession(request: ExtendedDisclosureRequest): Promise<SessionPackage> {
    return this.withDeadline(async (signal) => {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (this.token !== undefined) headers.authorization = this.token;
      const response = await this.call('/session', { method: 'POST', headers, body: JSON.stringify(request) }, signal);
      if (!response.ok) throw await upstreamFailure(response, 'POST /session');
      return parseSessionPackage(await readLimited(response, MAX_SESSION_PACKAGE_BYTES, 'session package'));
    });
  }

  /** GET /session/{token}/result-jwt: the compact JWS, unchanged. */
  async resultJwt(token: string): Promise<string> {
    checkSessionToken(token);
    return this.withDeadline(async (signal) => {
      const response = await this.call(`/session/${token}/result-jwt`, { method: 'GET' }, signal);
      if (!response.ok) throw await upstreamFailure(response, 'GET result-jwt');
      const jwt = await readLimited(response, MAX_JWT_BYTES, 'result JWT');
      if (!JWS_COMPACT.test(jwt))
        throw new PkgError('IDP_ERROR', undefined, { cause: new Error('result is not a JWS') });
      return jwt;
    });
  }

  /** GET /publickey: the PEM the result JWTs verify under. */
  publicKeyPem(): Promise<string> {
    return this.withDeadline(async (signal) => {
      const response = await this.call('/publickey', { method: 'GET' }, signal);
      if (!response.ok) throw await upstreamFailure(response, 'GET /publickey');
      return readLimited(response, MAX_PUBLIC_KEY_BYTES, 'public key');
    });
  }

  /**
   * GET /session/{token}/statusevents. Resolves once the upstream headers are in, with its body as a
   * byte stream; `signal` (the client going away) ends the upstream request at any time.
   */
  async statusEvents(token: string, signal: AbortSignal): Promise<ReadableStream<Uint8Array>> {
    checkSessionToken(token);
    const controller = new AbortController();
    const onAbort = (): void => controller.abort(signal.reason);
    if (signal.aborted) onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    const deadline = setTimeout(() => controller.abort(new Error('no response headers in time')), this.timeoutMs);
    let response: Response;
    try {
      response = await this.call(
        `/session/${token}/statusevents`,
        { method: 'GET', headers: { accept: 'text/event-stream' } },
        controller.signal,
      );
    } catch (e) {
      signal.removeEventListener('abort', onAbort);
      throw e;
    } finally {
      clearTimeout(deadline);
    }
    const type = response.headers.get('content-type') ?? '';
    if (!response.ok || response.body === null || !type.startsWith('text/event-stream')) {
      signal.removeEventListener('abort', onAbort);
      const failure = response.ok
        ? new PkgError('IDP_ERROR', undefined, { cause: new Error(`statusevents answered ${type}`) })
        : await upstreamFailure(response, STATUS_EVENTS_CALL);
      controller.abort();
      throw failure;
    }
    return response.body;
  }
}
