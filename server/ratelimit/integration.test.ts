import { randomBytes } from 'node:crypto';
import { closedPort } from '../db/testing.js';
import { createMetrics } from '../metrics.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryBucketStore, redisBucketStore, type BucketStore, type RateLimitSettings } from './index.js';
import { manualClock, startStandin, type RunningStandin } from '../../devtools/standin/testing.js';
import { startPkg, type RunningPkg } from '../testing.js';

/**
 * The rate limiter inside the PKG: both tiers, per client, before authentication, X-Forwarded-For
 * only when trusted and then only its rightmost entry; buckets shared through Redis by two PKGs.
 */

const EMAIL = 'irma-demo.sidn-pbdf.email.email';
const SETTINGS: RateLimitSettings = {
  perSecond: 1,
  burst: 8,
  sensitivePerSecond: 1,
  sensitiveBurst: 3,
  disabled: false,
  trustForwardedFor: true,
};

let yivi: RunningStandin;
let now = 0;
const ms = () => now;

beforeAll(async () => {
  yivi = await startStandin({ clock: manualClock(), sweepIntervalMs: 0 });
});

afterAll(async () => {
  yivi.app.server.closeAllConnections();
  await yivi?.close();
});

async function withPkg(
  settings: RateLimitSettings,
  run: (pkg: RunningPkg) => Promise<void>,
  store: BucketStore = memoryBucketStore(ms),
): Promise<void> {
  const pkg = await startPkg({ yivi, rateLimit: { settings, store } });
  try {
    await run(pkg);
  } finally {
    await pkg.close();
    await store.close();
  }
}

const from = (ip: string, extra: Record<string, string> = {}) => ({ 'x-forwarded-for': ip, ...extra });

async function statuses(n: number, request: () => Promise<Response>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const response = await request();
    await response.arrayBuffer();
    out.push(response.status);
  }
  return out;
}

const repeat = (status: number, n: number) => new Array<number>(n).fill(status);

describe('two tiers per client', () => {
  it('general tier: burst, then 429 with Retry-After in the envelope; other clients unaffected; refills', async () => {
    await withPkg(SETTINGS, async (pkg) => {
      const get = (ip: string) => fetch(`${pkg.url}/v2/parameters`, { headers: from(ip) });
      expect(await statuses(8, () => get('192.0.2.1'))).toEqual(repeat(200, 8));
      const refused = await get('192.0.2.1');
      expect(refused.status).toBe(429);
      // Whole seconds, at least 1, in both pg-pkg's headers.
      expect(refused.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
      expect(refused.headers.get('x-ratelimit-after')).toBe(refused.headers.get('retry-after'));
      expect(await refused.json()).toEqual({ error: true, code: 'RATE_LIMITED', message: expect.any(String) });
      expect((await get('192.0.2.2')).status).toBe(200);
      // Outside /v2 nothing is limited.
      expect((await fetch(`${pkg.url}/health`, { headers: from('192.0.2.1') })).status).toBe(200);
      expect((await fetch(`${pkg.url}/metrics`, { headers: from('192.0.2.1') })).status).toBe(200);
      now += 1000;
      expect(await statuses(2, () => get('192.0.2.1'))).toEqual([200, 429]);
    });
  });

  it('sensitive tier: key-issuing routes run out first, the rest of /v2 still answers', async () => {
    await withPkg(SETTINGS, async (pkg) => {
      const start = () =>
        fetch(`${pkg.url}/v2/irma/start`, {
          method: 'POST',
          headers: from('198.51.100.7', { 'content-type': 'application/json' }),
          body: JSON.stringify({ con: [{ t: EMAIL }] }),
        });
      expect(await statuses(4, start)).toEqual([200, 200, 200, 429]);
      // One sensitive bucket for all key-issuing routes.
      const key = await fetch(`${pkg.url}/v2/request/key/1`, { headers: from('198.51.100.7') });
      expect(key.status).toBe(429);
      // jwt/{token} and parameters are general-tier only.
      expect((await fetch(`${pkg.url}/v2/irma/jwt/${'A'.repeat(20)}`, { headers: from('198.51.100.7') })).status).toBe(
        404,
      );
      expect((await fetch(`${pkg.url}/v2/parameters`, { headers: from('198.51.100.7') })).status).toBe(200);
    });
  });

  it('limits apply before authentication: unauthenticated key requests spend tokens too', async () => {
    await withPkg(SETTINGS, async (pkg) => {
      const key = () => fetch(`${pkg.url}/v2/irma/key/1`, { headers: from('203.0.113.9') });
      expect(await statuses(4, key)).toEqual([401, 401, 401, 429]);
      const sign = () =>
        fetch(`${pkg.url}/v2/irma/sign/key`, {
          method: 'POST',
          headers: from('203.0.113.9', { 'content-type': 'application/json', authorization: 'Bearer PG-guess' }),
          body: '{"pubSignId":[]}',
        });
      expect((await sign()).status).toBe(429);
    });
  });

  it('refused requests are not counted in postguard_clients', async () => {
    await withPkg(SETTINGS, async (pkg) => {
      await statuses(10, () => fetch(`${pkg.url}/v2/sign/parameters`, { headers: from('192.0.2.50') }));
      const text = await (await fetch(`${pkg.url}/metrics`)).text();
      expect(text).toMatch(/postguard_clients\{path="\/v2\/sign\/parameters",[^}]*status="200"\} 8/);
      expect(text).not.toContain('status="429"');
    });
  });
});

describe('which client a request counts against', () => {
  it('trusted X-Forwarded-For: only the rightmost entry counts; spoofed entries to its left change nothing', async () => {
    await withPkg(SETTINGS, async (pkg) => {
      let i = 0;
      const spoofed = () => fetch(`${pkg.url}/v2/parameters`, { headers: from(`10.9.9.${i++}, 10.0.0.7`) });
      expect(await statuses(9, spoofed)).toEqual([...repeat(200, 8), 429]);
      expect((await fetch(`${pkg.url}/v2/parameters`, { headers: from('10.0.0.7, 10.0.0.8') })).status).toBe(200);
    });
  });

  it('trusted entries with a port: two clients behind the proxy keep two buckets', async () => {
    await withPkg(SETTINGS, async (pkg) => {
      const get = (entry: string) => fetch(`${pkg.url}/v2/parameters`, { headers: from(entry) });
      expect(await statuses(9, () => get('192.0.2.60:1111'))).toEqual([...repeat(200, 8), 429]);
      // Same address, another port: the same client.
      expect((await get('192.0.2.60:2222')).status).toBe(429);
      expect((await get('[::ffff:192.0.2.60]:3333')).status).toBe(429);
      // Another address behind the same proxy: its own bucket.
      expect((await get('192.0.2.61:1111')).status).toBe(200);
      expect((await get('[2001:db8:5:600::1]:443')).status).toBe(200);
    });
  });

  it('--trusted-proxies: X-Forwarded-For is believed only from a listed proxy, walked through listed hops', async () => {
    // The test's requests come from 127.0.0.1: listed, then not.
    const proxies = { ...SETTINGS, trustForwardedFor: false };
    await withPkg({ ...proxies, trustedProxies: ['10.0.0.0/8', '127.0.0.1'] }, async (pkg) => {
      let i = 0;
      // Each request from another client behind two of our proxies: nobody runs out.
      const behindProxies = () => fetch(`${pkg.url}/v2/parameters`, { headers: from(`203.0.113.${i++}, 10.1.2.3`) });
      expect(await statuses(12, behindProxies)).toEqual(repeat(200, 12));
      // One client that prepends spoofed entries is still one client.
      let j = 0;
      const spoofing = () =>
        fetch(`${pkg.url}/v2/parameters`, { headers: from(`198.51.100.${j++}, 203.0.113.200, 10.1.2.3`) });
      expect(await statuses(9, spoofing)).toEqual([...repeat(200, 8), 429]);
    });
    await withPkg({ ...proxies, trustedProxies: ['10.0.0.0/8'] }, async (pkg) => {
      let i = 0;
      // The peer (127.0.0.1) is not a listed proxy: its header is its own invention.
      const rotating = () => fetch(`${pkg.url}/v2/parameters`, { headers: from(`203.0.113.${i++}`) });
      expect(await statuses(9, rotating)).toEqual([...repeat(200, 8), 429]);
    });
  });

  it('untrusted (the default): X-Forwarded-For is ignored, the TCP peer counts', async () => {
    await withPkg({ ...SETTINGS, trustForwardedFor: false }, async (pkg) => {
      let i = 0;
      const rotating = () => fetch(`${pkg.url}/v2/parameters`, { headers: from(`10.1.1.${i++}`) });
      expect(await statuses(9, rotating)).toEqual([...repeat(200, 8), 429]);
    });
  });

  it('disabled: every request passes', async () => {
    await withPkg({ ...SETTINGS, disabled: true }, async (pkg) => {
      expect(await statuses(20, () => fetch(`${pkg.url}/v2/irma/key/1`))).toEqual(repeat(401, 20));
    });
  });
});

describe('when Redis fails', () => {
  const settings = { ...SETTINGS, burst: 4 };
  const get = (pkg: RunningPkg, ip: string) => fetch(`${pkg.url}/v2/parameters`, { headers: from(ip) });

  it('open (default): answers from local buckets, limits still hold, and /metrics counts it', async () => {
    const metrics = createMetrics({ processMetrics: false });
    const store = redisBucketStore(`redis://127.0.0.1:${await closedPort()}`, {
      onUnavailable: (a) => metrics.countRedisUnavailable(a),
    });
    const pkg = await startPkg({ yivi, rateLimit: { settings, store }, metrics });
    try {
      expect(await statuses(5, () => get(pkg, '192.0.2.90'))).toEqual([...repeat(200, 4), 429]);
      const text = await (await fetch(`${pkg.url}/metrics`)).text();
      expect(text).toContain('postguard_ratelimit_redis_unavailable_total{action="local"} 5');
    } finally {
      await pkg.close();
      await store.close();
    }
  });

  it('closed: 503 RATE_LIMITER_UNAVAILABLE in the envelope, with Retry-After; outside /v2 still answers', async () => {
    const metrics = createMetrics({ processMetrics: false });
    const store = redisBucketStore(`redis://127.0.0.1:${await closedPort()}`, {
      failure: 'closed',
      onUnavailable: (a) => metrics.countRedisUnavailable(a),
    });
    const pkg = await startPkg({ yivi, rateLimit: { settings, store }, metrics });
    try {
      const refused = await get(pkg, '192.0.2.91');
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(await refused.json()).toEqual({
        error: true,
        code: 'RATE_LIMITER_UNAVAILABLE',
        message: 'rate limiter unavailable',
      });
      expect((await fetch(`${pkg.url}/health`)).status).toBe(200);
      expect(await (await fetch(`${pkg.url}/metrics`)).text()).toContain(
        'postguard_ratelimit_redis_unavailable_total{action="refused"} 1',
      );
    } finally {
      await pkg.close();
      await store.close();
    }
  });

  it('closed, against the real Redis: requests pass while it answers', async () => {
    const store = redisBucketStore('redis://127.0.0.1:6379', {
      failure: 'closed',
      keyPrefix: `pg-pkg:test:${randomBytes(6).toString('hex')}:`,
    });
    const deadline = Date.now() + 5000;
    while (!store.shared && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    const pkg = await startPkg({ yivi, rateLimit: { settings, store } });
    try {
      expect(await statuses(5, () => get(pkg, '192.0.2.92'))).toEqual([...repeat(200, 4), 429]);
    } finally {
      await pkg.close();
      await store.close();
    }
  });
});

describe('shared buckets', () => {
  it('two PKGs on one Redis share each client’s buckets', async () => {
    const prefix = `pg-pkg:test:${randomBytes(6).toString('hex')}:`;
    const storeA = redisBucketStore('redis://127.0.0.1:6379', { keyPrefix: prefix });
    const storeB = redisBucketStore('redis://127.0.0.1:6379', { keyPrefix: prefix });
    const deadline = Date.now() + 5000;
    while (!(storeA.shared && storeB.shared) && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 20));
    expect(storeA.shared && storeB.shared).toBe(true);
    // Redis keeps real time (1 token/s at the lowest rate): few, quick requests.
    const settings = { ...SETTINGS, burst: 4 };
    const second = await startPkg({ yivi, rateLimit: { settings, store: storeB } });
    try {
      await withPkg(
        settings,
        async (first) => {
          const get = (pkg: RunningPkg) => fetch(`${pkg.url}/v2/parameters`, { headers: from('192.0.2.77') });
          expect(await statuses(2, () => get(first))).toEqual(repeat(200, 2));
          expect(await statuses(2, () => get(second))).toEqual(repeat(200, 2));
          expect((await get(first)).status).toBe(429);
          expect((await get(second)).status).toBe(429);
        },
        storeA,
      );
    } finally {
      await second.close();
      await storeB.close();
    }
  });
});
