import { createPublicKey, type KeyObject } from 'node:crypto';
import { compactVerify, decodeProtectedHeader, errors as joseErrors } from 'jose';
import type { Attribute } from 'postguard-ts';
import { PROOF_STATUSES, SESSION_STATUSES, type ProofStatus } from 'postguard-ts/pkg';
import { CLOCK_SKEW_SECONDS, type Clock } from '../clock.js';
import { PkgError } from '../errors.js';

/**
 * Checks of the session-result JWT that the key routes take as a credential (server/README.md, Routes), and
 * the identity it proves.
 *
 * - RS256 only, decided from the header before any key is touched: `none`, HS256 (e.g. keyed with
 *   the public key's PEM), RS512, PS256, ES256 ... are refused.
 * - The key is the identity server's /publickey, fetched on first use and cached. A signature that
 *   does not verify triggers one re-fetch (at most every 30 s), so a rotated Yivi key heals without a
 *   restart; a failed fetch is remembered for 3 s so an outage fails requests fast.
 * - Claims: exp (leeway 0; at or after exp the token is expired: CHRONOLOGY, as pg-pkg), iat, iss
 *   and sub present, token/status/type of the right kinds, proofStatus one of Yivi's values, no aud.
 *   Beyond pg-pkg (which reads neither): `iat` and, when present, `nbf` may lie at most
 *   `clockSkewSeconds` (60) in the future, since a token "issued" later than now was not made by an
 *   identity server with a sane clock; and with `issuer` configured, `iss` must equal it.
 * - Identity: only for status DONE, proofStatus VALID and type disclosing; then every PRESENT
 *   disclosed attribute. Any other outcome proves nothing (the disclosed list is not even parsed:
 *   with MISSING_ATTRIBUTES Yivi puts null where a disjunction was not satisfied). A type or value that
 *   is not valid Unicode (a lone surrogate) makes the token invalid.
 */

// Yivi's session and proof statuses are the library's lists (postguard-ts/pkg): the PKG, its client and the stand-in agree.
export { SESSION_STATUSES };
const SESSION_TYPES = ['disclosing', 'signing', 'issuing'] as const;
const ATTRIBUTE_STATUSES = ['PRESENT', 'EXTRA', 'NULL'] as const;

export type SessionStatus = (typeof SESSION_STATUSES)[number];

export interface ResultClaims {
  exp: number;
  nbf?: number;
  iat: number;
  iss: string;
  sub: string;
  token: string;
  status: SessionStatus;
  type: (typeof SESSION_TYPES)[number];
  proofStatus?: ProofStatus;
  disclosed?: unknown;
}

export interface VerifiedResult {
  claims: ResultClaims;
  /** The proven attributes; undefined unless the session is DONE with a VALID disclosure. */
  attributes: Attribute[] | undefined;
}

export interface JwtVerifierOptions {
  /** Fetches the identity server's public key (PEM). */
  fetchPublicKey: () => Promise<string>;
  clock: Clock;
  /** Least seconds between re-fetches caused by a signature that does not verify. 30. */
  refreshIntervalSeconds?: number;
  /** Seconds a failed fetch is remembered (requests fail fast meanwhile). 3. */
  failureBackoffSeconds?: number;
  /** The `iss` every token must carry (`--jwt-issuer`); undefined: any. */
  issuer?: string | undefined;
  /** How far `iat` and `nbf` may lie in the future, for clocks that disagree a little. CLOCK_SKEW_SECONDS (60). */
  clockSkewSeconds?: number;
}

const MAX_JWT_CHARS = 64 * 1024;
const MAX_DISCLOSED_ATTRIBUTES = 256;
const JWS_COMPACT = /^[\w-]+\.[\w-]+\.[\w-]*$/;

const invalid = (why: string): PkgError => new PkgError('JWT_INVALID', undefined, { cause: new Error(why) });

const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const oneOf = <T extends string>(values: readonly T[], v: unknown): v is T =>
  typeof v === 'string' && (values as readonly string[]).includes(v);

function parseClaims(payload: Uint8Array): ResultClaims {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(payload));
  } catch {
    throw invalid('payload is not JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalid('payload is not an object');
  const c = value as Record<string, unknown>;
  if (!isCount(c.exp)) throw invalid('exp missing or not an integer');
  if (!isCount(c.iat)) throw invalid('iat missing or not an integer');
  if (c.nbf !== undefined && !isCount(c.nbf)) throw invalid('nbf not an integer');
  if (typeof c.iss !== 'string' || c.iss === '') throw invalid('iss missing');
  if (typeof c.sub !== 'string' || c.sub === '') throw invalid('sub missing');
  if (c.aud !== undefined) throw invalid('aud present: the token is meant for someone else');
  if (typeof c.token !== 'string') throw invalid('token missing');
  if (!oneOf(SESSION_STATUSES, c.status)) throw invalid('status missing or unknown');
  if (!oneOf(SESSION_TYPES, c.type)) throw invalid('type missing or unknown');
  if (c.proofStatus !== undefined && c.proofStatus !== null && !oneOf(PROOF_STATUSES, c.proofStatus)) {
    throw invalid('proofStatus unknown');
  }
  const claims: ResultClaims = {
    ...(c.nbf === undefined ? {} : { nbf: c.nbf as number }),
    exp: c.exp,
    iat: c.iat,
    iss: c.iss,
    sub: c.sub,
    token: c.token,
    status: c.status,
    type: c.type,
    disclosed: c.disclosed,
  };
  if (typeof c.proofStatus === 'string') claims.proofStatus = c.proofStatus as ProofStatus;
  return claims;
}

/** Whether a string is well-formed UTF-16 (no lone surrogate), so it has a UTF-8 form. */
function wellFormed(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit < 0xd800 || unit > 0xdfff) continue;
    // A high surrogate must be followed by a low one; a low one on its own is lone.
    const next = text.charCodeAt(i + 1);
    if (unit > 0xdbff || !(next >= 0xdc00 && next <= 0xdfff)) return false;
    i++;
  }
  return true;
}

/** The PRESENT attributes of a VALID disclosure as `{t, v}`; undefined when the session proves nothing. */
export function provenAttributes(claims: ResultClaims): Attribute[] | undefined {
  if (claims.status !== 'DONE' || claims.proofStatus !== 'VALID' || claims.type !== 'disclosing') return undefined;
  if (claims.disclosed === undefined || claims.disclosed === null) return [];
  if (!Array.isArray(claims.disclosed)) throw invalid('disclosed is not an array');
  const attributes: Attribute[] = [];
  let seen = 0;
  for (const group of claims.disclosed as unknown[]) {
    // A VALID proof satisfied every disjunction, so no group may be null here.
    if (!Array.isArray(group)) throw invalid('disclosed group is not an array');
    for (const entry of group as unknown[]) {
      if (++seen > MAX_DISCLOSED_ATTRIBUTES) throw invalid('too many disclosed attributes');
      const a = entry as { id?: unknown; status?: unknown; rawvalue?: unknown } | null;
      if (typeof a !== 'object' || a === null) throw invalid('disclosed attribute is not an object');
      if (typeof a.id !== 'string' || a.id === '') throw invalid('disclosed attribute has no id');
      if (!oneOf(ATTRIBUTE_STATUSES, a.status)) throw invalid('disclosed attribute status unknown');
      if (a.rawvalue !== undefined && a.rawvalue !== null && typeof a.rawvalue !== 'string') {
        throw invalid('disclosed rawvalue is not a string');
      }
      if (a.status !== 'PRESENT') continue;
      // JSON can spell a lone surrogate ("\ud800"); it has no UTF-8 form, so no identity (and no key)
      // can be derived from it, and the library would refuse it later as a bug of ours (500).
      if (!wellFormed(a.id) || (typeof a.rawvalue === 'string' && !wellFormed(a.rawvalue)))
        throw invalid('disclosed attribute is not valid Unicode (lone surrogate)');
      attributes.push(typeof a.rawvalue === 'string' ? { t: a.id, v: a.rawvalue } : { t: a.id });
    }
  }
  return attributes;
}

function parsePublicKey(pem: string): KeyObject {
  let key: KeyObject;
  try {
    key = createPublicKey(pem);
  } catch (e) {
    throw new PkgError('IDP_ERROR', undefined, { cause: e });
  }
  const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
  if (key.asymmetricKeyType !== 'rsa' || bits < 2048) {
    throw new PkgError('IDP_ERROR', undefined, { cause: new Error('identity server key is not RSA >= 2048 bits') });
  }
  return key;
}

export class ResultJwtVerifier {
  private key: { value: KeyObject; fetchedAt: number } | undefined;
  private pending: Promise<KeyObject> | undefined;
  private failedAt: number | undefined;
  private readonly refreshInterval: number;
  private readonly backoff: number;

  constructor(private readonly options: JwtVerifierOptions) {
    this.refreshInterval = options.refreshIntervalSeconds ?? 30;
    this.backoff = options.failureBackoffSeconds ?? 3;
  }

  /** One fetch at a time; concurrent callers share it. */
  private fetchKey(): Promise<KeyObject> {
    this.pending ??= (async () => {
      try {
        const pem = await this.options.fetchPublicKey().catch((e: unknown) => {
          throw e instanceof PkgError ? e : new PkgError('IDP_UNAVAILABLE', undefined, { cause: e });
        });
        const value = parsePublicKey(pem);
        this.key = { value, fetchedAt: this.options.clock.now() };
        this.failedAt = undefined;
        return value;
      } catch (e) {
        this.failedAt = this.options.clock.now();
        // Whatever went wrong upstream, to the client the key is unavailable.
        const cause = e instanceof PkgError ? (e.cause ?? e) : e;
        throw new PkgError('IDP_UNAVAILABLE', undefined, { cause });
      } finally {
        this.pending = undefined;
      }
    })();
    return this.pending;
  }

  private currentKey(): Promise<KeyObject> {
    if (this.key !== undefined) return Promise.resolve(this.key.value);
    if (this.failedAt !== undefined && this.options.clock.now() - this.failedAt < this.backoff) {
      return Promise.reject(
        new PkgError('IDP_UNAVAILABLE', undefined, { cause: new Error('key fetch failed recently') }),
      );
    }
    return this.fetchKey();
  }

  /** A fresh key if the cached one is old enough to be worth re-checking; else undefined. */
  private async refreshedKey(stale: KeyObject): Promise<KeyObject | undefined> {
    const now = this.options.clock.now();
    if (this.key !== undefined && this.key.value !== stale) return this.key.value; // someone refreshed already
    if (this.key !== undefined && now - this.key.fetchedAt < this.refreshInterval) return undefined;
    if (this.failedAt !== undefined && now - this.failedAt < this.backoff) return undefined;
    try {
      const fresh = await this.fetchKey();
      return fresh.equals(stale) ? undefined : fresh;
    } catch {
      return undefined; // keep serving with the old key; this token just does not verify
    }
  }

  async verify(jwt: string): Promise<VerifiedResult> {
    if (typeof jwt !== 'string' || jwt.length > MAX_JWT_CHARS || !JWS_COMPACT.test(jwt)) {
      throw invalid('not a compact JWS');
    }
    let alg: unknown;
    try {
      alg = decodeProtectedHeader(jwt).alg;
    } catch {
      throw invalid('header is not JSON');
    }
    if (alg !== 'RS256') throw invalid(`algorithm ${String(alg)} is not RS256`);

    const key = await this.currentKey();
    let payload: Uint8Array;
    try {
      payload = (await compactVerify(jwt, key, { algorithms: ['RS256'] })).payload;
    } catch (e) {
      if (!(e instanceof joseErrors.JWSSignatureVerificationFailed))
        throw invalid(`JWS rejected: ${(e as Error).message}`);
      const fresh = await this.refreshedKey(key);
      if (fresh === undefined) throw invalid('signature does not verify');
      try {
        payload = (await compactVerify(jwt, fresh, { algorithms: ['RS256'] })).payload;
      } catch {
        throw invalid('signature does not verify');
      }
    }

    const claims = parseClaims(payload);
    const now = this.options.clock.now();
    if (now >= claims.exp) throw new PkgError('CHRONOLOGY', undefined, { cause: new Error('JWT expired') });
    const latest = now + (this.options.clockSkewSeconds ?? CLOCK_SKEW_SECONDS);
    if (claims.iat > latest) throw invalid('iat lies in the future');
    if (claims.nbf !== undefined && claims.nbf > latest) throw invalid('not valid yet (nbf)');
    if (this.options.issuer !== undefined && claims.iss !== this.options.issuer)
      throw invalid('iss is not the configured issuer');
    return { claims, attributes: provenAttributes(claims) };
  }
}
