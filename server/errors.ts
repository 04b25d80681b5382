import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';

/**
 * Every error the PKG sends is one JSON envelope:
 *
 *   {"error": true, "code": "CHRONOLOGY", "message": "chronology error"}
 *
 * `error: true` and `message` are the reference pg-pkg's shape, so existing clients keep working;
 * `code` is ours and stable: programs branch on it, people read the message. Messages never carry
 * internal detail (upstream bodies, stack traces, SQL); the cause goes to the log instead.
 */
export const PKG_ERRORS = {
  /** The body is not JSON, breaks the route's schema, or has an unknown field. */
  BAD_REQUEST: { status: 400, message: 'malformed request' },
  /** The body is larger than the limit (64 KiB). */
  BODY_TOO_LARGE: { status: 413, message: 'request body too large' },
  /** The request line and headers exceed Node's limit (16 KiB). */
  HEADERS_TOO_LARGE: { status: 431, message: 'request headers too large' },
  /** The client took too long to send its request (headers or body). */
  REQUEST_TIMEOUT: { status: 408, message: 'request timeout' },
  /** A body was sent with a Content-Type other than application/json. */
  UNSUPPORTED_MEDIA_TYPE: { status: 415, message: 'unsupported content type' },
  /** POST start: `validity` above 86400 s. */
  VALIDITY: { status: 400, message: 'validity exceeds maximum validity' },
  /** start, key issuance: the identity has no attributes (`con: []`, or a session that disclosed none). */
  EMPTY_IDENTITY: { status: 400, message: 'the identity has no attributes' },
  /** key/{timestamp}: the timestamp is not an unsigned 64-bit integer. */
  TIMESTAMP: { status: 400, message: 'no (valid) timestamp given' },
  /** The key timestamp lies in the future or after the JWT's exp, or the JWT has expired. */
  CHRONOLOGY: { status: 400, message: 'chronology error' },
  /** jwt/{token}, statusevents/{token}: not a session token (20 alphanumerics). */
  SESSION_TOKEN: { status: 400, message: 'invalid session token' },
  /** No `Authorization: Bearer <credential>` header. */
  UNAUTHENTICATED: { status: 401, message: 'missing or malformed Authorization header' },
  /** The session JWT fails a check (algorithm, signature, claims). */
  JWT_INVALID: { status: 401, message: 'JWT decoding error' },
  /** The API key is unknown, expired or revoked, or its organisation is not active (suspended, pending). */
  API_KEY_INVALID: { status: 401, message: 'API key is invalid' },
  /** An API key was presented to a PKG that runs without a database. */
  API_KEYS_DISABLED: { status: 401, message: 'API keys are not enabled on this server' },
  /**
   * start, key issuance with --refuse-demo-schemes: the request asks for, or the session disclosed, an
   * attribute of a demo scheme (irma-demo), which anyone can issue to themselves.
   */
  DEMO_SCHEME_REFUSED: {
    status: 403,
    message: 'demo-scheme attributes (irma-demo) are not accepted here: anyone can issue them to themselves',
  },
  /** A browser request from an origin outside PKG_ALLOWED_ORIGINS. */
  ORIGIN_NOT_ALLOWED: { status: 403, message: 'origin is not allowed to make this request' },
  /** No such route (or method). */
  NOT_FOUND: { status: 404, message: 'not found' },
  /** The identity server does not know the session (unknown or expired token). */
  SESSION_UNKNOWN: { status: 404, message: 'session not found' },
  /** Too many requests from one client (see Retry-After). */
  RATE_LIMITED: { status: 429, message: 'too many requests' },
  /** sign/key: the API key's own budget per hour or per day is spent (see Retry-After). */
  API_KEY_BUDGET_EXCEEDED: { status: 429, message: "the API key's request budget is spent" },
  /** statusevents: the client (or the PKG as a whole) has the most status-event streams open it may. */
  TOO_MANY_STREAMS: { status: 429, message: 'too many open status event streams' },
  /** A failure of the PKG itself. */
  INTERNAL: { status: 500, message: 'internal error' },
  /** The identity server answered, but not as the protocol says (non-2xx, malformed body). */
  IDP_ERROR: { status: 502, message: 'identity server error' },
  /** The identity server cannot be reached, timed out, or its JWT key is unavailable. */
  IDP_UNAVAILABLE: { status: 503, message: 'identity server unavailable' },
  /** The API-key database cannot be reached. */
  DB_UNAVAILABLE: { status: 503, message: 'API key database unavailable' },
  /** The shared rate-limit store (Redis) cannot be reached and the policy is to refuse (--redis-failure closed). */
  RATE_LIMITER_UNAVAILABLE: { status: 503, message: 'rate limiter unavailable' },
} as const;

export type PkgErrorCode = keyof typeof PKG_ERRORS;

export interface ErrorEnvelope {
  error: true;
  code: PkgErrorCode;
  message: string;
}

/** An error with a place in the catalogue above. `message` may refine the default (client-safe text only). */
export class PkgError extends Error {
  readonly code: PkgErrorCode;
  readonly statusCode: number;
  /** Seconds the client should wait before trying again (429s, some 503s); sent as Retry-After. */
  readonly retryAfterSeconds: number | undefined;

  constructor(code: PkgErrorCode, message?: string, options?: { cause?: unknown; retryAfterSeconds?: number }) {
    super(message ?? PKG_ERRORS[code].message, options);
    this.name = 'PkgError';
    this.code = code;
    this.statusCode = PKG_ERRORS[code].status;
    this.retryAfterSeconds = options?.retryAfterSeconds;
  }

  toJSON(): ErrorEnvelope {
    return { error: true, code: this.code, message: this.message };
  }
}

/**
 * Retry-After and pg-pkg's X-RateLimit-After, both whole seconds. pg-pkg rounds the wait down and so
 * often says 0 ("retry at once", which a client then does); we round up and never send less than 1.
 */
export function setRetryAfter(reply: FastifyReply, seconds: number): FastifyReply {
  const value = String(Number.isFinite(seconds) ? Math.max(1, Math.ceil(seconds)) : 1);
  return reply.header('retry-after', value).header('x-ratelimit-after', value);
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The code of the error this request was answered with (for the audit trail); null before one. */
    pkgErrorCode: PkgErrorCode | null;
  }
}

export function sendError(reply: FastifyReply, error: PkgError): FastifyReply {
  reply.request.pkgErrorCode = error.code;
  if (error.code === 'UNAUTHENTICATED' || error.code === 'JWT_INVALID' || error.code === 'API_KEY_INVALID') {
    reply.header('www-authenticate', 'Bearer');
  }
  // Every 429 says when to come back; a 503 does when its producer knows.
  if (error.statusCode === 429 || error.retryAfterSeconds !== undefined)
    setRetryAfter(reply, error.retryAfterSeconds ?? 1);
  return reply.code(error.statusCode).type('application/json; charset=utf-8').send(JSON.stringify(error.toJSON()));
}

interface AjvIssue {
  instancePath?: string;
  message?: string;
  params?: Record<string, unknown>;
}

/** A client-facing description of a schema violation, naming the offending field. */
function describeValidation(context: string | undefined, issues: readonly AjvIssue[]): string {
  const first = issues[0];
  if (first === undefined) return PKG_ERRORS.BAD_REQUEST.message;
  const where = `${context ?? 'body'}${first.instancePath ?? ''}`;
  const unknown = first.params?.additionalProperty;
  if (typeof unknown === 'string') return `${where}: unknown field ${JSON.stringify(unknown)}`;
  return `${where} ${first.message ?? 'is invalid'}`;
}

/** Maps a Fastify framework error (parsing, validation, limits) to our catalogue. */
export function toPkgError(error: FastifyError | Error): PkgError {
  if (error instanceof PkgError) return error;
  const e = error as FastifyError & { validationContext?: string };
  if (e.validation !== undefined) {
    return new PkgError('BAD_REQUEST', describeValidation(e.validationContext, e.validation as AjvIssue[]));
  }
  switch (e.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new PkgError('BODY_TOO_LARGE');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new PkgError('UNSUPPORTED_MEDIA_TYPE');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new PkgError('BAD_REQUEST', 'body is empty');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new PkgError('BAD_REQUEST', 'body is not valid JSON');
    default:
      break;
  }
  // Fastify's JSON parser raises a SyntaxError with statusCode 400 for broken JSON.
  if (error instanceof SyntaxError) return new PkgError('BAD_REQUEST', 'body is not valid JSON');
  const status = e.statusCode ?? 500;
  if (status === 404) return new PkgError('NOT_FOUND');
  if (status === 413) return new PkgError('BODY_TOO_LARGE');
  if (status === 415) return new PkgError('UNSUPPORTED_MEDIA_TYPE');
  if (status === 429) return new PkgError('RATE_LIMITED');
  if (status >= 400 && status < 500) return new PkgError('BAD_REQUEST');
  return new PkgError('INTERNAL', undefined, { cause: error });
}

export function errorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const mapped = toPkgError(error);
  // The log gets the cause; the client only the code and the generic message.
  if (mapped.code === 'INTERNAL') {
    request.log.error({ err: mapped.cause ?? error, code: mapped.code }, 'request failed');
  } else if (mapped.statusCode >= 500) {
    // A dependency failed (identity server, database): expected in operation, no stack needed.
    const cause = mapped.cause instanceof Error ? mapped.cause.message : undefined;
    request.log.warn({ code: mapped.code, cause }, mapped.message);
  } else {
    request.log.debug({ code: mapped.code }, mapped.message);
  }
  return sendError(reply, mapped);
}

export function notFoundHandler(_request: FastifyRequest, reply: FastifyReply): FastifyReply {
  return sendError(reply, new PkgError('NOT_FOUND'));
}

/**
 * A path segment longer than the router takes (app.ts maxParamLength) never reaches a route: Fastify
 * answers it, and a URL it cannot decode, before any hook. Where the route exists and only its value is
 * too long, the answer is the route's own error for a bad value (a key timestamp, a session token).
 */
const OVERLONG_SEGMENT: ReadonlyArray<[RegExp, PkgErrorCode]> = [
  [/^\/v2\/(?:irma|request|idp)\/key\/[^/]+$/, 'TIMESTAMP'],
  [/^\/v2\/(?:irma|request|idp)\/(?:jwt|statusevents)\/[^/]+$/, 'SESSION_TOKEN'],
];

export function frameworkErrorHandler(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    const path = request.url.split('?', 1)[0] ?? '';
    const match = OVERLONG_SEGMENT.find(([pattern]) => pattern.test(path));
    sendError(reply, new PkgError(match?.[1] ?? 'NOT_FOUND'));
  } else if (error.code === 'FST_ERR_BAD_URL') {
    sendError(reply, new PkgError('BAD_REQUEST', 'the URL is not valid'));
  } else {
    errorHandler(error, request, reply);
  }
}
