/** The PKG's rate limiter (plugin.ts) and where its buckets live (bucket, cluster, redis); key.ts keys clients. */
export * from './plugin.js';
