import Fastify, { type FastifyInstance, type InjectOptions } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { startPkg } from '../testing.js';
import {
  SENSITIVE,
  memoryBucketStore,
  processBucketStore,
  rateLimitPlugin,
  type BucketStore,
  type RateLimitSettings,
} from './index.js';

const SETTINGS: RateLimitSettings = {
  perSecond: 1,
  burst: 8,
  sensitivePerSecond: 1,
  sensitiveBurst: 3,
  disabled: false,
  trustForwardedFor: false,
};

function manualMs() {
  let now = 5_000_000;
  return { clock: () => now, advance: (ms: number) => (now += ms) };
}

let apps: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(apps.map((app) => app.close()));
  apps = [];
});

async function buildApp(
  settings: Partial<RateLimitSettings> = {},
  store: BucketStore = memoryBucketStore(),
  logLines: string[] = [],
) {
  const app = Fastify({ logger: { level: 'info', stream: { write: (line: string) => logLines.push(line) } } });
  apps.push(app);
  await app.register(rateLimitPlugin, { settings: { ...SETTINGS, ...settings }, store });
  const ok = async () => ({ ok: true });
  app.get('/health', ok);
  app.get('/metrics', ok);
  app.get('/v2/parameters', ok);
  app.post('/v2/irma/start', { config: SENSITIVE }, ok);
  app.get('/v2/irma/key/:timestamp', { config: SENSITIVE }, ok);
  app.post('/v2/request/sign/key', { config: SENSITIVE }, ok);
  app.get('/v2/api-key/validate', { config: SENSITIVE }, ok);
  app.options('/v2/parameters', ok);
  return app;
}

const from = (remoteAddress: string, extra: { headers?: Record<string, string> } = {}) => ({ remoteAddress, ...extra });

async function statuses(app: FastifyInstance, n: number, request: InjectOptions) {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await app.inject(request)).statusCode);
  return out;
}

const count = (codes: number[], code: number) => codes.filter((c) => c === code).length;

describe("the PKG's routes declare their tier", () => {
  it("the reference's key-issuing set, under every identity-provider segment, pays the sensitive tier; nothing else does", async () => {
    // Burst 1 in the sensitive tier: a second request from the same client to a sensitive route is
    // 429 before its own checks (auth, schema) run; the general tier is wide open.
    const pkg = await startPkg({
      rateLimit: {
        settings: { ...SETTINGS, perSecond: 1000, burst: 1000, sensitivePerSecond: 0.001, sensitiveBurst: 1 },
      },
    });
    try {
      const second = async (method: 'GET' | 'POST', url: string) => {
        // Each route gets its own client, so the one sensitive bucket per client does not carry over.
        const remoteAddress = `10.9.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}`;
        const request = { method, url, remoteAddress, ...(method === 'POST' ? { payload: {} } : {}) };
        await pkg.app.inject(request);
        return (await pkg.app.inject(request)).statusCode;
      };
      for (const idp of ['irma', 'request', 'idp']) {
        for (const [method, path] of [
          ['POST', 'start'],
          ['GET', 'key'],
          ['GET', 'key/1700000000'],
          ['POST', 'sign/key'],
        ] as const) {
          expect(await second(method, `/v2/${idp}/${path}`), `${method} /v2/${idp}/${path}`).toBe(429);
        }
        for (const path of [`jwt/${'a'.repeat(20)}`])
          expect(await second('GET', `/v2/${idp}/${path}`), path).not.toBe(429);
      }
      for (const path of ['/v2/parameters', '/v2/sign/parameters', '/health'])
        expect(await second('GET', path), path).not.toBe(429);
    } finally {
      await pkg.close();
    }
  });
});

describe('processBucketStore', () => {
  it('uses Redis when given a URL, and memory in a process that is not a cluster worker', async () => {
    const redis = processBucketStore({ redisUrl: 'redis://127.0.0.1:6379' });
    const memory = processBucketStore({});
    expect('shared' in redis).toBe(true);
    expect('size' in memory).toBe(true);
    await Promise.all([redis.close(), memory.close()]);
  });
});

describe('rateLimitPlugin', () => {
  it('answers 429 with Retry-After and the JSON envelope once the general burst is spent', async () => {
    const app = await buildApp();
    const codes = await statuses(app, 10, { url: '/v2/parameters', ...from('192.0.2.1') });
    expect(codes).toEqual([200, 200, 200, 200, 200, 200, 200, 200, 429, 429]);
    const refused = await app.inject({ url: '/v2/parameters', ...from('192.0.2.1') });
    expect(refused.statusCode).toBe(429);
    expect(refused.headers['retry-after']).toBe('1');
    expect(refused.headers['x-ratelimit-after']).toBe('1');
    expect(refused.headers['content-type']).toMatch(/^application\/json/);
    expect(refused.json()).toEqual({ error: true, code: 'RATE_LIMITED', message: 'Too many requests, retry in 1s' });
  });

  it('counts requests to unknown /v2 paths, and not /health, /metrics or other paths', async () => {
    const app = await buildApp();
    expect(count(await statuses(app, 10, { url: '/v2/nope', ...from('192.0.2.2') }), 429)).toBe(2);
    for (const url of ['/health', '/metrics', '/v2nope', '/elsewhere']) {
      const codes = await statuses(app, 20, { url, ...from('192.0.2.2') });
      expect(count(codes, 429), url).toBe(0);
    }
  });

  it('lets CORS preflights through, but counts other OPTIONS requests', async () => {
    const app = await buildApp();
    const preflight = {
      method: 'OPTIONS' as const,
      url: '/v2/parameters',
      ...from('192.0.2.3', { headers: { origin: 'https://a.example', 'access-control-request-method': 'GET' } }),
    };
    expect(count(await statuses(app, 20, preflight), 429)).toBe(0);
    const plain = { method: 'OPTIONS' as const, url: '/v2/parameters', ...from('192.0.2.3') };
    expect(count(await statuses(app, 10, plain), 429)).toBe(2);
  });

  it('limits key-issuing routes with one shared sensitive bucket, and charges the general bucket too', async () => {
    const app = await buildApp();
    const client = from('192.0.2.4');
    // Sensitive burst 3, shared by start, key, sign/key and validate.
    expect((await app.inject({ method: 'POST', url: '/v2/irma/start', ...client })).statusCode).toBe(200);
    expect((await app.inject({ url: '/v2/irma/key/1700000000', ...client })).statusCode).toBe(200);
    expect((await app.inject({ method: 'POST', url: '/v2/request/sign/key', ...client })).statusCode).toBe(200);
    const refused = await app.inject({ url: '/v2/api-key/validate', ...client });
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toMatchObject({ code: 'RATE_LIMITED' });
    expect(await statuses(app, 2, { method: 'POST', url: '/v2/irma/start', ...client })).toEqual([429, 429]);
    // 6 requests so far drew 6 of the 8 general tokens, refused sensitive ones included.
    expect(await statuses(app, 3, { url: '/v2/parameters', ...client })).toEqual([200, 200, 429]);
  });

  it('refills at the configured rates (injected clock)', async () => {
    const time = manualMs();
    const app = await buildApp(
      { perSecond: 10, burst: 5, sensitivePerSecond: 2, sensitiveBurst: 2 },
      memoryBucketStore(time.clock),
    );
    const client = from('192.0.2.5');
    expect(await statuses(app, 3, { method: 'POST', url: '/v2/irma/start', ...client })).toEqual([200, 200, 429]);
    time.advance(499);
    expect((await app.inject({ method: 'POST', url: '/v2/irma/start', ...client })).statusCode).toBe(429);
    time.advance(1);
    expect((await app.inject({ method: 'POST', url: '/v2/irma/start', ...client })).statusCode).toBe(200);
    // General: 5 taken by the 5 requests above; 10/s brings one back every 100 ms.
    expect((await app.inject({ url: '/v2/parameters', ...client })).statusCode).toBe(200);
    time.advance(2000);
    expect(count(await statuses(app, 10, { url: '/v2/parameters', ...client }), 200)).toBe(5);
  });

  it('keeps clients apart, and treats one IPv6 /56 as one client', async () => {
    const app = await buildApp();
    expect(count(await statuses(app, 9, { url: '/v2/parameters', ...from('192.0.2.10') }), 429)).toBe(1);
    expect(count(await statuses(app, 8, { url: '/v2/parameters', ...from('192.0.2.11') }), 429)).toBe(0);
    for (let i = 0; i < 8; i++) {
      const address = `2001:db8:1:ab${i}${i}:${i}::${i + 1}`;
      expect((await app.inject({ url: '/v2/parameters', ...from(address) })).statusCode).toBe(200);
    }
    expect((await app.inject({ url: '/v2/parameters', ...from('2001:db8:1:abff::99') })).statusCode).toBe(429);
    expect((await app.inject({ url: '/v2/parameters', ...from('2001:db8:1:ac00::1') })).statusCode).toBe(200);
    expect((await app.inject({ url: '/v2/parameters', ...from('::ffff:192.0.2.11') })).statusCode).toBe(429);
  });

  it('ignores X-Forwarded-For unless trusted, and then uses only the rightmost entry', async () => {
    const untrusting = await buildApp();
    const rotating = (i: number) => from('10.0.0.1', { headers: { 'x-forwarded-for': `198.51.100.${i}` } });
    const codes = [];
    for (let i = 0; i < 10; i++)
      codes.push((await untrusting.inject({ url: '/v2/parameters', ...rotating(i) })).statusCode);
    expect(count(codes, 429)).toBe(2);

    const trusting = await buildApp({ trustForwardedFor: true });
    for (let i = 0; i < 10; i++) {
      expect((await trusting.inject({ url: '/v2/parameters', ...rotating(i) })).statusCode).toBe(200);
    }
    // A client rotating a spoofed left-hand entry stays one client.
    const spoofing = (i: number) =>
      from('10.0.0.1', { headers: { 'x-forwarded-for': `203.0.113.${i}, 198.51.100.200` } });
    const spoofed = [];
    for (let i = 0; i < 10; i++)
      spoofed.push((await trusting.inject({ url: '/v2/parameters', ...spoofing(i) })).statusCode);
    expect(count(spoofed, 429)).toBe(2);
    // Garbage in the rightmost entry counts against the proxy's own address.
    const garbage = await statuses(trusting, 9, {
      url: '/v2/parameters',
      ...from('10.0.0.9', { headers: { 'x-forwarded-for': 'unknown' } }),
    });
    expect(count(garbage, 429)).toBe(1);
  });

  it('answers 500 when the request has no usable peer address (and trust has nothing to offer)', async () => {
    const app = await buildApp();
    const response = await app.inject({ url: '/v2/parameters', remoteAddress: 'not-an-address' });
    expect(response.statusCode).toBe(500);
    expect(response.json()).toEqual({
      error: true,
      code: 'INTERNAL',
      message: 'could not determine the client address',
    });
    const trusting = await buildApp({ trustForwardedFor: true });
    const forwarded = await trusting.inject({
      url: '/v2/parameters',
      remoteAddress: 'not-an-address',
      headers: { 'x-forwarded-for': '198.51.100.30' },
    });
    expect(forwarded.statusCode).toBe(200);
  });

  it('lets everything through when disabled, without asking the store', async () => {
    const refusing: BucketStore = {
      take: () => Promise.reject(new Error('the store must not be consulted')),
      close: () => Promise.resolve(),
    };
    const logLines: string[] = [];
    const app = await buildApp({ disabled: true }, refusing, logLines);
    expect(count(await statuses(app, 30, { method: 'POST', url: '/v2/irma/start', ...from('192.0.2.20') }), 200)).toBe(
      30,
    );
    expect(logLines.map((l) => JSON.parse(l) as { level: number; msg: string })).toContainEqual(
      expect.objectContaining({ level: 40, msg: 'rate limiting is disabled: every request passes' }),
    );
  });

  it('lets a request through (and logs) if a store ever fails', async () => {
    const failing: BucketStore = {
      take: () => Promise.reject(new Error('broken store')),
      close: () => Promise.resolve(),
    };
    const logLines: string[] = [];
    const app = await buildApp({}, failing, logLines);
    expect((await app.inject({ url: '/v2/parameters', ...from('192.0.2.21') })).statusCode).toBe(200);
    const errors = logLines.map((l) => JSON.parse(l) as { level: number; msg: string; err?: { message: string } });
    expect(errors).toContainEqual(
      expect.objectContaining({ level: 50, err: expect.objectContaining({ message: 'broken store' }) }),
    );
  });

  it('keys on the real TCP peer over loopback HTTP', async () => {
    const app = await buildApp({ burst: 2 });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const address = app.server.address();
    if (typeof address !== 'object' || address === null) throw new Error('no port');
    const url = `http://127.0.0.1:${address.port}/v2/parameters`;
    const codes = [];
    for (let i = 0; i < 3; i++)
      codes.push((await fetch(url, { headers: { 'x-forwarded-for': `198.51.100.${i}` } })).status);
    expect(codes).toEqual([200, 200, 429]);
    expect((await fetch(`http://127.0.0.1:${address.port}/health`)).status).toBe(200);
  });
});
