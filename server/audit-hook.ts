import type { FastifyInstance } from 'fastify';
import type { ApiKeyStore } from './db.js';
import type { ClientKeyOf } from './ratelimit/index.js';

/**
 * The server's half of the audit trail (server/audit.ts): a route that declares `config: { audit:
 * '<operation>' }` gets one row per request once its answer has gone out, whatever stopped it (the rate
 * limiter, the per-key budget, authentication, the schema, the handler). The route's authentication fills
 * in `request.pkgAudit` (the credential kind and, when the key exists, its ids; how many keys it issued);
 * sendError leaves the error code in `request.pkgErrorCode`.
 */

export interface RequestAudit {
  credential?: 'jwt' | 'api-key';
  keyId?: string | null;
  orgId?: string | null;
  /** Why a key was refused (the client hears only API_KEY_INVALID). */
  reason?: string;
  /** Signing keys this request issued. */
  keysIssued?: number;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The operation this route's requests are recorded as in the audit trail. */
    audit?: string;
  }
  interface FastifyRequest {
    /** Filled in by an audited route's authentication and handler. */
    pkgAudit: RequestAudit | null;
  }
}

/** Decorates requests (always, so routes may fill pkgAudit) and, with a store, records audited routes. */
export function auditRequests(
  app: FastifyInstance,
  store: ApiKeyStore | undefined,
  clientAddressOf: ClientKeyOf,
): void {
  app.decorateRequest('pkgAudit', null);
  app.addHook('onRequest', async (request) => {
    if (request.routeOptions.config.audit !== undefined) request.pkgAudit = {};
  });
  if (store === undefined) return;
  app.addHook('onResponse', async (request, reply) => {
    const operation = request.routeOptions.config.audit;
    if (operation === undefined) return;
    const audit = request.pkgAudit ?? {};
    const userAgent = request.headers['user-agent'];
    const details: Record<string, unknown> = { route: request.routeOptions.url, status: reply.statusCode };
    if (audit.credential !== undefined) details['credential'] = audit.credential;
    if (audit.reason !== undefined) details['reason'] = audit.reason;
    if (audit.keysIssued !== undefined) details['keysIssued'] = audit.keysIssued;
    store.audit({
      source: 'http',
      operation,
      outcome: reply.statusCode < 400 ? 'allowed' : 'refused',
      errorCode: request.pkgErrorCode,
      keyId: audit.keyId ?? null,
      orgId: audit.orgId ?? null,
      clientAddress: clientAddressOf(request) ?? null,
      userAgent: typeof userAgent === 'string' ? userAgent : null,
      details,
    });
  });
}
