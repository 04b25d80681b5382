/**
 * A simulated Yivi wallet: it plays the phone against the stand-in over plain HTTP (fetch only, so a
 * browser page can use it as well as Node). The wire flow is the real wallet's; only the /proofs body
 * is simulated:
 *
 *   1. read the session pointer from the QR text            fromQr
 *   2. GET {u}/ with the protocol headers and a random       connect   (→ CONNECTED, gives the request)
 *      Authorization; wait out PIN pairing if the frontend asked for it
 *   3. pick one conjunction per disjunction                  chooseDisclosure
 *   4. POST {u}/proofs with urn:standin:simulated-disclosure sendDisclosure (→ DONE, gives proofStatus)
 *   or DELETE {u} to refuse                                  cancel    (→ CANCELLED)
 */

import {
  CLIENT_PROTOCOL_VERSION,
  MAX_VERSION_HEADER,
  MIN_VERSION_HEADER,
  SESSION_STATUSES,
  SIMULATED_DISCLOSURE_CONTEXT,
  isFinalStatus,
  requestedType,
  satisfies,
} from './protocol.js';
import type {
  AttributeConDisCon,
  AttributeRequest,
  ClientSessionRequest,
  ProofStatus,
  RemoteError,
  ServerSessionResponse,
  SessionPointer,
  SessionStatus,
  SimulatedAttribute,
  SimulatedDisclosure,
  WalletDisclosureRequest,
} from './protocol.js';
import { randomToken } from './tokens.js';

export type { SessionPointer, SimulatedAttribute, ProofStatus } from './protocol.js';

export type WalletErrorCode =
  /** The QR text holds no usable session pointer. */
  | 'BAD_QR'
  /** The server answered with a Yivi error; see `status` and `remote`. */
  | 'REMOTE'
  /** The server's answer is not what the protocol says it should be. */
  | 'BAD_RESPONSE'
  /** The server could not be reached. */
  | 'NETWORK'
  /** PIN pairing was not completed in time, or the session ended while waiting for it. */
  | 'PAIRING';

export class WalletError extends Error {
  readonly code: WalletErrorCode;
  readonly status: number | undefined;
  readonly remote: RemoteError | undefined;

  constructor(
    code: WalletErrorCode,
    message: string,
    extra: { status?: number; remote?: RemoteError; cause?: unknown } = {},
  ) {
    super(message, extra.cause === undefined ? undefined : { cause: extra.cause });
    this.name = 'WalletError';
    this.code = code;
    this.status = extra.status;
    this.remote = extra.remote;
  }
}

export interface WalletOptions {
  /** Defaults to the global fetch. */
  fetch?: typeof fetch;
  signal?: AbortSignal;
  /** How often to look at the status while PIN pairing is pending (ms). 500. */
  pairingPollMs?: number;
  /** How long to wait for PIN pairing (ms). 120000. */
  pairingTimeoutMs?: number;
}

/** What the person has in their (fake) credential store: attribute id → value (null: not set). */
export type AttributeValues = Readonly<Record<string, string | null>>;

export interface Connection {
  pointer: SessionPointer;
  /** The client Authorization this wallet chose; the server binds the session to it. */
  authorization: string;
  session: ClientSessionRequest;
  request: WalletDisclosureRequest;
}

export interface DisclosureReport {
  proofStatus: ProofStatus;
  /** What was sent, one set per disjunction. */
  disclosed: SimulatedAttribute[][];
  /** The request the server showed the wallet. */
  request: WalletDisclosureRequest;
}

const SESSION_TYPES = new Set(['disclosing', 'signing', 'issuing']);

function pointerFrom(value: unknown): SessionPointer {
  const obj = value as { u?: unknown; irmaqr?: unknown; sessionPtr?: unknown } | null;
  if (typeof obj !== 'object' || obj === null) throw new WalletError('BAD_QR', 'QR payload is not a JSON object');
  // Also take the whole session package (what POST /session and the PKG's /start answer).
  if (typeof obj.sessionPtr === 'object' && obj.sessionPtr !== null) return pointerFrom(obj.sessionPtr);
  if (typeof obj.u !== 'string' || !/^https?:\/\//.test(obj.u)) {
    throw new WalletError('BAD_QR', 'QR payload has no http(s) "u"');
  }
  if (typeof obj.irmaqr !== 'string' || !SESSION_TYPES.has(obj.irmaqr)) {
    throw new WalletError('BAD_QR', 'QR payload has no valid "irmaqr"');
  }
  return { u: obj.u, irmaqr: obj.irmaqr as SessionPointer['irmaqr'] };
}

/**
 * The session pointer in a QR text, in any form the Yivi app reads: the bare JSON,
 * `https://open.yivi.app/-/session#<JSON>`, `irma://qr/json/<JSON>` or an Android intent URL, with the
 * JSON percent-encoded or not. An already-parsed pointer or session package is accepted as well.
 */
export function fromQr(qr: string | object): SessionPointer {
  if (typeof qr !== 'string') return pointerFrom(qr);
  let text = qr.trim();
  const jsonMarker = text.indexOf('qr/json/');
  if (jsonMarker >= 0) {
    text = text.slice(jsonMarker + 'qr/json/'.length);
    const intentTail = text.indexOf('#Intent;');
    if (intentTail >= 0) text = text.slice(0, intentTail);
  } else if (!text.startsWith('{')) {
    const hash = text.indexOf('#');
    if (hash < 0) throw new WalletError('BAD_QR', 'QR text is neither JSON nor a Yivi session link');
    text = text.slice(hash + 1);
  }
  if (!text.startsWith('{')) {
    try {
      text = decodeURIComponent(text);
    } catch (e) {
      throw new WalletError('BAD_QR', 'QR text is not valid percent-encoding', { cause: e });
    }
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw new WalletError('BAD_QR', 'QR payload is not JSON', { cause: e });
  }
  return pointerFrom(parsed);
}

const base = (pointer: SessionPointer): string => pointer.u.replace(/(?<!\/)\/+$/, '');

async function call(url: string, init: RequestInit, options: WalletOptions): Promise<Response> {
  const doFetch = options.fetch ?? globalThis.fetch;
  let response: Response;
  try {
    response = await doFetch(url, { ...init, signal: options.signal ?? null });
  } catch (e) {
    if ((e as Error).name === 'AbortError') throw e;
    throw new WalletError('NETWORK', `could not reach ${url}`, { cause: e });
  }
  if (response.ok) return response;
  const text = await response.text();
  let remote: RemoteError | undefined;
  try {
    const body = JSON.parse(text) as RemoteError;
    if (typeof body === 'object' && body !== null && typeof body.error === 'string') remote = body;
  } catch {
    // Not Yivi's error JSON; the status says enough.
  }
  const detail = remote?.message === undefined ? '' : `: ${remote.message}`;
  const what = remote === undefined ? `HTTP ${response.status}` : `${remote.error}${detail}`;
  throw new WalletError('REMOTE', `${init.method ?? 'GET'} ${url} failed: ${what}`, {
    status: response.status,
    ...(remote === undefined ? {} : { remote }),
  });
}

async function json(response: Response, what: string): Promise<unknown> {
  try {
    return await response.json();
  } catch (e) {
    throw new WalletError('BAD_RESPONSE', `${what} is not JSON`, { cause: e });
  }
}

function assertRequest(value: unknown): WalletDisclosureRequest {
  const req = value as WalletDisclosureRequest | undefined;
  if (typeof req !== 'object' || req === null || !Array.isArray(req.disclose)) {
    throw new WalletError('BAD_RESPONSE', 'the session request has no "disclose" list');
  }
  return req;
}

const sleep = (ms: number, signal: AbortSignal | undefined): Promise<void> =>
  new Promise((resolve, reject) => {
    if (signal?.aborted === true) return reject(signal.reason);
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });

/** The session status as the wallet sees it (`GET {u}/status`). */
export async function status(pointer: SessionPointer, options: WalletOptions = {}): Promise<SessionStatus> {
  const value = await json(await call(`${base(pointer)}/status`, { method: 'GET' }, options), 'status');
  if (typeof value !== 'string' || !(SESSION_STATUSES as readonly string[]).includes(value)) {
    throw new WalletError('BAD_RESPONSE', 'status is not a session status');
  }
  return value as SessionStatus;
}

/** Step 2: open the session as its wallet (→ CONNECTED) and fetch what it asks for. */
export async function connect(pointer: SessionPointer, options: WalletOptions = {}): Promise<Connection> {
  const authorization = randomToken();
  const response = await call(
    `${base(pointer)}/`,
    {
      method: 'GET',
      headers: {
        [MIN_VERSION_HEADER]: CLIENT_PROTOCOL_VERSION,
        [MAX_VERSION_HEADER]: CLIENT_PROTOCOL_VERSION,
        Authorization: authorization,
      },
    },
    options,
  );
  const session = (await json(response, 'session request')) as ClientSessionRequest | null;
  const wellFormed = typeof session === 'object' && session !== null;
  if (!wellFormed || typeof session.options !== 'object' || session.options === null) {
    throw new WalletError('BAD_RESPONSE', 'not a client session request');
  }
  let request = session.request;
  if (session.options.pairingMethod === 'pin') {
    // The request is held back until the browser confirms the pairing code.
    await waitForPairing(pointer, options);
    const init = { method: 'GET', headers: { Authorization: authorization } };
    request = (await json(await call(`${base(pointer)}/request`, init, options), 'request')) as typeof request;
  }
  request = assertRequest(request);
  return { pointer, authorization, session, request };
}

/** A real wallet shows the pairing code and waits until the browser confirms it (PAIRING → CONNECTED). */
async function waitForPairing(pointer: SessionPointer, options: WalletOptions): Promise<void> {
  const deadline = Date.now() + (options.pairingTimeoutMs ?? 120_000);
  for (;;) {
    const now = await status(pointer, options);
    if (now === 'CONNECTED') return;
    if (isFinalStatus(now)) throw new WalletError('PAIRING', `session ended (${now}) while waiting for pairing`);
    if (Date.now() >= deadline) throw new WalletError('PAIRING', 'pairing was not completed in time');
    await sleep(options.pairingPollMs ?? 500, options.signal);
  }
}

function holds(attributes: AttributeValues, ar: AttributeRequest): boolean {
  const id = requestedType(ar);
  if (id.split('.').length === 3) return Object.keys(attributes).some((k) => k === id || k.startsWith(`${id}.`));
  return Object.hasOwn(attributes, id);
}

const valueFor = (attributes: AttributeValues, id: string): string | null =>
  id.split('.').length === 3 ? 'present' : (attributes[id] ?? null);

/**
 * Step 3, as a person with these attributes would choose: per disjunction the first conjunction they
 * can satisfy; else the empty (skip) option if there is one; else the first conjunction whose
 * attributes they have at all, even with other values (the server then reports the mismatch); else
 * nothing (the server reports MISSING_ATTRIBUTES).
 */
export function chooseDisclosure(disclose: AttributeConDisCon, attributes: AttributeValues): SimulatedAttribute[][] {
  return disclose.map((discon) => {
    const nonEmpty = discon.filter((con) => con.length > 0);
    const meets = (ar: AttributeRequest): boolean =>
      holds(attributes, ar) && satisfies(ar, requestedType(ar), valueFor(attributes, requestedType(ar)));
    const pick =
      nonEmpty.find((con) => con.every(meets)) ??
      discon.find((con) => con.length === 0) ??
      nonEmpty.find((con) => con.every((ar) => holds(attributes, ar))) ??
      [];
    return pick.map((ar) => ({ id: requestedType(ar), rawvalue: valueFor(attributes, requestedType(ar)) }));
  });
}

/** Step 4: send the chosen attributes (→ DONE). `issuancetime` in Unix seconds, optional. */
export async function sendDisclosure(
  connection: Connection,
  disclosed: SimulatedAttribute[][],
  options: WalletOptions & { issuancetime?: number } = {},
): Promise<ServerSessionResponse> {
  const body: SimulatedDisclosure = { '@context': SIMULATED_DISCLOSURE_CONTEXT, disclosed };
  if (options.issuancetime !== undefined) body.issuancetime = options.issuancetime;
  const response = await call(
    `${base(connection.pointer)}/proofs`,
    {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: connection.authorization },
      body: JSON.stringify(body),
    },
    options,
  );
  const answer = (await json(response, 'proofs response')) as ServerSessionResponse;
  if (typeof answer !== 'object' || answer === null || typeof answer.proofStatus !== 'string') {
    throw new WalletError('BAD_RESPONSE', 'proofs response has no proofStatus');
  }
  return answer;
}

/**
 * The whole wallet side in one call: connect, choose, disclose. `pointer` is a session pointer, QR text
 * or session package (see fromQr). `attributes` is either the person's attribute values (the wallet
 * chooses, see chooseDisclosure) or the exact sets to send.
 */
export async function disclose(
  pointer: SessionPointer | string | object,
  attributes: AttributeValues | SimulatedAttribute[][],
  options: WalletOptions & { issuancetime?: number } = {},
): Promise<DisclosureReport> {
  const connection = await connect(fromQr(pointer), options);
  const sets = Array.isArray(attributes) ? attributes : chooseDisclosure(connection.request.disclose, attributes);
  const { proofStatus } = await sendDisclosure(connection, sets, options);
  return { proofStatus, disclosed: sets, request: connection.request };
}

/** Refuse the session (`DELETE {u}` → CANCELLED). Cancelling a finished session changes nothing. */
export async function cancel(pointer: SessionPointer | string | object, options: WalletOptions = {}): Promise<void> {
  await call(base(fromQr(pointer)), { method: 'DELETE' }, options);
}
