import { YiviError } from './errors.js';
import { LD_CONTEXT } from './protocol.js';
import type { AttributeConDisCon, AttributeRequest, WalletDisclosureRequest } from './protocol.js';

/**
 * Parsing and validating what a requestor POSTs to /session, with the rules and messages of irmago:
 * a plain disclosure request (top-level `@context`) or an extended one (`{validity, timeout, request}`).
 */

/** irmago's DefaultJwtValidity: used when `validity` is absent or 0. */
export const DEFAULT_JWT_VALIDITY = 120;

/** An attribute request in canonical object form; `notNull` is always explicit. */
export interface NormalizedAttributeRequest {
  type: string;
  value?: string;
  notNull: boolean;
}

export interface NormalizedRequest {
  /** Seconds the result JWT stays valid (JWT exp = iat + validity). */
  validity: number;
  /** Seconds the session may wait in INITIALIZED; 0 means the server's max session lifetime. */
  clientTimeout: number;
  disclose: NormalizedAttributeRequest[][][];
  labels?: Record<string, unknown>;
  clientReturnUrl?: string;
  skipExpiryCheck?: string[];
}

const attributeRequestSchema = {
  anyOf: [
    { type: 'string' },
    {
      type: 'object',
      required: ['type'],
      properties: {
        type: { type: 'string' },
        value: { type: ['string', 'null'] },
        notNull: { type: 'boolean' },
      },
    },
  ],
} as const;

const disclosureRequestProperties = {
  '@context': { type: 'string' },
  disclose: { type: 'array', items: { type: 'array', items: { type: 'array', items: attributeRequestSchema } } },
  labels: { type: 'object' },
  clientReturnUrl: { type: 'string' },
  augmentReturnUrl: { type: 'boolean' },
  host: { type: 'string' },
  skipExpiryCheck: { type: 'array', items: { type: 'string' } },
  revocation: { type: 'object' },
} as const;

/**
 * Structural schema for the POST /session body (both forms). Semantic rules (contexts, at least one
 * attribute, id shapes) are checked by `parseSessionRequest`, so they can carry irmago's messages.
 */
export const sessionRequestBodySchema = {
  type: 'object',
  properties: {
    ...disclosureRequestProperties,
    validity: { type: 'integer', minimum: 0, maximum: 2_147_483_647 },
    timeout: { type: 'integer', minimum: 0, maximum: 2_147_483_647 },
    callbackUrl: { type: 'string' },
    nextSession: { type: 'object' },
    request: { type: 'object', properties: disclosureRequestProperties },
  },
} as const;

/** 3 or 4 non-empty dot-separated parts of the characters scheme identifiers use. */
const ATTRIBUTE_ID = /^[\w-]+(?:\.[\w-]+){2,3}$/;

const credentialTypeOf = (id: string): string => id.split('.').slice(0, 3).join('.');

interface RawDisclosureRequest {
  '@context'?: string;
  disclose?: AttributeConDisCon;
  labels?: Record<string, unknown>;
  clientReturnUrl?: string;
  augmentReturnUrl?: boolean;
  host?: string;
  skipExpiryCheck?: string[];
  revocation?: object;
}

interface RawBody extends RawDisclosureRequest {
  validity?: number;
  timeout?: number;
  callbackUrl?: string;
  nextSession?: object;
  request?: RawDisclosureRequest;
}

export interface ParseOptions {
  /** When set, only these attribute ids (or 3-part credential ids) may be requested, like a scheme. */
  knownAttributes?: ReadonlySet<string>;
}

/** `body` has already passed `sessionRequestBodySchema`. Throws YiviError. */
export function parseSessionRequest(body: unknown, options: ParseOptions = {}): NormalizedRequest {
  const raw = body as RawBody;
  const extended = raw['@context'] === undefined;
  const inner: RawDisclosureRequest | undefined = extended ? raw.request : raw;
  const context = inner?.['@context'];
  if (context === undefined) {
    // irmago would try the pre-condiscon legacy format here; that format is out of scope for the stand-in.
    throw new YiviError('INVALID_REQUEST', 'legacy (pre-condiscon) session requests are not supported');
  }
  if (context === LD_CONTEXT.signatureRequest || context === LD_CONTEXT.issuanceRequest) {
    throw new YiviError('UNSUPPORTED', 'the stand-in only runs disclosure sessions');
  }
  if (context !== LD_CONTEXT.disclosureRequest) {
    const kind = extended ? 'requestor' : 'session';
    throw new YiviError('INVALID_REQUEST', `Invalid ${kind} request type`);
  }
  const request = inner!;

  if (extended && (raw.callbackUrl !== undefined || raw.nextSession !== undefined)) {
    throw new YiviError('UNSUPPORTED', 'callbackUrl and nextSession are not supported by the stand-in');
  }
  if (request.revocation !== undefined && Object.keys(request.revocation).length > 0) {
    throw new YiviError('UNSUPPORTED', 'revocation is not supported by the stand-in');
  }
  if (request.augmentReturnUrl === true) {
    throw new YiviError('INVALID_REQUEST', 'augmenting client return url not enabled in server configuration');
  }
  if (request.host !== undefined && request.host !== '') {
    throw new YiviError('UNAUTHORIZED', 'host');
  }

  const disclose = normalizeConDisCon(request.disclose ?? [], options);

  const normalized: NormalizedRequest = {
    validity: extended && raw.validity !== undefined && raw.validity !== 0 ? raw.validity : DEFAULT_JWT_VALIDITY,
    clientTimeout: extended ? (raw.timeout ?? 0) : 0,
    disclose,
  };
  if (request.labels !== undefined) normalized.labels = request.labels;
  if (request.clientReturnUrl !== undefined && request.clientReturnUrl !== '') {
    normalized.clientReturnUrl = request.clientReturnUrl;
  }
  if (request.skipExpiryCheck !== undefined && request.skipExpiryCheck.length > 0) {
    normalized.skipExpiryCheck = request.skipExpiryCheck;
  }
  return normalized;
}

function normalizeConDisCon(condiscon: AttributeConDisCon, options: ParseOptions): NormalizedAttributeRequest[][][] {
  let count = 0;
  const out = condiscon.map((discon) => {
    if (discon.length === 0) throw new YiviError('INVALID_REQUEST', 'Empty disjunction');
    return discon.map((con) => {
      const seen = new Set<string>();
      let last = '';
      return con.map((ar) => {
        const attr = normalizeAttributeRequest(ar);
        const parts = attr.type.split('.').length;
        if (parts !== 3 && parts !== 4) {
          const message = `Expected attribute request to consist of 4 or 3 parts, ${parts} found`;
          throw new YiviError('INVALID_REQUEST', message);
        }
        if (!ATTRIBUTE_ID.test(attr.type)) {
          throw new YiviError('INVALID_REQUEST', `malformed attribute identifier ${JSON.stringify(attr.type)}`);
        }
        if (options.knownAttributes !== undefined && !options.knownAttributes.has(attr.type)) {
          throw new YiviError('INVALID_REQUEST', `Unknown attribute type: ${attr.type}`);
        }
        const cred = credentialTypeOf(attr.type);
        if (seen.has(cred) && last !== cred) {
          throw new YiviError(
            'INVALID_REQUEST',
            'Within inner conjunctions, attributes from the same credential type must be adjacent',
          );
        }
        seen.add(cred);
        last = cred;
        count++;
        return attr;
      });
    });
  });
  if (count === 0) throw new YiviError('INVALID_REQUEST', 'Disclosure request had no attributes');
  return out;
}

function normalizeAttributeRequest(ar: AttributeRequest | { type: string; value?: string | null; notNull?: boolean }) {
  if (typeof ar === 'string') return { type: ar, notNull: false };
  const out: NormalizedAttributeRequest = { type: ar.type, notNull: ar.notNull === true };
  if (typeof ar.value === 'string') out.value = ar.value;
  return out;
}

/** irmago's marshalling: a request with no value and no notNull goes out as the bare id. */
export function marshalAttributeRequest(ar: NormalizedAttributeRequest): AttributeRequest {
  if (!ar.notNull && ar.value === undefined) return ar.type;
  const out: { type: string; value?: string; notNull?: boolean } = { type: ar.type };
  if (ar.value !== undefined) out.value = ar.value;
  if (ar.notNull) out.notNull = true;
  return out;
}

export const marshalConDisCon = (disclose: NormalizedAttributeRequest[][][]): AttributeConDisCon =>
  disclose.map((discon) => discon.map((con) => con.map(marshalAttributeRequest)));

/** Whether any attribute request pins a value: irmago then recommends pairing (`pairingHint`). */
export const pinsAValue = (disclose: NormalizedAttributeRequest[][][]): boolean =>
  disclose.some((discon) => discon.some((con) => con.some((ar) => ar.value !== undefined)));

/**
 * The request as the wallet receives it, with the server-set fields in irmago's key order:
 * context is always 1 ("AQ=="), nonce is fresh per session, devMode is on outside production.
 */
export function walletRequest(
  request: NormalizedRequest,
  nonce: string,
  protocolVersion: string,
  devMode: boolean,
): WalletDisclosureRequest {
  // Built field by field so the keys come out in Go's struct order (base fields first).
  const out: Record<string, unknown> = {
    '@context': LD_CONTEXT.disclosureRequest,
    context: 'AQ==',
    nonce,
    protocolVersion,
  };
  if (devMode) out.devMode = true;
  if (request.clientReturnUrl !== undefined) out.clientReturnUrl = request.clientReturnUrl;
  out.disclose = marshalConDisCon(request.disclose);
  if (request.labels !== undefined) out.labels = request.labels;
  if (request.skipExpiryCheck !== undefined) out.skipExpiryCheck = request.skipExpiryCheck;
  return out as unknown as WalletDisclosureRequest;
}
