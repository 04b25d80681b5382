import type { FastifyInstance } from 'fastify';
import { bearerCredential } from '../auth.js';
import type { ApiKeyStore } from '../db.js';
import { PkgError } from '../errors.js';
import { lookupApiKey } from './keys.js';
import { SENSITIVE } from '../ratelimit/index.js';

/**
 * GET /v2/api-key/validate: lets a storage service (Cryptify) check an API key and learn its tenant.
 * Registered only with a database. Like pg-pkg's guarded resource, a request without a `Bearer PG-…`
 * header does not match it at all (404); a key that is unknown, expired, revoked or of an organisation
 * that is not active is 401.
 */

const validateSchema = {
  response: {
    200: {
      type: 'object',
      required: ['tenant_id', 'organisation_name'],
      additionalProperties: false,
      properties: { tenant_id: { type: 'string' }, organisation_name: { type: ['string', 'null'] } },
    },
  },
} as const;

export async function apiKeyRoutes(app: FastifyInstance, { apiKeys }: { apiKeys: ApiKeyStore }): Promise<void> {
  app.get(
    '/v2/api-key/validate',
    { config: { ...SENSITIVE, audit: 'api-key/validate' }, schema: validateSchema },
    async (request) => {
      let apiKey: string;
      try {
        const credential = bearerCredential(request);
        if (credential.kind !== 'apiKey') throw new PkgError('NOT_FOUND');
        apiKey = credential.apiKey;
      } catch {
        throw new PkgError('NOT_FOUND');
      }
      const record = await lookupApiKey(apiKeys, apiKey, request);
      return { tenant_id: record.tenantId, organisation_name: record.organisationName };
    },
  );
}
