import type { FastifyCorsOptions } from '@fastify/cors';
import { PkgError } from './errors.js';

/**
 * CORS from the allow-list (PKG_ALLOWED_ORIGINS). Entries are exact origins; `*` allows any. A
 * request from an origin outside the list is refused (403 ORIGIN_NOT_ALLOWED), preflight or not;
 * requests without an Origin header (servers, the CLI) are not browser requests and pass.
 */
export function corsOptions(allowedOrigins: readonly string[]): FastifyCorsOptions {
  const any = allowedOrigins.includes('*');
  const allowed = new Set(allowedOrigins);
  return {
    origin: (origin, callback) => {
      if (origin === undefined) return callback(null, false);
      if (any) return callback(null, '*');
      if (allowed.has(origin)) return callback(null, true);
      return callback(new PkgError('ORIGIN_NOT_ALLOWED'), false);
    },
    methods: ['GET', 'POST'],
    // The reference's list, plus If-None-Match so browser clients can revalidate the public keys, and
    // X-Cryptify-Source, which pg-js up to 2.5 sends on its PKG calls (without it, every cross-origin
    // call of such a client fails its preflight).
    allowedHeaders: [
      'Content-Type',
      'Authorization',
      'ETag',
      'If-None-Match',
      'X-POSTGUARD-CLIENT-VERSION',
      'X-Cryptify-Source',
    ],
    // Readable cross-origin: the keys' ETag (for that revalidation) and Retry-After on 429.
    exposedHeaders: ['ETag', 'Retry-After'],
    maxAge: 86_400,
    strictPreflight: true,
  };
}
