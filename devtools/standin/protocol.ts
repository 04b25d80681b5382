/**
 * The Yivi (IRMA) wire vocabulary shared by the stand-in server and the simulated wallet.
 *
 * Browser-safe on purpose: no Node imports, so a demo page can bundle the wallet client.
 * Names and JSON shapes follow the Yivi server (irmago) exactly; see devtools/standin/README.md.
 */

import type { ProofStatus } from 'postguard-ts/pkg';

export const LD_CONTEXT = {
  disclosureRequest: 'https://irma.app/ld/request/disclosure/v2',
  signatureRequest: 'https://irma.app/ld/request/signature/v2',
  issuanceRequest: 'https://irma.app/ld/request/issuance/v2',
  clientSessionRequest: 'https://irma.app/ld/request/client/v1',
  sessionOptions: 'https://irma.app/ld/options/v1',
  frontendOptionsRequest: 'https://irma.app/ld/request/frontendoptions/v1',
} as const;

/** Marks a `/proofs` body as simulated, so it can never be mistaken for real Idemix proofs. */
export const SIMULATED_DISCLOSURE_CONTEXT = 'urn:standin:simulated-disclosure:v1';

/** Client protocol headers; the server speaks exactly client protocol 2.8. */
export const MIN_VERSION_HEADER = 'X-IRMA-MinProtocolVersion';
export const MAX_VERSION_HEADER = 'X-IRMA-MaxProtocolVersion';
export const CLIENT_PROTOCOL_VERSION = '2.8';

// The stand-in models irmago on its own (this file imports no values: wallet.ts runs in pages as is);
// test/boundaries.test.ts checks the list against the one the PKG and its client use (postguard-ts/pkg).
export const SESSION_STATUSES = ['INITIALIZED', 'PAIRING', 'CONNECTED', 'CANCELLED', 'DONE', 'TIMEOUT'] as const;
export type SessionStatus = (typeof SESSION_STATUSES)[number];

export const FINAL_STATUSES: ReadonlySet<SessionStatus> = new Set(['DONE', 'CANCELLED', 'TIMEOUT']);
export const isFinalStatus = (status: SessionStatus): boolean => FINAL_STATUSES.has(status);

// The proof statuses are the library's list (postguard-ts/pkg PROOF_STATUSES), which the PKG checks
// results against; a type-only import, erased when wallet.ts runs in a page.
export type { ProofStatus };

export type SessionType = 'disclosing' | 'signing' | 'issuing';

/** What the QR encodes: where the wallet finds the session, and what kind it is. */
export interface SessionPointer {
  u: string;
  irmaqr: SessionType;
}

/** One requested attribute: a bare id, or an object with an exact value and/or a not-null demand. */
export type AttributeRequest = string | { type: string; value?: string; notNull?: boolean };
/** AND of attribute requests. The empty conjunction makes its disjunction optional. */
export type AttributeCon = AttributeRequest[];
/** OR of conjunctions. */
export type AttributeDisCon = AttributeCon[];
/** AND of disjunctions: the `disclose` field of a disclosure request. */
export type AttributeConDisCon = AttributeDisCon[];

/** The disclosure request as the wallet receives it (server-set fields filled in). */
export interface WalletDisclosureRequest {
  '@context': string;
  context?: string;
  nonce?: string;
  protocolVersion?: string;
  devMode?: boolean;
  clientReturnUrl?: string;
  disclose: AttributeConDisCon;
  labels?: Record<string, { en?: string; nl?: string }>;
  skipExpiryCheck?: string[];
}

export interface SessionOptions {
  '@context': string;
  pairingMethod: 'none' | 'pin';
  pairingCode?: string;
}

/** The answer to the wallet's `GET {u}/`. `request` is absent while PIN pairing is pending. */
export interface ClientSessionRequest {
  '@context': string;
  protocolVersion: string;
  options: SessionOptions;
  request?: WalletDisclosureRequest;
}

/** An attribute the simulated wallet discloses; `rawvalue: null` is an attribute the credential lacks. */
export interface SimulatedAttribute {
  id: string;
  rawvalue: string | null;
}

/**
 * The simulated `/proofs` body. `disclosed[i]` is the wallet's choice for disjunction i, in the order of
 * the chosen conjunction; `[]` picks an empty (optional) conjunction. Sets past the last disjunction hold
 * attributes disclosed without being asked for.
 */
export interface SimulatedDisclosure {
  '@context': typeof SIMULATED_DISCLOSURE_CONTEXT;
  disclosed: SimulatedAttribute[][];
  /** Credential signing time in Unix seconds; the server rounds it down to a week. */
  issuancetime?: number;
}

/** The server's answer to `POST {u}/proofs`. */
export interface ServerSessionResponse {
  proofStatus: ProofStatus;
  nextSession?: SessionPointer;
}

/** Yivi's error body (every non-2xx answer). */
export interface RemoteError {
  status: number;
  error: string;
  description?: string;
  message?: string;
}

export type AttributeProofStatus = 'PRESENT' | 'EXTRA' | 'NULL';

export interface DisclosedAttribute {
  rawvalue: string | null;
  value: { '': string; en: string; nl: string } | null;
  id: string;
  status: AttributeProofStatus;
  issuancetime: number;
}

/** `GET /session/{token}/result`, and (with iss/iat/exp/sub added) the result JWT's claims. */
export interface SessionResult {
  token: string;
  status: SessionStatus;
  type: SessionType;
  proofStatus?: ProofStatus;
  disclosed?: (DisclosedAttribute[] | null)[];
  error?: RemoteError;
}

/** `POST /session` answer. */
export interface SessionPackage {
  sessionPtr: SessionPointer;
  token: string;
  frontendRequest: {
    authorization: string;
    pairingHint?: boolean;
    minProtocolVersion: string;
    maxProtocolVersion: string;
  };
}

/** The id of an attribute request in either of its two forms. */
export const requestedType = (ar: AttributeRequest): string => (typeof ar === 'string' ? ar : ar.type);

/** Yivi's rule for whether a disclosed (id, value) satisfies one attribute request. */
export function satisfies(ar: AttributeRequest, id: string, value: string | null): boolean {
  if (typeof ar === 'string') return ar === id;
  if (ar.type !== id) return false;
  if (ar.notNull === true && value === null) return false;
  if (ar.value !== undefined && ar.value !== value) return false;
  return true;
}
