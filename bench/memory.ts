/**
 * npm run bench:memory: a 1 GiB file through the storage stand-in with `postguard-ts/client`,
 * memory sampled throughout (issue 23: flat memory while sending and receiving). Too slow for CI.
 *
 *   Node     upload (`encrypt({ data }).upload()`, API key) and download + decrypt
 *            (`open({ uuid }).decrypt({ output: 'stream' })`) in this process: RSS, V8 heap and
 *            ArrayBuffers sampled every 100 ms, peak against the baseline before the phase
 *   Chromium the same two in a page (bench/memory-page/, the client with its crypto worker; the
 *            upload sealed into the Origin Private File System first, as a page's upload is, so
 *            that it can resume): the renderer processes' RSS (the page and its workers share
 *            one) from /proc, and the page's JS heap (CDP Performance.getMetrics)
 *
 * The fake PKG (client/testing.ts) and the storage stand-in run in a child process, so this
 * process's figures are the client's alone. The page reaches the PKG through the preview server's
 * proxy (the fake PKG sends no CORS headers) and the storage stand-in directly, cross-origin.
 *
 *   npm run bench:memory                       1 GiB, Node then Chromium
 *   npm run bench:memory -- --mib 64 --skip-browser
 *   npm run bench:memory -- --mib 256 --skip-node   Chromium only
 *   npm run bench:memory -- --mib 256 --skip-node --stages seal,seal+opfs,seal+sync,seal-then-put,upload
 *                                              what each stage of a page's send costs alone
 *   npm run bench:memory -- --mib 256 --skip-node --stages fetch,receive
 *                                              a page's receive beside the plain fetch of its ciphertext
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { chromium } from '@playwright/test';
import { build, preview } from 'vite';
import { PostGuard } from '../client/index.js';
import { FAKE_JWT_PREFIX } from '../client/testing.js';
import { postguardFromSources } from '../lib/build/bundles.js';
import { sourceAliases } from '../scripts/source-aliases.js';
import { chromiumLaunchOptions } from '../test/chromium.js';
import type { MemoryPage, SendStage, stage } from './memory-page/main.js';
import { plaintext, startTransferStack } from './storage-transfer.js';

const BOB = 'bob@example.com';
const STAGES: readonly SendStage[] = ['seal', 'seal+opfs', 'seal+sync', 'seal-then-put', 'upload', 'fetch', 'receive'];
const MiB = 1024 * 1024;
/** The whole run's way out: a stuck service fails the run instead of hanging it. */
const RUN_MS = 60 * 60 * 1000;

interface Services {
  pkgUrl: string;
  storageUrl: string;
  apiKey: string;
  /** The stack's process (the fake PKG and the storage stand-in). */
  pid: number;
}

/** User and system CPU seconds a process of this machine has used (from /proc). */
function cpuSecondsOf(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** The child's role: start the stack, print its URLs as one JSON line, stay up until stdin closes. */
async function serve(): Promise<void> {
  const stack = await startTransferStack();
  const services: Services = {
    pkgUrl: stack.pkg.url,
    storageUrl: stack.storage.url,
    apiKey: stack.pkg.apiKey,
    pid: process.pid,
  };
  process.stdout.write(`${JSON.stringify(services)}\n`);
  process.stdin.resume();
  await new Promise((resolve) => process.stdin.once('end', resolve));
  await stack.close();
}

interface Sample {
  rss: number;
  heap: number;
  buffers: number;
}

const nodeSample = (): Sample => {
  const m = process.memoryUsage();
  return { rss: m.rss, heap: m.heapUsed, buffers: m.arrayBuffers + m.external };
};

/** What a phase's sampling found: the baseline just before, the peak of each figure, and RSS peaks by quarter. */
interface Sampled<T> {
  result: T;
  ms: number;
  base: Sample;
  peak: Sample;
  /** The peak RSS in each quarter of the phase's duration: flat memory keeps these level. */
  quarters: number[];
}

/** Runs `f`, sampling `sample` every 100 ms. */
async function sampled<T>(sample: () => Sample | Promise<Sample>, f: () => Promise<T>): Promise<Sampled<T>> {
  const base = await sample();
  const peak = { ...base };
  const series: Array<{ at: number; rss: number }> = [];
  const t = performance.now();
  const take = async () => {
    const s = await sample();
    series.push({ at: performance.now() - t, rss: s.rss });
    for (const k of ['rss', 'heap', 'buffers'] as const) peak[k] = Math.max(peak[k], s[k]);
  };
  // Samples are chained, so a slow CDP answer delays the next one instead of overlapping it.
  let taking = Promise.resolve();
  const timer = setInterval(() => {
    taking = taking.then(take, take);
  }, 100);
  try {
    const result = await f();
    const ms = performance.now() - t;
    clearInterval(timer);
    await taking;
    await take();
    const quarters = [0, 1, 2, 3].map((q) =>
      Math.max(base.rss, ...series.filter((s) => Math.min(3, Math.floor((4 * s.at) / ms)) === q).map((s) => s.rss)),
    );
    return { result, ms, base, peak, quarters };
  } finally {
    clearInterval(timer);
  }
}

const load = () => `load ${loadavg()[0]!.toFixed(1)}`;
const mib = (bytes: number) => `${(bytes / MiB).toFixed(0)} MiB`;

function row(what: string, bytes: number, run: Sampled<unknown>, figures: string[]) {
  const cells = figures.map(
    (k) =>
      `${k} ${mib(run.base[k as keyof Sample])} → ${mib(run.peak[k as keyof Sample])} (+${mib(run.peak[k as keyof Sample] - run.base[k as keyof Sample])})`,
  );
  console.log(`${what}: ${(bytes / 1e6 / (run.ms / 1000)).toFixed(0)} MB/s, ${cells.join(', ')}`);
  console.log(`  peak RSS by quarter of the run: ${run.quarters.map((q) => mib(q)).join(' / ')}`);
}

/** The renderer processes' resident memory, from /proc (a page and its dedicated workers share one). */
function rssOf(pids: number[]): number {
  let total = 0;
  for (const pid of pids) {
    const line = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    if (line !== null) total += Number(line[1]) * 1024;
  }
  return total;
}

async function inChromium(services: Services, bytes: number, stages?: SendStage[]): Promise<void> {
  const root = fileURLToPath(new URL('./memory-page/', import.meta.url));
  const outDir = fileURLToPath(new URL('../tmp/bench-memory-page/', import.meta.url));
  await build({
    configFile: false,
    root,
    logLevel: 'error',
    resolve: { alias: sourceAliases('portable') },
    worker: { format: 'es' },
    plugins: [postguardFromSources()],
    build: { outDir, emptyOutDir: true, target: 'es2022' },
  });
  const server = await preview({
    configFile: false,
    root,
    logLevel: 'warn',
    build: { outDir },
    preview: {
      host: '127.0.0.1',
      port: 0,
      strictPort: true,
      proxy: { '/pkg': { target: services.pkgUrl, rewrite: (path) => path.slice('/pkg'.length) } },
    },
  });
  // A profile on disk, as a user's is: a context of its own (Playwright's default) is off the record,
  // and Chromium keeps an off-the-record origin's private file system in the browser's memory.
  const profile = mkdtempSync(join(tmpdir(), 'pg-bench-profile-'));
  const context = await chromium.launchPersistentContext(profile, chromiumLaunchOptions);
  const browser = context.browser()!;
  try {
    const address = server.httpServer.address();
    if (typeof address !== 'object' || address === null) throw new Error('the preview server has no port');
    const origin = `http://127.0.0.1:${address.port}`;
    const page = context.pages()[0] ?? (await context.newPage());
    await page.goto(`${origin}/`);
    await page.waitForFunction(() => document.body.dataset['ready'] === 'true', null, { timeout: 60_000 });
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Performance.enable');
    const system = await browser.newBrowserCDPSession();
    const renderers = async () => {
      const { processInfo } = (await system.send('SystemInfo.getProcessInfo')) as {
        processInfo: Array<{ type: string; id: number }>;
      };
      return processInfo.filter((p) => p.type === 'renderer').map((p) => p.id);
    };
    const pids = await renderers();
    const sample = async (): Promise<Sample> => {
      const { metrics } = await cdp.send('Performance.getMetrics');
      const heap = metrics.find((m) => m.name === 'JSHeapUsedSize')?.value ?? 0;
      return { rss: rssOf(pids), heap, buffers: 0 };
    };
    const call = <K extends keyof MemoryPage>(name: K, args: Parameters<MemoryPage[K]>[0]) =>
      page.evaluate(
        ([name, args]) =>
          (globalThis as unknown as { memoryPage: MemoryPage }).memoryPage[name](args as never) as Promise<
            string | number
          >,
        [name, args] as const,
      );
    const services_ = { pkgUrl: `${origin}/pkg`, cryptifyUrl: services.storageUrl };
    if (stages !== undefined) {
      // CPU seconds by process type (Chromium's count) and the stand-in's: on a shared machine the
      // wall clock says how busy the others were, the CPU time what a stage costs.
      const cpu = async () => {
        const { processInfo } = (await system.send('SystemInfo.getProcessInfo')) as {
          processInfo: Array<{ type: string; cpuTime: number }>;
        };
        const by: Record<string, number> = { standIn: cpuSecondsOf(services.pid) };
        for (const p of processInfo) by[p.type] = (by[p.type] ?? 0) + p.cpuTime;
        return by;
      };
      for (const which of stages) {
        const before = await cpu();
        const { ms } = await page.evaluate((a) => (globalThis as unknown as { stage: typeof stage }).stage(a), {
          ...services_,
          bytes,
          jwt: services.apiKey,
          readerJwt: `${FAKE_JWT_PREFIX}${BOB}`,
          stage: which,
        });
        const after = await cpu();
        const spent = Object.entries(after)
          .map(([type, s]) => `${type} ${(s - (before[type] ?? 0)).toFixed(1)}`)
          .join(', ');
        console.log(
          `Chromium ${which} ${mib(bytes)}: ${(bytes / 1e6 / (ms / 1000)).toFixed(1)} MB/s (${load()}); CPU s: ${spent}`,
        );
      }
      return;
    }
    const what = `renderer RSS over ${pids.length} process(es), page JS heap`;
    const sent = await sampled(sample, () => call('send', { ...services_, bytes, jwt: services.apiKey }));
    row(`Chromium upload ${mib(bytes)} (sealed into OPFS as it is sent; ${what})`, bytes, sent, ['rss', 'heap']);
    const split = await page.evaluate(
      () => (globalThis as unknown as { lastSend: { sealedMs: number; totalMs: number } }).lastSend,
    );
    console.log(
      `  sealing ended after ${(split.sealedMs / 1000).toFixed(1)} s of ${(split.totalMs / 1000).toFixed(1)} s`,
    );
    const got = await sampled(sample, () =>
      call('receive', { ...services_, uuid: sent.result as string, jwt: `${FAKE_JWT_PREFIX}${BOB}` }),
    );
    if ((got.result as number) < bytes)
      throw new Error(`the page read ${got.result} bytes, expected at least ${bytes}`);
    row(`Chromium download + decrypt ${mib(bytes)} (${what})`, bytes, got, ['rss', 'heap']);
  } finally {
    await context.close();
    await server.close();
    rmSync(profile, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      serve: { type: 'boolean', default: false },
      mib: { type: 'string', default: '1024' },
      'skip-browser': { type: 'boolean', default: false },
      'skip-node': { type: 'boolean', default: false },
      stages: { type: 'string' },
    },
  });
  if (values.serve) return serve();
  const bytes = Number(values.mib) * MiB;
  if (!Number.isInteger(bytes) || bytes <= 0) throw new Error('--mib: a positive whole number');

  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--serve'], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const deadline = setTimeout(() => {
    console.error('bench:memory: over its time limit');
    child.kill('SIGKILL');
    process.exit(1);
  }, RUN_MS);
  try {
    const lines = createInterface({ input: child.stdout! });
    const first = await new Promise<string>((resolve, reject) => {
      lines.once('line', resolve);
      child.once('exit', (code) => reject(new Error(`the stack exited (${code}) before it started`)));
    });
    const services = JSON.parse(first) as Services;
    console.log(`postguard-ts/client, ${mib(bytes)} through the storage stand-in — Node ${process.version}`);

    const pg = new PostGuard({ pkgUrl: services.pkgUrl, cryptifyUrl: services.storageUrl, allowInsecureUrls: true });
    const upload = (n: number) =>
      pg
        .encrypt({ data: plaintext(n), recipients: [pg.recipient.email(BOB)], sign: pg.sign.apiKey(services.apiKey) })
        .upload({ signal: AbortSignal.timeout(RUN_MS) });
    const download = async (uuid: string) => {
      const result = await pg
        .open({ uuid, signal: AbortSignal.timeout(RUN_MS) })
        .decrypt({ output: 'stream', session: async () => `${FAKE_JWT_PREFIX}${BOB}` });
      if (result.output !== 'stream') throw new Error(`expected a stream, got ${result.output}`);
      // The plaintext is the ZIP the upload wrapped the data in: a little over `bytes`.
      let n = 0;
      const reader = result.readable.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        n += value.length;
      }
      await result.sender;
      return n;
    };
    if (!values['skip-node']) {
      // A small round first, so the baselines include the code and the keys, not the first use.
      await download((await upload(8 * MiB)).uuid);
      (globalThis as { gc?: () => void }).gc?.();

      const up = await sampled(nodeSample, () => upload(bytes));
      row(`Node upload ${mib(bytes)}`, bytes, up, ['rss', 'heap', 'buffers']);
      (globalThis as { gc?: () => void }).gc?.();
      const down = await sampled(nodeSample, () => download(up.result.uuid));
      if (down.result < bytes) throw new Error(`read ${down.result} bytes, expected at least ${bytes}`);
      row(`Node download + decrypt ${mib(bytes)}`, bytes, down, ['rss', 'heap', 'buffers']);
    }

    const stages = values.stages?.split(',').map((s) => {
      if (!STAGES.includes(s as SendStage)) throw new Error(`--stages: ${s}? (${STAGES.join(', ')})`);
      return s as SendStage;
    });
    if (!values['skip-browser']) await inChromium(services, bytes, stages);
  } finally {
    clearTimeout(deadline);
    child.stdin!.end();
  }
}

await main();
