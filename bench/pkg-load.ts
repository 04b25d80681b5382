/**
 * Load test of the PKG on loopback (not part of the test run; about 40 s).
 *
 *   npm run bench:pkg [-- --duration=5] [--connections=50] [--workers=1] [--redis-url=redis://…] [--limits]
 *
 * The PKG runs as its own process (`pg-pkg server`, as deployed) in front of the stand-in identity
 * server; autocannon drives it from this process.
 *
 *   1. Throughput, rate limits disabled: GET /v2/parameters, and key issuance (GET key/{ts} with a
 *      real session JWT: JWT check + USK extraction), quiet.
 *   2. The same under attack: 1,000 sockets that trickle their headers (reopened when the PKG cuts
 *      them at its headers deadline), and a status-event flood: 250 client addresses (X-Forwarded-For
 *      through a trusted proxy, 127.0.0.1) each trying to hold 12 streams on a handful of sessions,
 *      retrying every second when refused, so that both the per-client cap (10) and the total one
 *      (2000) refuse. The attack runs in a process of its own. Printed: req/s under attack as a share
 *      of quiet req/s (target ≥ 80 %).
 *   3. With --limits: limits hold, default limits (10/s burst 50; key-issuing 2/s burst 10): the same
 *      load from one client address. Expected: no errors other than 429, allowed requests close to
 *      burst + rate × duration, and /health answering quickly throughout.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { request as httpRequest, type ClientRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createRequire } from 'node:module';
import { generatePkgKeys } from '../lib/keys.js';
import { writePkgKeys } from '../server/keyfiles.js';
import { startStandin } from '../devtools/standin/testing.js';
import { disclose } from '../devtools/standin/wallet.js';

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
    duration: { type: 'string', default: '5' },
    connections: { type: 'string', default: '50' },
    workers: { type: 'string', default: '1' },
    'redis-url': { type: 'string' },
    limits: { type: 'boolean', default: false },
    /** Internal: run only the attack against this PKG, in this (child) process. */
    attack: { type: 'string' },
  },
});
const SLOW_SOCKETS = 1000;
const FLOOD_CLIENTS = 250;
const FLOOD_STREAMS_PER_CLIENT = 12;
const FLOOD_SESSIONS = 5;
const TARGET_RATIO = 0.8;
const DURATION = Number(args.duration);
const CONNECTIONS = Number(args.connections);
const WORKERS = Number(args.workers);
const EMAIL = 'irma-demo.sidn-pbdf.email.email';
const MAIN = fileURLToPath(new URL('../server/main.ts', import.meta.url));
const TSX = new URL('../node_modules/tsx/dist/loader.mjs', import.meta.url).href;
// The PKG runs from a temporary folder: point tsx at the repo's tsconfig.json, so it sees the
// library's sources (as the tests do), never a missing or stale lib/dist.
const TSCONFIG = fileURLToPath(new URL('../tsconfig.json', import.meta.url));

interface Pkg {
  url: string;
  child: ChildProcess;
}

async function startPkg(dir: string, yiviUrl: string, env: Record<string, string>, extra: string[] = []): Promise<Pkg> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      TSX,
      MAIN,
      'server',
      '-H',
      '127.0.0.1',
      '-p',
      '0',
      '-i',
      yiviUrl,
      '--allowed-origins',
      '*',
      '--workers',
      String(WORKERS),
      ...extra,
    ],
    {
      cwd: dir,
      env: {
        ...process.env,
        TSX_TSCONFIG_PATH: TSCONFIG,
        LOG_LEVEL: 'error',
        ...(args['redis-url'] === undefined ? {} : { PKG_REDIS_URL: args['redis-url'] }),
        ...env,
      },
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

/** A session token nobody answers for a while: something to hold status-event streams on. */
async function pendingSession(pkgUrl: string): Promise<string> {
  const response = await fetch(`${pkgUrl}/v2/irma/start`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ con: [{ t: EMAIL }], validity: 3600 }),
  });
  return ((await response.json()) as { token: string }).token;
}

interface Attack {
  /** What the attack holds right now. */
  snapshot(): { slowSockets: number; streams: number; refused: number; reopened: number };
  stop(): void;
}

/**
 * 1,000 sockets that send a request line and then one header byte every second or so, reopened when
 * the PKG cuts them (headers deadline); and a status-event flood that tries to hold
 * FLOOD_CLIENTS × FLOOD_STREAMS_PER_CLIENT streams, retrying refused ones every second.
 */
async function startAttack(pkgUrl: string): Promise<Attack> {
  const { hostname, port } = new URL(pkgUrl);
  let running = true;
  let reopened = 0;
  let refused = 0;
  const slow = new Set<Socket>();
  const openSlow = (): void => {
    if (!running) return;
    const socket = connect(Number(port), hostname);
    socket.on('error', () => undefined);
    socket.once('connect', () => socket.write('GET /v2/parameters HTTP/1.1\r\nHost: pkg\r\nX-Slow: '));
    socket.once('close', () => {
      slow.delete(socket);
      reopened++;
      setTimeout(openSlow, 100);
    });
    socket.resume();
    slow.add(socket);
  };
  for (let i = 0; i < SLOW_SOCKETS; i++) openSlow();
  // One header byte per socket about every second, spread over ten ticks.
  let tick = 0;
  const trickle = setInterval(() => {
    let i = 0;
    for (const socket of slow) if (i++ % 10 === tick % 10 && socket.writable) socket.write('a');
    tick++;
  }, 100);

  const tokens = await Promise.all(Array.from({ length: FLOOD_SESSIONS }, () => pendingSession(pkgUrl)));
  /** Requests in flight (for stop) and streams the PKG accepted (for the report). */
  const inflight = new Set<ClientRequest>();
  const held = new Set<ClientRequest>();
  const again = (client: string, token: string) => setTimeout(() => hold(client, token), 1000);
  const hold = (client: string, token: string): void => {
    if (!running) return;
    const req = httpRequest(
      `${pkgUrl}/v2/irma/statusevents/${token}`,
      { agent: false, headers: { 'x-forwarded-for': client } },
      (res) => {
        res.resume();
        if (res.statusCode !== 200) refused++;
        else held.add(req);
        res.once('close', () => {
          inflight.delete(req);
          held.delete(req);
          if (running) again(client, token);
        });
      },
    );
    req.on('error', () => undefined);
    inflight.add(req);
    req.end();
  };
  for (let c = 0; c < FLOOD_CLIENTS; c++) {
    const client = `198.18.${c >> 8}.${c & 0xff}`;
    for (let s = 0; s < FLOOD_STREAMS_PER_CLIENT; s++) hold(client, tokens[(c + s) % tokens.length]!);
  }
  return {
    snapshot: () => ({ slowSockets: slow.size, streams: held.size, refused, reopened }),
    stop() {
      running = false;
      clearInterval(trickle);
      for (const socket of slow) socket.destroy();
      for (const req of inflight) req.destroy();
    },
  };
}

/**
 * The attack in a process of its own, so that its work does not slow down autocannon (which shares
 * this process): what is measured is the PKG, not the load generator.
 */
async function startAttackProcess(
  pkgUrl: string,
): Promise<{ snapshot(): Promise<ReturnType<Attack['snapshot']>>; stop(): Promise<void> }> {
  const child = spawn(process.execPath, ['--import', TSX, fileURLToPath(import.meta.url), `--attack=${pkgUrl}`], {
    env: { ...process.env, TSX_TSCONFIG_PATH: TSCONFIG },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const ask = () =>
    new Promise<ReturnType<Attack['snapshot']>>((resolve) => {
      child.once('message', (m) => resolve(m as ReturnType<Attack['snapshot']>));
      child.send('snapshot');
    });
  await new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    child.once('exit', (code) => reject(new Error(`the attack process exited ${code}`)));
  });
  return {
    snapshot: ask,
    async stop() {
      child.kill('SIGTERM');
      await exited;
    },
  };
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

async function drive(load: Load, connections = CONNECTIONS, duration = DURATION): Promise<Outcome> {
  const result = await autocannon({
    url: load.url,
    method: load.method ?? 'GET',
    headers: load.headers ?? {},
    ...(load.body === undefined ? {} : { body: load.body }),
    connections,
    duration,
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
    const statuses = Object.entries(o.statuses)
      .map(([c, n]) => `${c}×${n}`)
      .join(' ');
    const extra = o.errors + o.timeouts > 0 ? `  errors ${o.errors} timeouts ${o.timeouts}` : '';
    console.log(
      `${o.name.padEnd(34)} ${o.rps.toFixed(0).padStart(9)} ${String(o.p50).padStart(7)} ${String(o.p99).padStart(7)}  ${statuses}${extra}`,
    );
  }
}

if (args.attack !== undefined) {
  // The child side of startAttackProcess.
  const attack = await startAttack(args.attack);
  process.on('message', () => process.send?.(attack.snapshot()));
  process.once('SIGTERM', () => {
    attack.stop();
    process.exit(0);
  });
  process.send?.('ready');
  await new Promise(() => undefined);
}

const dir = await mkdtemp(join(tmpdir(), 'pg-pkg-load-'));
const yivi = await startStandin({ sweepIntervalMs: 0 });
const failures: string[] = [];
try {
  const at = (name: string) => join(dir, name);
  await writePkgKeys(
    {
      ibePublic: at('pkg_ibe.pub'),
      ibeSecret: at('pkg_ibe.sec'),
      ibsPublic: at('pkg_ibs.pub'),
      ibsSecret: at('pkg_ibs.sec'),
    },
    generatePkgKeys(),
  );
  const buckets =
    args['redis-url'] === undefined
      ? WORKERS > 1
        ? 'buckets in the cluster primary'
        : 'buckets in the process'
      : 'buckets in Redis';
  console.log(
    `node ${process.version}; pg-pkg with ${WORKERS} worker(s), ${buckets}; ${CONNECTIONS} connections, ${DURATION} s per load; loopback`,
  );

  const loads = (url: string, jwt: string): Load[] => [
    { name: 'GET /v2/parameters', url: `${url}/v2/parameters`, sensitive: false },
    {
      name: 'GET /v2/irma/key/{ts} (USK)',
      url: `${url}/v2/irma/key/${Math.floor(Date.now() / 1000) - 60}`,
      headers: { authorization: `Bearer ${jwt}` },
      sensitive: true,
    },
  ];

  // 1 and 2. Throughput with limits off, quiet and under attack. The trusted proxy lets the flood
  // come from many client addresses, so the stream caps per client and in all both come into play.
  const open = await startPkg(dir, yivi.url, { PKG_RATELIMIT_DISABLED: 'true' }, ['--trusted-proxies', '127.0.0.1']);
  try {
    const jwt = await sessionJwt(open.url);
    // A second of each load first, unreported: JIT and caches warm, so quiet is not measured cold.
    for (const load of loads(open.url, jwt)) await drive(load, CONNECTIONS, 1);
    const quiet: Outcome[] = [];
    for (const load of loads(open.url, jwt)) quiet.push(await drive(load));
    report('Throughput, quiet (rate limits disabled)', quiet);

    const attack = await startAttackProcess(open.url);
    // Let the sockets connect and the streams settle before measuring.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    const before = await attack.snapshot();
    const attacked: Outcome[] = [];
    const health = watchHealth(open.url);
    for (const load of loads(open.url, jwt)) attacked.push(await drive(load));
    const h = await health.stop();
    const after = await attack.snapshot();
    await attack.stop();
    report(
      `Throughput under attack: ${SLOW_SOCKETS} slow-header sockets, status-event flood (${FLOOD_CLIENTS} clients × ${FLOOD_STREAMS_PER_CLIENT} streams)`,
      attacked,
    );
    console.log(
      `  attack: ${after.slowSockets} slow sockets open (${after.reopened} reopened after the headers deadline), ` +
        `${before.streams}→${after.streams} streams held, ${after.refused} streams refused (429); ` +
        `/health ${h.polls} polls, ${h.failures} failures, worst ${h.worstMs.toFixed(0)} ms`,
    );
    console.log('\nUnder attack / quiet (target ≥ 80 %)');
    for (const [i, q] of quiet.entries()) {
      const a = attacked[i]!;
      const ratio = a.rps / q.rps;
      console.log(
        `  ${q.name.padEnd(34)} ${q.rps.toFixed(0).padStart(7)} → ${a.rps.toFixed(0).padStart(7)} req/s  ${(ratio * 100).toFixed(0).padStart(4)} %${ratio < TARGET_RATIO ? '  BELOW TARGET' : ''}`,
      );
      if (ratio < TARGET_RATIO)
        failures.push(`${q.name}: ${(ratio * 100).toFixed(0)} % of quiet throughput under attack`);
    }
    for (const o of [...quiet, ...attacked]) {
      const bad = Object.keys(o.statuses).filter((c) => c !== '200');
      if (bad.length > 0 || o.errors > 0) failures.push(`${o.name}: statuses ${bad.join(',')} errors ${o.errors}`);
    }
    if (h.failures > 0) failures.push(`/health failed ${h.failures} times under attack`);
  } finally {
    await stopPkg(open);
  }

  // The limits phase takes another half minute: only with --limits.
  if (args.limits) {
    // 3. Limits hold, defaults, one client address.
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
        if (other.length > 0 || o.errors > 0 || o.timeouts > 0)
          failures.push(`${o.name} (limited): statuses ${other.join(',')} errors ${o.errors}`);
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
  console.log(
    '\nOK: no errors; throughput under attack on target; /health answered throughout' +
      (args.limits ? '; limits held.' : '.'),
  );
}
