import type { FastifyInstance } from 'fastify';
import type { PkgMetrics } from '../metrics.js';

/** GET /health (liveness: plain `OK`) and GET /metrics (Prometheus text), outside /v2. */
export async function opsRoutes(app: FastifyInstance, { metrics }: { metrics: PkgMetrics }): Promise<void> {
  const text = { response: { 200: { type: 'string' } } } as const;

  app.get('/health', { schema: text, exposeHeadRoute: true }, async (_request, reply) =>
    reply.type('text/plain; charset=utf-8').send('OK'),
  );

  app.get('/metrics', { schema: text }, async (_request, reply) =>
    reply.type(metrics.contentType()).send(await metrics.text()),
  );
}
