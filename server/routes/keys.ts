import type { FastifyInstance, FastifyRequest } from 'fastify';
import { extractSigningKey, extractUsk } from 'postguard-ts/keys';
import { canonicalize, type Attribute, type Policy } from 'postguard-ts';
import type { ProofStatus } from 'postguard-ts/pkg';
import { bearerCredential } from '../auth.js';
import { CLOCK_SKEW_SECONDS, type Clock } from '../clock.js';
import { DatabaseUnavailableError, type ApiKeyRecord, type ApiKeyResolution, type ApiKeyStore } from '../db.js';
import { PkgError } from '../errors.js';
import type { ResultJwtVerifier, SessionStatus, VerifiedResult } from '../idp/jwt.js';
import { refuseDemoTypes } from '../idp/schemes.js';
import type { PkgMetrics } from '../metrics.js';
import { LIMITS, attributeSchema, policySchema, proofStatusSchema, sessionStatusSchema } from '../schemas.js';
import { SENSITIVE, type BucketStore } from '../ratelimit/index.js';
import { spendBudget } from '../budgets.js';
import { issuesFor, type MasterKey } from '../keyset.js';

/**
 * Key issuance, under a Bearer credential:
 *   GET  key/{timestamp}, GET key   session JWT → the user secret key for what the session proved
 *   POST sign/key                   session JWT, or API key PG-… → signing keys
 *
 * Authentication runs in onRequest, after CORS and the rate limiter and before the body is parsed,
 * so an unauthenticated client costs no parsing and gets 401 whatever its body.
 */

export interface KeyRoutesOptions {
  /** CGWKV master secret key (base64): the primary's. */
  msk: string;
  /** The IBE key set: a user key response carries one key per key that issues for its timestamp. */
  ibeKeys?: readonly MasterKey[];
  /** IBS master secret key (base64). */
  sk: string;
  verifier: ResultJwtVerifier;
  apiKeys: ApiKeyStore | undefined;
  clock: Clock;
  metrics: PkgMetrics;
  /** Refuse keys for identities with demo-scheme attributes (--refuse-demo-schemes). */
  refuseDemoSchemes: boolean;
  /** Where the per-key budgets are counted (the rate limiter's store). */
  budgets: BucketStore;
}

type Signer = { kind: 'jwt'; result: VerifiedResult } | { kind: 'apiKey'; record: ApiKeyRecord };

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the sign/key route's authentication. */
    pkgSigner: Signer | null;
  }
}

const U64_MAX = (1n << 64n) - 1n;

/** The session JWT of a request; key routes take no API keys. */
async function sessionResult(request: FastifyRequest, verifier: ResultJwtVerifier): Promise<VerifiedResult> {
  const credential = bearerCredential(request);
  if (credential.kind !== 'jwt') throw new PkgError('JWT_INVALID', 'this route takes a session JWT, not an API key');
  return verifier.verify(credential.jwt);
}

/**
 * The record of an API key, or API_KEY_INVALID (API_KEYS_DISABLED, DB_UNAVAILABLE). With a request,
 * fills in its audit record: the key's ids when it exists, and why it was refused.
 */
export async function lookupApiKey(
  apiKeys: ApiKeyStore | undefined,
  apiKey: string,
  request?: FastifyRequest,
): Promise<ApiKeyRecord> {
  const audit = request?.pkgAudit;
  if (audit) audit.credential = 'api-key';
  if (apiKeys === undefined) throw new PkgError('API_KEYS_DISABLED');
  let resolution: ApiKeyResolution;
  try {
    resolution = await apiKeys.resolve(apiKey);
  } catch (e) {
    if (e instanceof DatabaseUnavailableError) throw new PkgError('DB_UNAVAILABLE', undefined, { cause: e });
    throw e;
  }
  if (!resolution.ok) {
    if (audit) Object.assign(audit, { keyId: resolution.keyId, orgId: resolution.orgId, reason: resolution.reason });
    throw new PkgError('API_KEY_INVALID');
  }
  if (audit) Object.assign(audit, { keyId: resolution.record.keyId, orgId: resolution.record.tenantId });
  return resolution.record;
}

/**
 * The timestamp of key/{timestamp}: an unsigned 64-bit integer (else TIMESTAMP) that lies neither
 * more than CLOCK_SKEW_SECONDS ahead of our clock nor after the JWT's exp (else CHRONOLOGY). Any past
 * time is fine: it is the time a ciphertext was sealed, possibly long ago. The allowance ahead is for
 * the sealer's clock and rounding: pg-js seals with Math.round(Date.now() / 1000), so a file opened
 * within half a second of sealing names the next second, and a sealer whose clock runs a little fast
 * names a time we have not reached.
 */
export function keyTimestamp(raw: string | undefined, now: number, exp: number): number {
  if (raw === undefined) return now;
  if (!/^\d{1,20}$/.test(raw) || BigInt(raw) > U64_MAX) throw new PkgError('TIMESTAMP');
  const ts = BigInt(raw);
  if (ts > BigInt(now + CLOCK_SKEW_SECONDS) || ts > BigInt(exp)) throw new PkgError('CHRONOLOGY');
  return Number(ts);
}

const keyResponseSchema = {
  type: 'object',
  required: ['status'],
  additionalProperties: false,
  properties: {
    status: sessionStatusSchema,
    proofStatus: proofStatusSchema,
    key: { type: 'string' },
    keys: {
      type: 'array',
      items: {
        type: 'object',
        required: ['id', 'key'],
        additionalProperties: false,
        properties: { id: { type: 'string' }, key: { type: 'string' } },
      },
    },
  },
} as const;

const signingKeySchema = {
  type: 'object',
  required: ['key', 'policy'],
  additionalProperties: false,
  properties: { key: { type: 'string' }, policy: policySchema },
} as const;

const signingResponseSchema = {
  type: 'object',
  required: ['status'],
  additionalProperties: false,
  properties: {
    status: sessionStatusSchema,
    proofStatus: proofStatusSchema,
    pubSignKey: signingKeySchema,
    privSignKey: signingKeySchema,
  },
} as const;

const signingIdSchema = { type: 'array', maxItems: LIMITS.attributes, items: attributeSchema } as const;

const signingRequestSchema = {
  type: 'object',
  required: ['pubSignId'],
  additionalProperties: false,
  properties: { pubSignId: signingIdSchema, privSignId: signingIdSchema },
} as const;

interface SigningRequest {
  pubSignId: Array<{ t: string; v?: string | null }>;
  privSignId?: Array<{ t: string; v?: string | null }>;
}

interface KeyResponse {
  status: SessionStatus;
  proofStatus?: ProofStatus;
  key?: string;
  keys?: Array<{ id: string; key: string }>;
}

interface SigningResponse {
  status: SessionStatus;
  proofStatus?: ProofStatus;
  pubSignKey?: { key: string; policy: Policy };
  privSignKey?: { key: string; policy: Policy };
}

// No maxLength: a timestamp too long is TIMESTAMP (keyTimestamp), not a schema error. The router bounds
// the segment (maxParamLength); longer ones are answered by the not-found handler (errors.ts).
const timestampParams = {
  type: 'object',
  required: ['timestamp'],
  additionalProperties: false,
  properties: { timestamp: { type: 'string' } },
} as const;

export async function keyRoutes(app: FastifyInstance, options: KeyRoutesOptions): Promise<void> {
  const { msk, sk, verifier, apiKeys, clock, metrics, refuseDemoSchemes, budgets } = options;
  // Primary first, then the newest: most files are under the keys a reader tries first.
  const ibeKeys = [...(options.ibeKeys ?? [])]
    .reverse()
    .sort((a, b) => Number(b.status === 'primary') - Number(a.status === 'primary'));
  // What a session proved, or an API key stands for, must not rest on a demo scheme when so configured.
  const checkSchemes = (attributes: readonly Attribute[]): void => {
    if (refuseDemoSchemes) refuseDemoTypes(attributes.map((a) => a.t));
  };

  const issueUsk = async (request: FastifyRequest, rawTimestamp: string | undefined): Promise<KeyResponse> => {
    const { claims, attributes } = await sessionResult(request, verifier);
    const ts = keyTimestamp(rawTimestamp, clock.now(), claims.exp);
    const response: KeyResponse = { status: claims.status };
    if (claims.proofStatus !== undefined) response.proofStatus = claims.proofStatus;
    // A key only for what a VALID disclosure proved; anything else gets the status and no key. A VALID
    // disclosure of nothing (all-optional request, or an identity server that sends no attributes) proves
    // nothing either, and a key for the empty identity would open what was sealed for "anyone at ts".
    if (attributes !== undefined && attributes.length === 0)
      throw new PkgError('EMPTY_IDENTITY', 'the session disclosed no attributes');
    if (attributes !== undefined) {
      checkSchemes(attributes);
      const policy = { ts, con: attributes };
      response.key = extractUsk(msk, policy);
      metrics.countKey('usk');
      // One key per master key that still opens files sealed at ts (the primary's again, under its id),
      // so that one identity session opens a file sealed under any of them (server/README.md).
      if (ibeKeys.length > 0) {
        response.keys = ibeKeys
          .filter((k) => issuesFor(k, ts))
          .map((k) => ({ id: k.id, key: k.secretKey === msk ? response.key! : extractUsk(k.secretKey, policy) }));
      }
    }
    return response;
  };

  app.get<{ Params: { timestamp: string } }>(
    '/key/:timestamp',
    { config: SENSITIVE, schema: { params: timestampParams, response: { 200: keyResponseSchema } } },
    (request) => issueUsk(request, request.params.timestamp),
  );

  app.get('/key', { config: SENSITIVE, schema: { response: { 200: keyResponseSchema } } }, (request) =>
    issueUsk(request, undefined),
  );

  // Issued for the canonical identity (current PostGuard), and the policy returned in its canonical
  // spelling, so a sealer writes what every reader derives the same identity from: an API key
  // whose e-mail was stored as Alice@Example.com signs as alice@example.com.
  const signingKey = (request: FastifyRequest, con: Attribute[], ts: number): { key: string; policy: Policy } => {
    // A signature by "nobody" proves nothing about the sender: no signing key for the empty identity.
    if (con.length === 0) throw new PkgError('EMPTY_IDENTITY', 'the signing identity has no attributes');
    const policy = {
      ts,
      con: con.map((a) => (a.v === undefined ? { t: a.t } : { t: a.t, v: canonicalize(a.t, a.v) })),
    };
    metrics.countKey('signing');
    const key = extractSigningKey(sk, policy);
    if (request.pkgAudit) request.pkgAudit.keysIssued = (request.pkgAudit.keysIssued ?? 0) + 1;
    return { key, policy };
  };

  app.decorateRequest('pkgSigner', null);

  app.post<{ Body: SigningRequest }>(
    '/sign/key',
    {
      config: { ...SENSITIVE, audit: 'sign/key' },
      schema: { body: signingRequestSchema, response: { 200: signingResponseSchema } },
      onRequest: async (request) => {
        const credential = bearerCredential(request);
        if (credential.kind === 'jwt' && request.pkgAudit) request.pkgAudit.credential = 'jwt';
        if (credential.kind === 'apiKey') {
          const record = await lookupApiKey(apiKeys, credential.apiKey, request);
          await spendBudget(budgets, record.budgets);
          request.pkgSigner = { kind: 'apiKey', record };
        } else {
          request.pkgSigner = { kind: 'jwt', result: await verifier.verify(credential.jwt) };
        }
      },
    },
    async (request): Promise<SigningResponse> => {
      const signer = request.pkgSigner!;
      const ts = clock.now();
      if (signer.kind === 'apiKey') {
        // The identity comes from the key's record; the body was checked but names nothing here.
        const { publicAttributes, privateAttributes } = signer.record;
        checkSchemes([...publicAttributes, ...privateAttributes]);
        const response: SigningResponse = {
          status: 'DONE',
          proofStatus: 'VALID',
          pubSignKey: signingKey(request, publicAttributes, ts),
        };
        if (privateAttributes.length > 0) response.privSignKey = signingKey(request, privateAttributes, ts);
        return response;
      }

      const { claims, attributes } = signer.result;
      const response: SigningResponse = { status: claims.status };
      if (claims.proofStatus !== undefined) response.proofStatus = claims.proofStatus;
      // pg-pkg would sign for an empty identity when DONE comes with a non-VALID proof; we refuse.
      if (attributes === undefined) return response;
      // Everything disclosed, selected or not: a session that proved a demo attribute is refused whole.
      checkSchemes(attributes);

      const { pubSignId, privSignId } = request.body;
      const publicTypes = new Set(pubSignId.map((a) => a.t));
      response.pubSignKey = signingKey(
        request,
        attributes.filter((a) => publicTypes.has(a.t)),
        ts,
      );
      if (privSignId !== undefined) {
        // Only value-less entries select a private attribute (pg-pkg's rule).
        const privateTypes = new Set(privSignId.filter((a) => a.v === undefined || a.v === null).map((a) => a.t));
        const privateAttributes = attributes.filter((a) => privateTypes.has(a.t));
        // pg-pkg would sign for an empty private identity; with nothing selected there is no private key.
        if (privateAttributes.length > 0) response.privSignKey = signingKey(request, privateAttributes, ts);
      }
      return response;
    },
  );
}
