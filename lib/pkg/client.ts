import type { KeyCandidate } from '../key-candidates.js';
import type { Policy } from '../policy.js';
import type { UserKeys, VerifyingKeys } from '../unseal.js';
import { PkgCache, type CachedParameters, type ParameterKind } from './cache.js';
import { PkgClientError, PkgClientErrorCode, aborted, badResponse, invalidArgument, throwIfAborted } from './errors.js';
import { expectOk, readJson, withDeadline, type HttpContext } from './http.js';
import { readSessionClaims } from './jwt.js';
import {
  keyRequestCon,
  keyTimestamp,
  validityUntil4am,
  MAX_VALIDITY,
  type ConItem,
  type KeyRequestOptions,
} from './keyrequest.js';
import { isSessionPointer } from './links.js';
import {
  createPasskey,
  passkeyBox,
  type CreatePasskeyOptions,
  type PasskeyOptions,
  type PasskeyRegistration,
} from './passkey.js';
import type { SecretTier } from './secret-box.js';
import { IdentitySession, type EventSourceConstructor, type SessionOptions } from './session.js';
import { defaultStore, type KeyValueStore } from './store.js';

/** What `new PkgClient(options)` takes: the PKG's URL, and how to cache, time out and follow sessions. */
export interface PkgClientOptions {
  /** The PKG's base URL, e.g. https://pkg.example (a trailing slash is ignored). */
  url: string;
  /** The fetch to use; default globalThis.fetch (tests and proxies bring their own). */
  fetch?: typeof fetch;
  /** Extra headers on every PKG request, e.g. X-POSTGUARD-CLIENT-VERSION. Non-safelisted headers cost a CORS preflight. */
  headers?: Record<string, string>;
  /** Where to cache; default IndexedDB (database "postguard", store "pkg-cache"), or memory where there is none. */
  store?: KeyValueStore | Promise<KeyValueStore>;
  /** Cache session JWTs and user secret keys until they expire (opt-in; per call too). Default false. */
  cacheKeys?: boolean;
  /**
   * What seals the cached JWTs and keys: `'device'` (default), a non-extractable key of this
   * browser's; or `'passkey'`, a key from a passkey's PRF output, asked once per page session with
   * user verification (register one with `registerPasskey()`). docs/security.md says what each
   * protects against. `useKeyProtection()` changes it later.
   */
  keyProtection?: SecretTier;
  /**
   * The passkey tier's relying party id and prompt timeout, and which passkey: default the one
   * `registerPasskey()` kept in the store; a `credentialId` here (an app that keeps it itself) wins.
   */
  passkey?: PasskeyOptions & { credentialId?: string };
  /** Deadline per PKG request. 15 s. */
  timeoutMs?: number;
  /** Path segment of the identity routes: 'irma' (pg-pkg's name, default), 'request' or 'idp'. */
  prefix?: 'irma' | 'request' | 'idp';
  /** EventSource for status events; default globalThis.EventSource, else a fetch-based reader; null polls only. */
  EventSource?: EventSourceConstructor | null;
  /** Interval between status polls when events are unavailable. 1000 ms. */
  pollIntervalMs?: number;
  /** How long the status event stream may take to open before polling takes over. 3000 ms. */
  eventsConnectTimeoutMs?: number;
  /** Consecutive failed polls before a session gives up with PKG_UNAVAILABLE. 5. */
  maxPollFailures?: number;
  /** How long a public key is used without asking the PKG again. 5 minutes. */
  parametersMaxAgeMs?: number;
  /** Clock in ms (tests). */
  now?: () => number;
}

/** What an identity session asks the Yivi app to disclose (`startSession`). */
export interface StartRequest {
  /** The attributes to disclose: each item one attribute, or a list of alternatives. */
  con: ConItem[];
  /** Seconds the session-result JWT stays valid (PKG default 300, at most 86400). */
  validity?: number;
}

/** A signing key as the PKG issues it, ready to pass to `seal` as `pubSignKey` or `privSignKey`. */
export interface IssuedSigningKey {
  /** The signing key, 128 characters of padded base64. */
  key: string;
  /** The identity it signs as (what the sender disclosed, at the issuing time). */
  policy: Policy;
}

/** The keys a sender signs with: `signingKeys` and `signingKeysWithSession` return them. */
export interface SigningKeys {
  /** Signs the header: its identity is readable by anyone who has the file. */
  pubSignKey: IssuedSigningKey;
  /** Signs the content, when private attributes were asked for: only recipients see its identity. */
  privSignKey?: IssuedSigningKey;
}

/** Which of the disclosed attribute types go into the sender's public and private signing identities. */
export interface SigningIdentityRequest {
  /** Disclosed attribute types that go into the public signing identity (visible to anyone). */
  pubSignId: Array<{ t: string }>;
  /** Disclosed attribute types that go into the private one (visible to recipients only). */
  privSignId?: Array<{ t: string }>;
}

/** What `decryptionKey` needs to get one recipient's key for a file, and how to show the QR. */
export interface DecryptionKeyOptions extends KeyRequestOptions {
  /** The recipient id as the header lists it (an e-mail address by convention). */
  recipientId: string;
  /** The recipient's hidden policy: `unsealer.inspect_header().get(recipientId)`. */
  policy: Policy;
  /** Called when a QR scan is needed: show `session.qrText` as a QR, offer `session.sameDeviceLink`. */
  onSession?: (session: IdentitySession) => void;
  /** Aborts the request and any session it started (`ABORTED`). */
  signal?: AbortSignal;
  /** Use and fill the JWT / key cache; default the client's `cacheKeys`. */
  cache?: boolean;
  /** Skip cached entries (e.g. after the cached key did not open the file). */
  fresh?: boolean;
  /** Only the cache: when it has no live key or JWT, fail with `NOT_CACHED` instead of starting a session. */
  cacheOnly?: boolean;
  /** JWT validity in seconds; default until the next 04:00 local time. */
  validity?: number;
}

/** What `decryptionKey` resolves with: the key, and whether getting it took a scan. */
export interface DecryptionKey {
  /** The user secret key (base64) under the PKG's primary master key, for Unsealer.unseal / StreamUnsealer.unseal. */
  usk: string;
  /**
   * From a PKG with a key set: one user key per master key that still opens files of this time,
   * `{ id, key }`; give these to `unseal` instead of `usk` to open a file sealed under any of them.
   */
  usks?: KeyCandidate[];
  /** Where it came from: the cache, a cached JWT (no scan), or a new session (a scan). */
  source: 'cache' | 'cached-jwt' | 'session';
}

/** What `signingKeysWithSession` needs: what the sender discloses, and which of it they sign as. */
export interface SigningSessionOptions extends SigningIdentityRequest {
  /** What the sender discloses, e.g. [{t: 'pbdf.sidn-pbdf.email.email', v: 'alice@example.org'}]. */
  con: ConItem[];
  /** Seconds the session-result JWT stays valid (PKG default 300, at most 86400). */
  validity?: number;
  /** Called when a QR scan is needed: show `session.qrText` as a QR, offer `session.sameDeviceLink`. */
  onSession?: (session: IdentitySession) => void;
  /** Aborts the request and any session it started (`ABORTED`). */
  signal?: AbortSignal;
}

interface ParametersAnswer {
  status: number;
  headers: Headers;
  body?: unknown;
}

const BASE64 = /^[A-Z0-9+/]*={0,2}$/i;
const MPK_CHARS = 896;
const VK_CHARS = 44;
const USK_CHARS = 768;
const SIGNING_KEY_CHARS = 128;

const isBase64Of = (value: unknown, chars: number): value is string =>
  typeof value === 'string' && value.length === chars && BASE64.test(value);

const KEY_ID = /^[0-9a-f]{16}$/;
const STATUSES: ReadonlyArray<KeyCandidate['status']> = ['primary', 'decrypt-only', 'retired'];
const STATUS_ORDER = (c: KeyCandidate) => STATUSES.indexOf(c.status);

/**
 * A key set as the PKG publishes it (`keys` beside `publicKey`, or `keys` beside a user key): absent
 * stays absent (a PKG without a key set); anything but a list of well-formed entries is refused.
 * Primary first, then decrypt-only, then retired: most files are under the primary.
 */
function keySetOf(value: unknown, chars: number, published: boolean): KeyCandidate[] | undefined | false {
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || value.length === 0 || value.length > 64) return false;
  const keys: KeyCandidate[] = [];
  for (const entry of value as unknown[]) {
    const o = (typeof entry === 'object' && entry !== null ? entry : {}) as Record<string, unknown>;
    const key = published ? o['publicKey'] : o['key'];
    if (typeof o['id'] !== 'string' || !KEY_ID.test(o['id']) || !isBase64Of(key, chars)) return false;
    if (!published) {
      keys.push({ id: o['id'], key });
      continue;
    }
    const status = o['status'] as KeyCandidate['status'];
    if (!STATUSES.includes(status)) return false;
    keys.push({ id: o['id'], key, status });
  }
  return published ? keys.sort((a, b) => STATUS_ORDER(a) - STATUS_ORDER(b)) : keys;
}

function isPolicy(value: unknown): value is Policy {
  if (typeof value !== 'object' || value === null) return false;
  const { ts, con } = value as { ts?: unknown; con?: unknown };
  return (
    typeof ts === 'number' &&
    Number.isSafeInteger(ts) &&
    ts >= 0 &&
    Array.isArray(con) &&
    con.every((a: unknown) => {
      if (typeof a !== 'object' || a === null) return false;
      const { t, v } = a as { t?: unknown; v?: unknown };
      return typeof t === 'string' && (v === undefined || v === null || typeof v === 'string');
    })
  );
}

/** A policy as the sealer wants it: `v` absent rather than null. */
const cleanPolicy = (policy: Policy): Policy => ({
  ts: policy.ts,
  con: policy.con.map(({ t, v }) => (v === undefined || v === null ? { t } : { t, v })),
});

/** Resolves with `promise` unless `signal` fires first (the shared work goes on for others). */
function raceSignal<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  if (signal.aborted) return Promise.reject(aborted(signal.reason));
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(aborted(signal.reason));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

function checkStartRequest(request: StartRequest): void {
  if (typeof request !== 'object' || request === null || !Array.isArray(request.con) || request.con.length === 0) {
    throw invalidArgument('a session request needs a non-empty con');
  }
  const { validity } = request;
  if (validity !== undefined && (!Number.isSafeInteger(validity) || validity < 0 || validity > MAX_VALIDITY)) {
    throw invalidArgument(`validity must be an integer from 0 to ${MAX_VALIDITY} seconds`);
  }
}

const decryptionKeys = ({ key, keys }: { key: string; keys?: KeyCandidate[] }): Pick<DecryptionKey, 'usk' | 'usks'> =>
  keys === undefined ? { usk: key } : { usk: key, usks: keys };

// A cached user key is the key itself (base64, never starting with "{"), or with a key set the JSON of both.
const userKeysToCache = (keys: { key: string; keys?: KeyCandidate[] }): string =>
  keys.keys === undefined ? keys.key : JSON.stringify(keys);

function cachedUserKeys(value: string): Pick<DecryptionKey, 'usk' | 'usks'> {
  if (!value.startsWith('{')) return { usk: value };
  const parsed = JSON.parse(value) as { key: string; keys: KeyCandidate[] };
  return { usk: parsed.key, usks: parsed.keys };
}

/** Hands a new session to the caller's UI; if that throws, the session is cancelled rather than left running. */
async function showSession(
  session: IdentitySession,
  onSession: ((session: IdentitySession) => void) | undefined,
): Promise<void> {
  try {
    onSession?.(session);
  } catch (error) {
    await session.cancel();
    throw error;
  }
}

/**
 * A client of one PKG (Private Key Generator), as a web application needs it: the public keys to
 * seal and to verify, identity sessions with the Yivi app, and the keys those sessions earn. Make
 * one per PKG and keep it: it caches public keys and, with `cacheKeys`, session JWTs and user
 * secret keys. Failures are `PkgClientError`s with a stable `code`. Its calls and routes (the
 * PKG's API is described in server/README.md):
 *
 * ```text
 *   masterPublicKey(), verificationKey()   GET /v2/parameters, /v2/sign/parameters; cached in the store
 *                                          and revalidated with the ETag (If-None-Match → 304)
 *   verificationKeys()                     the PKG's whole IBS key set, as unsealers take it
 *   startSession({con, validity?})         POST /v2/irma/start → an IdentitySession (QR, status, JWT)
 *   userSecretKey(jwt, ts)                 GET /v2/irma/key/{ts} with the session JWT
 *   userSecretKeys(jwt, ts)                the same request: a user key per key of the PKG's key set
 *   signingKeys({jwt} | {apiKey}, ids)     POST /v2/irma/sign/key
 *   decryptionKey({recipientId, policy})   the whole decryption flow, with the opt-in JWT/USK cache
 *   signingKeysWithSession({...})          the whole sender flow
 *   forgetKeys()                           drops cached JWTs and USKs
 *   registerPasskey(), useKeyProtection()  the passkey tier of the cache (passkey.ts)
 * ```
 *
 * Nothing here needs the DOM: it runs in pages and in workers.
 */
export class PkgClient {
  /** The PKG's base URL, without a trailing slash. */
  readonly url: string;
  private readonly http: HttpContext;
  private readonly base: string;
  private readonly cache: PkgCache;
  private readonly cacheKeys: boolean;
  private readonly passkeyOptions: PasskeyOptions & { credentialId?: string };
  private readonly now: () => number;
  private readonly parametersMaxAgeMs: number;
  private readonly sessionDefaults: Pick<
    PkgClientOptions,
    'EventSource' | 'pollIntervalMs' | 'eventsConnectTimeoutMs' | 'maxPollFailures'
  >;
  private readonly parameters: Partial<Record<ParameterKind, CachedParameters>> = {};
  private readonly revalidating: Partial<Record<ParameterKind, Promise<CachedParameters>>> = {};

  constructor(options: PkgClientOptions) {
    if (typeof options?.url !== 'string') throw invalidArgument('PkgClient needs the PKG url');
    let parsed: URL;
    try {
      parsed = new URL(options.url);
    } catch {
      throw invalidArgument(`not a URL: ${options.url}`);
    }
    if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:')
      throw invalidArgument('the PKG url must be http(s)');
    this.url = options.url.replace(/(?<!\/)\/+$/, '');
    const f = options.fetch ?? globalThis.fetch;
    this.http = {
      // Called unbound, fetch throws "Illegal invocation" in browsers.
      fetch: (input, init) => f.call(globalThis, input, init),
      timeoutMs: options.timeoutMs ?? 15_000,
      headers: { ...options.headers },
    };
    this.base = `${this.url}/v2/${options.prefix ?? 'irma'}`;
    this.now = options.now ?? Date.now;
    this.passkeyOptions = { ...options.passkey };
    const { credentialId, ...prompt } = this.passkeyOptions;
    this.cache = new PkgCache(Promise.resolve(options.store ?? defaultStore()), this.url, this.now, {
      passkey: passkeyBox(
        async () => (credentialId !== undefined ? { credentialId } : this.passkey()),
        this.url,
        prompt,
      ),
    });
    this.cache.useTier(options.keyProtection ?? 'device');
    this.cacheKeys = options.cacheKeys ?? false;
    this.parametersMaxAgeMs = options.parametersMaxAgeMs ?? 5 * 60_000;
    this.sessionDefaults = {
      EventSource: options.EventSource,
      pollIntervalMs: options.pollIntervalMs,
      eventsConnectTimeoutMs: options.eventsConnectTimeoutMs,
      maxPollFailures: options.maxPollFailures,
    };
  }

  /** The master public key (base64), for seal / sealStream. */
  masterPublicKey(options: { signal?: AbortSignal } = {}): Promise<string> {
    return this.publicKey('mpk', options.signal);
  }

  /** The verification key (base64) of the PKG's primary, for Unsealer.new / StreamUnsealer.new. */
  verificationKey(options: { signal?: AbortSignal } = {}): Promise<string> {
    return this.publicKey('vk', options.signal);
  }

  /**
   * Every verifying key of the PKG's key set, `[{ id, key, status }]` (primary first), for
   * Unsealer.new / StreamUnsealer.new / inspectCiphertext: a file signed under any current key
   * verifies, one under a retired key is refused as such (NO_MATCHING_KEY). From a PKG without a
   * key set: its one verifying key, as `verificationKey` gives it.
   */
  async verificationKeys(options: { signal?: AbortSignal } = {}): Promise<VerifyingKeys> {
    const entry = await this.publishedKeys('vk', options.signal);
    return entry.keys ?? entry.publicKey;
  }

  private async publicKey(kind: ParameterKind, signal: AbortSignal | undefined): Promise<string> {
    return (await this.publishedKeys(kind, signal)).publicKey;
  }

  private publishedKeys(kind: ParameterKind, signal: AbortSignal | undefined): Promise<CachedParameters> {
    const known = this.parameters[kind];
    if (known !== undefined && this.now() - known.checkedAt < this.parametersMaxAgeMs) return Promise.resolve(known);
    // One request per key at a time; a caller's abort leaves it running for the others.
    const pending = (this.revalidating[kind] ??= this.revalidate(kind).finally(() => {
      delete this.revalidating[kind];
    }));
    return raceSignal(pending, signal);
  }

  private async revalidate(kind: ParameterKind): Promise<CachedParameters> {
    const cached = this.parameters[kind] ?? (await this.cache.parameters(kind));
    const url = `${this.url}/v2/${kind === 'mpk' ? 'parameters' : 'sign/parameters'}`;
    const conditional: Record<string, string> = {};
    if (cached?.etag !== undefined) conditional['if-none-match'] = cached.etag;
    else if (cached?.lastModified !== undefined) conditional['if-modified-since'] = cached.lastModified;

    let response: ParametersAnswer;
    try {
      response = await this.getParameters(url, conditional);
    } catch (error) {
      if (!(error instanceof PkgClientError) || error.code !== PkgClientErrorCode.PKG_UNAVAILABLE) throw error;
      let retried: ParametersAnswer | undefined;
      if (Object.keys(conditional).length > 0 && error.status === undefined) {
        // A PKG whose CORS policy does not allow If-None-Match fails the preflight, which looks
        // like a network error: ask once more without validators.
        retried = await this.getParameters(url, {}).catch(() => undefined);
      }
      if (retried === undefined) {
        // The PKG is down: a key it published before is still the key.
        if (cached !== undefined) return cached;
        throw error;
      }
      response = retried;
    }

    let entry: CachedParameters;
    if (response.status === 304) {
      if (cached === undefined) throw badResponse(url, 'the PKG answered 304 to an unconditional request', 304);
      entry = { ...cached, checkedAt: this.now() };
    } else {
      const { body } = response;
      const { publicKey, formatVersion, keys } = (typeof body === 'object' && body !== null ? body : {}) as Record<
        string,
        unknown
      >;
      const chars = kind === 'mpk' ? MPK_CHARS : VK_CHARS;
      const keySet = keySetOf(keys, chars, true);
      if (!isBase64Of(publicKey, chars) || (formatVersion !== undefined && formatVersion !== 0) || keySet === false) {
        throw badResponse(
          url,
          `the PKG's ${kind === 'mpk' ? 'master public key' : 'verification key'} is not in the expected format`,
        );
      }
      entry = { publicKey, checkedAt: this.now() };
      if (keySet !== undefined) entry.keys = keySet;
      // Cross-origin, ETag and Last-Modified are only readable if the PKG exposes them; without
      // them the browser's HTTP cache does the revalidating (the PKG sends Cache-Control: no-cache).
      const etag = response.headers.get('etag');
      const lastModified = response.headers.get('last-modified');
      if (etag !== null) entry.etag = etag;
      if (lastModified !== null) entry.lastModified = lastModified;
    }
    this.parameters[kind] = entry;
    await this.cache.putParameters(kind, entry);
    return entry;
  }

  /** One GET of a parameters route, body read (bounded) inside the deadline. */
  private getParameters(url: string, conditional: Record<string, string>): Promise<ParametersAnswer> {
    return withDeadline(this.http, url, undefined, async (signal) => {
      const response = await this.http.fetch(url, {
        headers: { ...this.http.headers, accept: 'application/json', ...conditional },
        signal,
      });
      await expectOk(response, url, [304]);
      if (response.status === 304) {
        await response.body?.cancel();
        return { status: 304, headers: response.headers };
      }
      return { status: response.status, headers: response.headers, body: await readJson(response, url) };
    });
  }

  /** POST start: begins an identity session; follow it with the returned object. */
  async startSession(request: StartRequest, options: SessionOptions = {}): Promise<IdentitySession> {
    checkStartRequest(request);
    throwIfAborted(options.signal);
    const url = `${this.base}/start`;
    const body = JSON.stringify(
      request.validity === undefined ? { con: request.con } : { con: request.con, validity: request.validity },
    );
    const answer = await withDeadline(this.http, url, options.signal, async (signal) => {
      const response = await this.http.fetch(url, {
        method: 'POST',
        headers: { ...this.http.headers, 'content-type': 'application/json', accept: 'application/json' },
        body,
        signal,
      });
      return readJson(await expectOk(response, url), url);
    });
    const { sessionPtr, token } = (typeof answer === 'object' && answer !== null ? answer : {}) as Record<
      string,
      unknown
    >;
    if (!isSessionPointer(sessionPtr) || typeof token !== 'string' || !/^[\w-]{1,128}$/.test(token)) {
      throw badResponse(url, 'the session package lacks a valid sessionPtr or token');
    }
    return new IdentitySession(
      {
        http: this.http,
        base: this.base,
        EventSource:
          this.sessionDefaults.EventSource === null
            ? null
            : (this.sessionDefaults.EventSource ??
              (globalThis as { EventSource?: EventSourceConstructor }).EventSource),
        pollIntervalMs: this.sessionDefaults.pollIntervalMs ?? 1000,
        eventsConnectTimeoutMs: this.sessionDefaults.eventsConnectTimeoutMs ?? 3000,
        maxPollFailures: this.sessionDefaults.maxPollFailures ?? 5,
      },
      { u: sessionPtr.u, irmaqr: sessionPtr.irmaqr },
      token,
      options,
    );
  }

  /** GET key/{ts}: the user secret key for what the session JWT proved, at the policy's timestamp (the primary's). */
  async userSecretKey(jwt: string, timestamp: number, options: { signal?: AbortSignal } = {}): Promise<string> {
    return (await this.userKeys(jwt, timestamp, options)).key;
  }

  /**
   * GET key/{ts}, all of it: from a PKG with a key set, one user key per master key that still opens
   * files sealed at `timestamp`, `[{ id, key }]`, for `unseal` to try in turn; otherwise the one key.
   * One request, so one identity session, whatever the number of keys.
   */
  async userSecretKeys(jwt: string, timestamp: number, options: { signal?: AbortSignal } = {}): Promise<UserKeys> {
    const { key, keys } = await this.userKeys(jwt, timestamp, options);
    return keys ?? key;
  }

  private async userKeys(
    jwt: string,
    timestamp: number,
    options: { signal?: AbortSignal },
  ): Promise<{ key: string; keys?: KeyCandidate[] }> {
    if (typeof jwt !== 'string' || jwt.length === 0) throw invalidArgument('a session JWT is needed');
    if (!Number.isSafeInteger(timestamp) || timestamp < 0)
      throw invalidArgument('the timestamp must be a non-negative integer');
    const url = `${this.base}/key/${timestamp}`;
    const body = await withDeadline(this.http, url, options.signal, async (signal) => {
      const response = await this.http.fetch(url, {
        headers: { ...this.http.headers, accept: 'application/json', authorization: `Bearer ${jwt}` },
        signal,
      });
      return readJson(await expectOk(response, url), url);
    });
    const { status, proofStatus, key, keys } = (typeof body === 'object' && body !== null ? body : {}) as Record<
      string,
      unknown
    >;
    if (status !== 'DONE' || proofStatus !== 'VALID') {
      throw new PkgClientError(
        PkgClientErrorCode.NOT_VALID,
        `the PKG issues no key for this session (status ${String(status)}, proof ${String(proofStatus)})`,
        { url },
      );
    }
    const keySet = keySetOf(keys, USK_CHARS, false);
    if (!isBase64Of(key, USK_CHARS) || keySet === false)
      throw badResponse(url, 'the user secret key is not in the expected format');
    return keySet === undefined ? { key } : { key, keys: keySet };
  }

  /** POST sign/key: signing keys for a session JWT or an API key (`PG-…`). */
  async signingKeys(
    credential: { jwt: string } | { apiKey: string },
    request: SigningIdentityRequest = { pubSignId: [] },
    options: { signal?: AbortSignal } = {},
  ): Promise<SigningKeys> {
    const bearer = 'jwt' in credential ? credential.jwt : credential.apiKey;
    if (typeof bearer !== 'string' || bearer.length === 0 || /[\r\n]/.test(bearer))
      throw invalidArgument('a JWT or API key is needed');
    if (!Array.isArray(request?.pubSignId)) throw invalidArgument('pubSignId must be an array of {t}');
    const url = `${this.base}/sign/key`;
    const payload = JSON.stringify(
      request.privSignId === undefined
        ? { pubSignId: request.pubSignId }
        : { pubSignId: request.pubSignId, privSignId: request.privSignId },
    );
    const body = await withDeadline(this.http, url, options.signal, async (signal) => {
      const response = await this.http.fetch(url, {
        method: 'POST',
        headers: {
          ...this.http.headers,
          'content-type': 'application/json',
          accept: 'application/json',
          authorization: `Bearer ${bearer}`,
        },
        body: payload,
        signal,
      });
      return readJson(await expectOk(response, url), url);
    });
    const { status, proofStatus, pubSignKey, privSignKey } = (
      typeof body === 'object' && body !== null ? body : {}
    ) as Record<string, unknown>;
    if (status !== 'DONE' || proofStatus !== 'VALID') {
      throw new PkgClientError(
        PkgClientErrorCode.NOT_VALID,
        `the PKG issues no signing key for this session (status ${String(status)}, proof ${String(proofStatus)})`,
        { url },
      );
    }
    const issued = (value: unknown): IssuedSigningKey => {
      const { key, policy } = (typeof value === 'object' && value !== null ? value : {}) as Record<string, unknown>;
      if (!isBase64Of(key, SIGNING_KEY_CHARS) || !isPolicy(policy))
        throw badResponse(url, 'a signing key is not in the expected format');
      return { key, policy: cleanPolicy(policy) };
    };
    const keys: SigningKeys = { pubSignKey: issued(pubSignKey) };
    if (privSignKey !== undefined && privSignKey !== null) keys.privSignKey = issued(privSignKey);
    return keys;
  }

  /**
   * The user secret key to open a ciphertext for `recipientId`. With caching on, a key fetched
   * before is reused, then a JWT from an earlier scan (no new scan while it is valid: by default
   * until 04:00); otherwise a session runs and `onSession` gets it to show the QR.
   */
  async decryptionKey(options: DecryptionKeyOptions): Promise<DecryptionKey> {
    const { recipientId, policy, signal } = options;
    const con = keyRequestCon(recipientId, policy, options);
    const ts = keyTimestamp(policy);
    const useCache = options.cache ?? this.cacheKeys;
    const jwtId = `${recipientId}\n${JSON.stringify(con)}`;
    const uskId = `${recipientId}\n${ts}\n${JSON.stringify(con)}`;
    throwIfAborted(signal);

    if (options.cacheOnly === true && !useCache)
      throw new PkgClientError(PkgClientErrorCode.NOT_CACHED, 'cacheOnly without the cache');
    // Expired entries go first, every one of them, not only those this request reads.
    if (useCache) await this.cache.sweep();
    if (useCache && options.fresh !== true) {
      // Raced with the signal: the passkey tier may be waiting on the user's prompt here.
      const cached = await raceSignal(this.cache.secret('usk', uskId), signal);
      if (cached !== undefined) return { ...cachedUserKeys(cached), source: 'cache' };
      const jwt = await raceSignal(this.cache.secret('jwt', jwtId), signal);
      if (jwt !== undefined) {
        try {
          const keys = await this.userKeys(jwt, ts, { signal });
          await this.cache.putSecret('usk', uskId, userKeysToCache(keys), readSessionClaims(jwt)?.exp);
          return { ...decryptionKeys(keys), source: 'cached-jwt' };
        } catch (error) {
          // Aborts and an unreachable PKG are not the JWT's fault; anything else means it is no
          // good for this key (expired, refused, ts after its exp): forget it and scan again.
          if (
            error instanceof PkgClientError &&
            (error.code === PkgClientErrorCode.ABORTED ||
              error.code === PkgClientErrorCode.PKG_UNAVAILABLE ||
              error.code === PkgClientErrorCode.RATE_LIMITED)
          ) {
            throw error;
          }
          await this.cache.forgetSecret('jwt', jwtId);
        }
      }
    }
    if (options.cacheOnly === true)
      throw new PkgClientError(PkgClientErrorCode.NOT_CACHED, 'no live key or session for this recipient in the cache');
    // The passkey's one prompt comes before the scan, so a passkey that gives no key stops here,
    // before the user scans for a key that could not be kept.
    if (useCache && this.cache.tier === 'passkey') await raceSignal(this.cache.unlock(), signal);

    const session = await this.startSession(
      { con, validity: options.validity ?? validityUntil4am(new Date(this.now())) },
      { signal },
    );
    await showSession(session, options.onSession);
    const jwt = await session.result();
    const keys = await this.userKeys(jwt, ts, { signal });
    if (useCache) {
      const exp = readSessionClaims(jwt)?.exp;
      await this.cache.putSecret('jwt', jwtId, jwt, exp);
      await this.cache.putSecret('usk', uskId, userKeysToCache(keys), exp);
    }
    return { ...decryptionKeys(keys), source: 'session' };
  }

  /** The sender's flow: disclose `con` in a session, then get signing keys for the disclosed types. */
  async signingKeysWithSession(options: SigningSessionOptions): Promise<SigningKeys> {
    const request: StartRequest =
      options.validity === undefined ? { con: options.con } : { con: options.con, validity: options.validity };
    const session = await this.startSession(request, { signal: options.signal });
    await showSession(session, options.onSession);
    const jwt = await session.result();
    const ids: SigningIdentityRequest =
      options.privSignId === undefined
        ? { pubSignId: options.pubSignId }
        : { pubSignId: options.pubSignId, privSignId: options.privSignId };
    return this.signingKeys({ jwt }, ids, { signal: options.signal });
  }

  /**
   * Forgets every cached session JWT and user secret key of this PKG and the wrapping keys they
   * were sealed under (the public keys and a registered passkey's id stay).
   */
  forgetKeys(): Promise<void> {
    return this.cache.forgetSecrets();
  }

  /** Which tier seals the cached JWTs and keys now: `'device'` or `'passkey'`. */
  get keyProtection(): SecretTier {
    return this.cache.tier;
  }

  /**
   * Seals the cache under `tier` from now on. A change forgets what is cached (it was sealed
   * under the other tier's key, which is never used to open anything for this one).
   */
  async useKeyProtection(tier: SecretTier): Promise<void> {
    if (tier !== 'device' && tier !== 'passkey') throw invalidArgument("keyProtection is 'device' or 'passkey'");
    if (tier === this.cache.tier) return;
    await this.cache.forgetSecrets();
    this.cache.useTier(tier);
  }

  /**
   * Makes a passkey for the passkey tier (the browser's prompt; user verification and the PRF
   * extension required) and keeps its id in the store for later page sessions. `PRF_UNAVAILABLE`
   * where the authenticator cannot evaluate PRF. Keys cached under an earlier passkey are forgotten.
   */
  async registerPasskey(options: CreatePasskeyOptions = {}): Promise<PasskeyRegistration> {
    const { credentialId: _, ...prompt } = this.passkeyOptions;
    const registration = await createPasskey({ ...prompt, ...options });
    if (this.cache.tier === 'passkey') await this.cache.forgetSecrets();
    await this.cache.write(this.cache.key('passkey'), registration);
    return registration;
  }

  /** The passkey the passkey tier uses: the one given in the options, else the one registered here. */
  async passkey(): Promise<PasskeyRegistration | undefined> {
    if (this.passkeyOptions.credentialId !== undefined) return { credentialId: this.passkeyOptions.credentialId };
    const kept = await this.cache.read<PasskeyRegistration>(this.cache.key('passkey'));
    return typeof kept?.credentialId === 'string' ? { credentialId: kept.credentialId } : undefined;
  }
}
