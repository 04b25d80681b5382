/**
 * Test fixture (not product code): a PKG-shaped node:cluster, one tiny Fastify app per worker with the
 * rate-limit plugin, all on one port. Run as `node --import tsx server/ratelimit/cluster.fixture.ts`.
 *
 * Environment: WORKERS (default 3), BURST (general burst, default 20), PRIMARY=silent to make the primary
 * ignore take requests (the workers then fall back to their own buckets).
 * The primary prints `READY <port>` once every worker listens, and exits when its stdin closes.
 */
import cluster from 'node:cluster';
import Fastify from 'fastify';
import { installClusterBucketServer, memoryBucketStore, processBucketStore, rateLimitPlugin } from './index.js';

const workers = Number(process.env['WORKERS'] ?? 3);
const burst = Number(process.env['BURST'] ?? 20);

if (cluster.isPrimary) {
  if (process.env['PRIMARY'] !== 'silent') installClusterBucketServer(cluster, memoryBucketStore());
  const ports = new Set<number>();
  let listening = 0;
  for (let i = 0; i < workers; i++) {
    cluster.fork().on('message', (message: unknown) => {
      if (typeof message !== 'object' || message === null || !('listening' in message)) return;
      ports.add(Number(message.listening));
      if (++listening === workers) {
        if (ports.size !== 1) throw new Error(`workers listen on different ports: ${[...ports].join(', ')}`);
        process.stdout.write(`READY ${[...ports][0]}\n`);
      }
    });
  }
  const stop = () => {
    for (const worker of Object.values(cluster.workers ?? {})) worker?.kill();
    process.exit(0);
  };
  process.stdin.on('end', stop).on('close', stop).resume();
} else {
  const app = Fastify();
  await app.register(rateLimitPlugin, {
    settings: {
      perSecond: 1,
      burst,
      sensitivePerSecond: 1,
      sensitiveBurst: 1,
      disabled: false,
      trustForwardedFor: false,
    },
    store: processBucketStore({}), // in a worker: the primary's buckets
  });
  app.get('/v2/whoami', async () => ({ worker: cluster.worker?.id }));
  // Port 0 in every worker: the primary hands them all the same ephemeral port.
  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.address();
  process.send?.({ listening: typeof address === 'object' && address !== null ? address.port : -1 });
}
