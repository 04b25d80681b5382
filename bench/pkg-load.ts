/**
 * Load test of the PKG on loopback (not part of the test run; bounded in time).
 *
 *   node --import tsx bench/pkg-load.ts [--duration=10] [--connections=50] [--workers=1] [--redis-url=redis://…]
 *
 * The PKG runs as its own process (`pg-pkg server`, as deployed) in front of the stand-in identity
 * server; autocannon drives it from this process.
 *
 *   1. Throughput, rate limits disabled: GET /v2/parameters, and key issuance (GET key/{ts} with a
 *      real session JWT: JWT check + USK extraction; POST sign/key likewise).
 *   2. Limits hold, default limits (10/s burst 50; key-issuing 2/s burst 10): the same load from one
 *      client address. Expected: no errors other than 429, allowed requests close to burst + rate ×
 *      duration, and /health answering quickly throughout.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createRequire } from 'node:module';
import { generatePkgKeys } from '../lib/keys.js';
import { writePkgKeys } from '../server/keyfiles.js';
import { startStandin } from '../server/standin/testing.js';
import { disclose } from '../server/standin/wallet.js';

/** The part of autocannon's API used here (the package ships no types). */
interface AutocannonResult {
  requests: { average: number };
  latency: { p50: number; p99: number };
  statusCodeStats?: Record<string, { count: number }>;
  errors: number;
  timeouts: number;
}
type Autocannon = (options: {
  url: string;
  method: string;
  headers: Record<string, string>;
  body?: string;
  connections: number;
  duration: number;
}) => Promise<AutocannonResult>;
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

const { values: args } = parseArgs({
  options: {
    duration: { type: 'string', default: '10' },
    connections: { type: 'string', default: '50' },
    workers: { type: 'string', default: '1' },
    'redis-url': { type: 'string' },
  },
});
const DURATION = Number(args.duration);
const CONNECTIONS = Number(args.connections);
const WORKERS = Number(args.workers);
const EMAIL = 'irma-demo.sidn-pbdf.email.email';
const MAIN = fileURLToPath(new URL('../server/main.ts', import.meta.url));
const TSX = new URL('../node_modules/tsx/dist/loader.mjs', import.meta.url).href;

interface Pkg {
  url: string;
  child: ChildProcess;
}

async function startPkg(dir: string, yiviUrl: string, env: Record<string, string>): Promise<Pkg> {
  const child = spawn(
    process.execPath,
    ['--import', TSX, MAIN, 'server', '-H', '127.0.0.1', '-p', '0', '-i', yiviUrl, '--allowed-origins', '*', '--workers', String(WORKERS)],
    {
      cwd: dir,
      env: { ...process.env, LOG_LEVEL: 'error', ...(args['redis-url'] === undefined ? {} : { PKG_REDIS_URL: args['redis-url'] }), ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const match = /pg-pkg listening on (http:\/\/\S+)/.exec(out);
      if (match) resolve(match[1]!);
    });
    child.once('exit', (code) => reject(new Error(`pg-pkg exited ${code}`)));
  });
  return { url, child };
}

async function stopPkg(pkg: Pkg): Promise<void> {
  const exited = new Promise((resolve) => pkg.child.once('exit', resolve));
  pkg.child.kill('SIGTERM');
  await exited;
}

/** A session JWT for alice, valid for an hour, obtained the way a browser would. */
async function sessionJwt(pkgUrl: string): Promise<string> {
  const session = await (
    await fetch(`${pkgUrl}/v2/irma/start`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ con: [{ t: EMAIL, v: 'alice@example.org' }], validity: 3600 }),
    })
  ).json();
  await disclose(session, { [EMAIL]: 'alice@example.org' });
  return (await fetch(`${pkgUrl}/v2/irma/jwt/${session.token}`)).text();
}

interface Load {
  name: string;
  url: string;
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
  /** Key-issuing route (sensitive tier)? */
  sensitive: boolean;
}

interface Outcome {
  name: string;
  rps: number;
  p50: number;
  p99: number;
  total: number;
  statuses: Record<string, number>;
  errors: number;
  timeouts: number;
}

async function drive(load: Load, connections = CONNECTIONS): Promise<Outcome> {
  const result = await autocannon({
    url: load.url,
    method: load.method ?? 'GET',
    headers: load.headers ?? {},
    ...(load.body === undefined ? {} : { body: load.body }),
    connections,
    duration: DURATION,
  });
  const statuses = Object.fromEntries(Object.entries(result.statusCodeStats ?? {}).map(([code, s]) => [code, s.count]));
  return {
    name: load.name,
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    total: Object.values(statuses).reduce((a, b) => a + b, 0),
    statuses,
    errors: result.errors,
    timeouts: result.timeouts,
  };
}

/** Polls /health during a load; its worst latency says whether the PKG kept answering. */
function watchHealth(url: string): { stop(): Promise<{ polls: number; failures: number; worstMs: number }> } {
  let running = true;
  let polls = 0;
  let failures = 0;
  let worstMs = 0;
  const loop = (async () => {
    while (running) {
      const t = performance.now();
      try {
        const response = await fetch(`${url}/health`, { signal: AbortSignal.timeout(5000) });
        if ((await response.text()) !== 'OK') failures++;
      } catch {
        failures++;
      }
      worstMs = Math.max(worstMs, performance.now() - t);
      polls++;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return { polls, failures, worstMs };
    },
  };
}

function report(title: string, outcomes: Outcome[]): void {
  console.log(`\n${title}`);
  console.log(`${'load'.padEnd(34)} ${'req/s'.padStart(9)} ${'p50 ms'.padStart(7)} ${'p99 ms'.padStart(7)}  statuses`);
  for (const o of outcomes) {
    const statuses = Object.entries(o.statuses).map(([c, n]) => `${c}×${n}`).join(' ');
    const extra = o.errors + o.timeouts > 0 ? `  errors ${o.errors} timeouts ${o.timeouts}` : '';
    console.log(`${o.name.padEnd(34)} ${o.rps.toFixed(0).padStart(9)} ${String(o.p50).padStart(7)} ${String(o.p99).padStart(7)}  ${statuses}${extra}`);
  }
}

const dir = await mkdtemp(join(tmpdir(), 'pg-pkg-load-'));
const yivi = await startStandin({ sweepIntervalMs: 0 });
const failures: string[] = [];
try {
  const at = (name: string) => join(dir, name);
  await writePkgKeys({ ibePublic: at('pkg_ibe.pub'), ibeSecret: at('pkg_ibe.sec'), ibsPublic: at('pkg_ibs.pub'), ibsSecret: at('pkg_ibs.sec') }, generatePkgKeys());
  const buckets = args['redis-url'] === undefined ? (WORKERS > 1 ? 'buckets in the cluster primary' : 'buckets in the process') : 'buckets in Redis';
  console.log(`node ${process.version}; pg-pkg with ${WORKERS} worker(s), ${buckets}; ${CONNECTIONS} connections, ${DURATION} s per load; loopback`);

  const loads = (url: string, jwt: string): Load[] => [
    { name: 'GET /v2/parameters', url: `${url}/v2/parameters`, sensitive: false },
    {
      name: 'GET /v2/irma/key/{ts} (USK)',
      url: `${url}/v2/irma/key/${Math.floor(Date.now() / 1000) - 60}`,
      headers: { authorization: `Bearer ${jwt}` },
      sensitive: true,
    },
    {
      name: 'POST /v2/irma/sign/key',
      url: `${url}/v2/irma/sign/key`,
      method: 'POST',
      headers: { authorization: `Bearer ${jwt}`, 'content-type': 'application/json' },
      body: JSON.stringify({ pubSignId: [{ t: EMAIL }] }),
      sensitive: true,
    },
  ];

  // 1. Throughput, limits off.
  const open = await startPkg(dir, yivi.url, { PKG_RATELIMIT_DISABLED: 'true' });
  try {
    const jwt = await sessionJwt(open.url);
    const outcomes: Outcome[] = [];
    for (const load of loads(open.url, jwt)) {
      const o = await drive(load);
      outcomes.push(o);
      const bad = Object.keys(o.statuses).filter((c) => c !== '200');
      if (bad.length > 0 || o.errors > 0) failures.push(`${o.name} (limits off): statuses ${bad.join(',')} errors ${o.errors}`);
    }
    report('Throughput (rate limits disabled)', outcomes);
  } finally {
    await stopPkg(open);
  }

  // 2. Limits hold, defaults, one client address.
  const limited = await startPkg(dir, yivi.url, {});
  try {
    const jwt = await sessionJwt(limited.url);
    // The session setup spent some of this address's tokens: let them refill.
    await new Promise((resolve) => setTimeout(resolve, 6000));
    const outcomes: Outcome[] = [];
    const health: string[] = [];
    for (const load of loads(limited.url, jwt).slice(0, 2)) {
      const watcher = watchHealth(limited.url);
      const o = await drive(load);
      const h = await watcher.stop();
      outcomes.push(o);
      health.push(`${o.name}: /health ${h.polls} polls, ${h.failures} failures, worst ${h.worstMs.toFixed(0)} ms`);
      const other = Object.keys(o.statuses).filter((c) => c !== '200' && c !== '429');
      if (other.length > 0 || o.errors > 0 || o.timeouts > 0) failures.push(`${o.name} (limited): statuses ${other.join(',')} errors ${o.errors}`);
      if (h.failures > 0) failures.push(`${o.name}: /health failed ${h.failures} times under load`);
      const allowed = o.statuses['200'] ?? 0;
      const [rate, burst] = load.sensitive ? [2, 10] : [10, 50];
      const ceiling = burst + rate * (DURATION + 1);
      console.log(`  ${o.name}: ${allowed} allowed of ${o.total} (ceiling burst + rate × duration ≈ ${ceiling})`);
      if (allowed > ceiling) failures.push(`${o.name}: ${allowed} allowed, above ${ceiling}`);
      // Let this address's buckets refill before the next load.
      await new Promise((resolve) => setTimeout(resolve, 6000));
    }
    report('Limits hold (defaults, one client address)', outcomes);
    for (const line of health) console.log(`  ${line}`);
  } finally {
    await stopPkg(limited);
  }
} finally {
  yivi.app.server.closeAllConnections();
  await yivi.close();
  await rm(dir, { recursive: true, force: true });
}

if (failures.length > 0) {
  console.log(`\nFAILED:\n  ${failures.join('\n  ')}`);
  process.exitCode = 1;
} else {
  console.log('\nOK: no errors other than 429; limits held; /health answered throughout.');
}
