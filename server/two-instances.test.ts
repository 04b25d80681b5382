import { spawn, type ChildProcess } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { disclose } from '../devtools/standin/wallet.js';
import { startStandin, type RunningStandin } from '../devtools/standin/testing.js';
import { runCli } from './cli.js';
import { apiKeyHash } from './db.js';
import { createTestSchema, type TestSchema } from './db/testing.js';
import { writePkgKeys } from './keyfiles.js';
import { testKeys } from './testing.js';

/**
 * Two PKG processes, one service: both run `pg-pkg server` with the same key files against one Redis and
 * one PostgreSQL, behind a small round-robin HTTP proxy on loopback (a trusted proxy: it writes
 * X-Forwarded-For, as a load balancer does). Shown: the per-address limits and the per-key budgets are
 * shared (the sum over both is the budget, ±1); a Yivi session started through one instance is finished
 * through the other; a revoked key and a suspended organisation are refused by both at the next request;
 * a `keys promote` rolled through both (each taken out of the proxy's rotation, restarted, put back) fails
 * no request.
 */

const MAIN = fileURLToPath(new URL('./main.ts', import.meta.url));
const TSX = new URL('../node_modules/tsx/dist/loader.mjs', import.meta.url).href;
const EMAIL = 'irma-demo.sidn-pbdf.email.email';
const REDIS_URL = process.env['TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379';
const SENSITIVE_BURST = 6;

interface Instance {
  child: ChildProcess;
  url: string;
}

/** A round-robin reverse proxy that says which upstream served each request. */
interface Proxy {
  url: string;
  /**
   * Takes an upstream out of the rotation, as a load balancer does before an instance restarts, once
   * the requests it is answering are done.
   */
  drain(index: number): Promise<void>;
  /** Puts an upstream (back) into the rotation at `index`. */
  restore(index: number, url: string): void;
  /** The client address it writes into X-Forwarded-For (each phase of the test is a new client). */
  client: string;
  /** Index of the upstream per request, in order. */
  served: number[];
  close(): Promise<void>;
}

async function startProxy(initial: string[]): Promise<Proxy> {
  let next = 0;
  const upstreams: Array<string | undefined> = [...initial];
  const inFlight = upstreams.map(() => 0);
  const idle: Array<(() => void) | undefined> = [];
  const state = { client: '', served: [] as number[] };
  const server: Server = createServer((req, res) => {
    let index = next++ % upstreams.length;
    while (upstreams[index] === undefined) index = next++ % upstreams.length;
    state.served.push(index);
    inFlight[index]! += 1;
    res.on('close', () => {
      inFlight[index]! -= 1;
      if (inFlight[index] === 0) idle[index]?.();
    });
    const target = new URL(req.url ?? '/', upstreams[index]);
    const upstream = httpRequest(
      target,
      { method: req.method, headers: { ...req.headers, host: target.host, 'x-forwarded-for': state.client } },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => {
      res.writeHead(502).end();
    });
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (typeof address !== 'object' || address === null) throw new Error('no port');
  return {
    url: `http://127.0.0.1:${address.port}`,
    get client() {
      return state.client;
    },
    set client(value: string) {
      state.client = value;
    },
    get served() {
      return state.served;
    },
    drain: (index) =>
      new Promise<void>((resolve) => {
        upstreams[index] = undefined;
        if (inFlight[index] === 0) return resolve();
        idle[index] = () => {
          idle[index] = undefined;
          resolve();
        };
      }),
    restore: (index, url) => void (upstreams[index] = url),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function startInstance(dir: string, env: Record<string, string>, args: string[]): Promise<Instance> {
  const clean: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env))
    if (!/^(?:PKG_|DATABASE_URL|IDENTITY_SERVER|IRMA_TOKEN|RUST_LOG|LOG_LEVEL)/.test(k)) clean[k] = v;
  const child = spawn(process.execPath, ['--import', TSX, MAIN, 'server', ...args], {
    cwd: dir,
    env: { ...clean, ...env, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`no listening line in time; stderr: ${err}`)), 40_000);
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const match = /pg-pkg listening on (http:\/\/\S+)/.exec(out);
      if (match) {
        clearTimeout(timer);
        resolve({ child, url: match[1]! });
      }
    });
    child.on('close', (code) => reject(new Error(`exited ${code} before listening; stderr: ${err}`)));
  });
}

let dir: string;
let yivi: RunningStandin;
let schema: TestSchema;
let instances: Instance[] = [];
let proxy: Proxy;
let sql: pg.Client;
/** The ids of key B, IBE and IBS, added before the instances started. */
let keyB: string[] = [];
let serverArgs: string[];

const fourFiles = (at: (name: string) => string) => [
  '--ibe-public-path',
  at('pkg_ibe.pub'),
  '--ibe-secret-path',
  at('pkg_ibe.sec'),
  '--ibs-public-path',
  at('pkg_ibs.pub'),
  '--ibs-secret-path',
  at('pkg_ibs.sec'),
];

/** A client address of its own for each phase, so that the phases' buckets (in a shared Redis) never meet. */
const freshClient = () => `198.18.${randomInt(256)}.${randomInt(1, 255)}`;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'pg-pkg-two-'));
  const at = (name: string) => join(dir, name);
  await writePkgKeys(
    {
      ibePublic: at('pkg_ibe.pub'),
      ibeSecret: at('pkg_ibe.sec'),
      ibsPublic: at('pkg_ibs.pub'),
      ibsSecret: at('pkg_ibs.sec'),
    },
    testKeys(),
  );
  yivi = await startStandin({ sweepIntervalMs: 0 });
  schema = await createTestSchema();
  sql = new pg.Client({ connectionString: schema.url });
  await sql.connect();
  // Step one of the rotation runbook, already rolled out: a key B beside A, decrypt-only, on both.
  const added = await cli('keys', 'add', '--key-set', at('pkg_keys.json'), ...fourFiles(at));
  keyB = [...added.matchAll(/key ([0-9a-f]{16})/g)].map((m) => m[1]!);
  const args = [
    '-H',
    '127.0.0.1',
    '-p',
    '0',
    '-i',
    yivi.url,
    '--allowed-origins',
    '*',
    '--email-attribute',
    EMAIL,
    '--redis-url',
    REDIS_URL,
    '--redis-failure',
    'closed',
    '--trusted-proxies',
    '127.0.0.1',
    '--ratelimit-sensitive-per-second',
    '1',
    '--ratelimit-sensitive-burst',
    String(SENSITIVE_BURST),
  ];
  serverArgs = args;
  instances = await Promise.all([0, 1].map(() => startInstance(dir, { DATABASE_URL: schema.url }, args)));
  proxy = await startProxy(instances.map((i) => i.url));
}, 60_000);

afterAll(async () => {
  await proxy?.close();
  await Promise.all(
    instances.map(
      (i) =>
        new Promise<void>((resolve) => {
          if (i.child.exitCode !== null) return resolve();
          i.child.once('exit', () => resolve());
          i.child.kill('SIGTERM');
        }),
    ),
  );
  await sql?.end();
  await schema?.drop();
  yivi?.app.server.closeAllConnections();
  await yivi?.close();
  await rm(dir, { recursive: true, force: true });
});

async function cli(...argv: string[]): Promise<string> {
  const out: string[] = [];
  const err: string[] = [];
  const outcome = await runCli(
    argv,
    { DATABASE_URL: schema.url },
    {
      stdout: { write: (t: string) => out.push(t) },
      stderr: { write: (t: string) => err.push(t) },
    },
  );
  expect(outcome, err.join('')).toEqual({ exit: 0 });
  return out.join('');
}

async function newKey(org: string): Promise<{ key: string; id: string }> {
  const key = (await cli('api-key', 'create', '--email', 'sender@example.org', '--org', org)).trim();
  const { rows } = await sql.query<{ id: string }>('SELECT id::text FROM business_api_keys WHERE key_hash = $1', [
    apiKeyHash(key),
  ]);
  return { key, id: rows[0]!.id };
}

const signKey = (apiKey: string) =>
  fetch(`${proxy.url}/v2/request/sign/key`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ pubSignId: [{ t: EMAIL }] }),
  });

/** Sends n requests one after another; the answers' codes (200, or the error envelope's code). */
async function codes(n: number, send: () => Promise<Response>): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const response = await send();
    out.push(response.status === 200 ? '200' : ((await response.json()) as { code: string }).code);
  }
  return out;
}

describe('two PKG processes behind one round-robin proxy', () => {
  it('take turns: the proxy alternates between two distinct processes', async () => {
    proxy.client = freshClient();
    const first = proxy.served.length;
    for (let i = 0; i < 4; i++) expect((await fetch(`${proxy.url}/health`)).status).toBe(200);
    expect(proxy.served.slice(first)).toEqual([0, 1, 0, 1].map((i) => (i + first) % 2));
    expect(instances[0]!.child.pid).not.toBe(instances[1]!.child.pid);
  });

  it('share the per-address limit: the sum over both is the burst (±1)', async () => {
    proxy.client = freshClient();
    const first = proxy.served.length;
    // GET key without a credential: the limiter answers before authentication (429 or 401).
    const answers = await codes(2 * SENSITIVE_BURST, () => fetch(`${proxy.url}/v2/request/key`));
    const passed = answers.filter((c) => c !== 'RATE_LIMITED').length;
    expect(passed).toBeGreaterThanOrEqual(SENSITIVE_BURST);
    expect(passed).toBeLessThanOrEqual(SENSITIVE_BURST + 1);
    // Both instances answered, each alone would have let all of them through.
    expect(new Set(proxy.served.slice(first))).toEqual(new Set([0, 1]));
  });

  it("share a key's budget: the sum over both is the budget (±1)", async () => {
    const { key, id } = await newKey('Two Budget');
    await cli('api-key', 'budget', '--id', id, '--per-hour', '4');
    proxy.client = freshClient();
    const answers = await codes(SENSITIVE_BURST, () => signKey(key));
    const signed = answers.filter((c) => c === '200').length;
    expect(signed).toBeGreaterThanOrEqual(4);
    expect(signed).toBeLessThanOrEqual(5);
    expect(answers.slice(signed)).toEqual(Array(SENSITIVE_BURST - signed).fill('API_KEY_BUDGET_EXCEEDED'));
  });

  it('finish a Yivi session through the other instance than the one that started it', async () => {
    proxy.client = freshClient();
    const started = proxy.served.length;
    const response = await fetch(`${proxy.url}/v2/request/start`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ con: [{ t: EMAIL, v: 'alice@example.org' }] }),
    });
    expect(response.status).toBe(200);
    const session = (await response.json()) as { sessionPtr: object; token: string };
    await disclose(session.sessionPtr, { [EMAIL]: 'alice@example.org' });
    const jwtResponse = await fetch(`${proxy.url}/v2/request/jwt/${session.token}`);
    expect(jwtResponse.status).toBe(200);
    const jwt = await jwtResponse.text();
    const ts = Math.floor(Date.now() / 1000);
    const keyResponse = await fetch(`${proxy.url}/v2/request/key/${ts}`, {
      headers: { authorization: `Bearer ${jwt}` },
    });
    expect(keyResponse.status).toBe(200);
    expect(await keyResponse.json()).toMatchObject({ status: 'DONE', proofStatus: 'VALID', key: expect.any(String) });
    const [start, result, key] = proxy.served.slice(started);
    expect(result).not.toBe(start);
    expect(key).toBe(start);
  });

  it('refuse a revoked key, and a suspended organisation’s key, at both instances from the next request', async () => {
    proxy.client = freshClient();
    const revoked = await newKey('Two Revoke');
    const suspended = await newKey('Two Suspend');
    const at = () => proxy.served.at(-1);
    const pairs: Array<[number | undefined, string]> = [];
    const send = async (key: string) => {
      const code = (await codes(1, () => signKey(key)))[0]!;
      pairs.push([at(), code]);
    };
    await send(revoked.key);
    await send(revoked.key);
    await cli('api-key', 'revoke', '--id', revoked.id);
    await send(revoked.key);
    await send(revoked.key);
    expect(pairs.map(([, code]) => code)).toEqual(['200', '200', 'API_KEY_INVALID', 'API_KEY_INVALID']);
    expect(new Set(pairs.slice(2).map(([instance]) => instance))).toEqual(new Set([0, 1]));

    // A fresh client: the sensitive burst of the last one is nearly spent.
    proxy.client = freshClient();
    pairs.length = 0;
    await send(suspended.key);
    await send(suspended.key);
    await sql.query("UPDATE organizations SET status = 'suspended' WHERE name = 'Two Suspend'");
    await send(suspended.key);
    await send(suspended.key);
    expect(pairs.map(([, code]) => code)).toEqual(['200', '200', 'API_KEY_INVALID', 'API_KEY_INVALID']);
    expect(new Set(pairs.slice(2).map(([instance]) => instance))).toEqual(new Set([0, 1]));
  });

  it('roll a keys promote through both instances, one restart after the other, with no failed request', async () => {
    proxy.client = freshClient();
    const primaryId = async (path: string) => {
      const response = await fetch(`${proxy.url}${path}`);
      const body = (await response.json()) as {
        publicKey: string;
        keys: Array<{ id: string; status: string }>;
        code?: string;
      };
      return { status: response.status, etag: response.headers.get('etag'), body };
    };
    const primary = (answer: Awaited<ReturnType<typeof primaryId>>) =>
      answer.body.keys?.find((k) => k.status === 'primary')?.id ?? answer.body.code;
    const before = await primaryId('/v2/parameters');
    const keyA = primary(before);
    expect(before.body.keys.map((k) => k.status)).toEqual(['primary', 'decrypt-only']);

    // Clients keep asking (paced well under the general limit, 10/s) while the promote rolls out.
    const answers: Array<{ status: number; primary: string | undefined }> = [];
    let rolling = true;
    const traffic = (async () => {
      while (rolling) {
        for (const path of ['/v2/parameters', '/v2/sign/parameters']) {
          const answer = await primaryId(path);
          answers.push({ status: answer.status, primary: primary(answer) });
        }
        await new Promise((r) => setTimeout(r, 300));
      }
    })();
    try {
      const keySet = join(dir, 'pkg_keys.json');
      for (const id of keyB) await cli('keys', 'promote', '--id', id, '--key-set', keySet);
      for (const index of [0, 1]) {
        await proxy.drain(index);
        const old = instances[index]!;
        await new Promise<void>((resolve) => {
          old.child.once('exit', () => resolve());
          old.child.kill('SIGTERM');
        });
        instances[index] = await startInstance(dir, { DATABASE_URL: schema.url }, serverArgs);
        proxy.restore(index, instances[index]!.url);
      }
    } finally {
      rolling = false;
      await traffic;
    }
    expect(answers.filter((a) => a.status !== 200)).toEqual([]);
    // Before: A primary everywhere; during: either; after: B from both instances, under a new ETag.
    const mpkPrimaries = answers.filter((_, i) => i % 2 === 0).map((a) => a.primary);
    expect(mpkPrimaries[0]).toBe(keyA);
    expect(new Set(mpkPrimaries)).toEqual(new Set([keyA, keyB[0]]));
    const served = proxy.served.length;
    const after = [await primaryId('/v2/parameters'), await primaryId('/v2/parameters')];
    expect(new Set(proxy.served.slice(served))).toEqual(new Set([0, 1]));
    for (const answer of after) {
      expect(primary(answer)).toBe(keyB[0]);
      expect(answer.etag).not.toBe(before.etag);
      expect(answer.body.keys.map((k) => [k.id, k.status])).toEqual([
        [keyA, 'decrypt-only'],
        [keyB[0], 'primary'],
      ]);
    }
  }, 90_000);
});
