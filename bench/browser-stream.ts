/**
 * The streaming benchmark in Chromium: postguard-ts in its crypto worker (PostGuardWorker, streams
 * over its windowed MessagePort relay, as the product runs) beside @e4a/pg-wasm 0.5.10 in a worker of
 * the same page (bench/browser/bench.worker.ts, natively transferred streams), on the same keys and the same
 * ciphertext; both again on the main thread; and the format's limits in that browser: WebCrypto
 * AES-128-GCM over 262 256-byte segments with 1/4/8 in flight, our WebAssembly SHAKE128 transcript
 * (clone + 64-byte digest per 256 KiB), and both one after the other on one thread (Chromium runs
 * AES-GCM inside the subtle call, so that is what one thread can reach).
 *
 * Method. The page (bench/browser/) is built by Vite as an application would build it
 * (browserAlias, module workers), served by Vite's preview server on an ephemeral loopback port
 * and driven by Playwright; keys are made here in Node and passed in. Plaintext is generated as it
 * is read (fresh 64 KiB chunks). For decryption, the ciphertext is sealed once by our worker and
 * held in the page as 64 KiB chunks (256 MiB in memory: the only way not to time a source), then
 * fed to each library through a ReadableStream; sources and sinks live in the page for every case,
 * so worker cases pay the same thread crossings for both libraries. Every sink checks the byte count
 * and a sampled checksum against the generator's (same plaintext out of both libraries). A run ends
 * when the page's sink has closed. Time to first plaintext byte: from calling StreamUnsealer.new
 * (header parse and signature) to the first plaintext write reaching the page's sink (includes
 * decapsulation). Figures are medians of --repeats runs after a warm-up; limits are best of 3.
 * --variants adds ours with plumbing changes measured without touching worker/ (browser/main.ts).
 *
 *   npx tsx bench/browser-stream.ts                      256 MiB, 3 runs per case (median)
 *   npx tsx bench/browser-stream.ts --mib 64 --repeats 1 a quick look
 *   npx tsx bench/browser-stream.ts --only decrypt       decrypt | seal | limits
 *   npx tsx bench/browser-stream.ts --no-main            worker runs only
 *   npx tsx bench/browser-stream.ts --variants all       + ours with proposed plumbing changes:
 *                                                          ahead, port, relay, relay-copy, relay-batch, relay-aes
 *                                                          (browser/main.ts says what each one is)
 *   npx tsx bench/browser-stream.ts --chunk-kib 256      source chunk size (default 64)
 *   npx tsx bench/browser-stream.ts --window-kib 4096    bytes in flight each way in the relay variants (default 1024)
 *   npx tsx bench/browser-stream.ts --ref HEAD~3         lib/ and worker/ of a commit instead of the working tree
 *   npx tsx bench/browser-stream.ts --profile worker,main,seal:worker   + CPU profiles (CDP) of one
 *                                                          decrypt (or seal:) in each place named
 *   CHROMIUM=/path/to/chrome npx tsx bench/browser-stream.ts
 */
import { execFileSync } from 'node:child_process';
import { copyFile, cp, mkdir, rm, symlink, writeFile } from 'node:fs/promises';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { chromium, type Browser, type Page } from '@playwright/test';
import { build, preview } from 'vite';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from '../lib/keys.js';
import { browserAlias } from '../lib/build/bundles.js';
import type { LimitRun } from './browser/core.js';
import type { Bench, BenchKeys, DecryptRun, Impl, Plumbing, SealRun, Where } from './browser/main.js';
import { profileDuring, summarizeProfile } from './browser-profile.js';
import { chromiumLaunchOptions } from '../test/chromium.js';

const { values: args } = parseArgs({
  options: {
    mib: { type: 'string', default: '256' },
    repeats: { type: 'string', default: '3' },
    only: { type: 'string' },
    'no-main': { type: 'boolean', default: false },
    variants: { type: 'string', default: '' },
    'chunk-kib': { type: 'string', default: '64' },
    'window-kib': { type: 'string', default: '1024' },
    'ttfb-repeats': { type: 'string', default: '6' },
    ref: { type: 'string' },
    profile: { type: 'string' },
  },
});
const MIB = Number(args.mib);
const BYTES = MIB * 2 ** 20;
const REPEATS = Number(args.repeats);
const CHUNK = Number(args['chunk-kib']) * 1024;
const TTFB_REPEATS = Number(args['ttfb-repeats']);
if (!(MIB > 0) || !(REPEATS >= 1) || !(CHUNK > 0)) throw new Error('--mib, --repeats and --chunk-kib must be positive');
const wanted = (name: string) => !args.only || args.only.split(',').includes(name);
const VARIANTS = ['ahead', 'relay', 'relay-copy', 'relay-batch', 'relay-aes'] as const;
const variants = args.variants === 'all' ? [...VARIANTS] : (args.variants.split(',').filter(Boolean) as Where[]);
for (const v of variants) if (!(VARIANTS as readonly string[]).includes(v)) throw new Error(`unknown variant ${v}`);
const places: Where[] = ['worker', ...variants, ...(args['no-main'] ? [] : (['main'] as const))];
/** Profiles to take: 'worker', 'main', ... (a decrypt there) or 'seal:worker', ... */
const PROFILE = args.profile === undefined ? [] : args.profile.split(',');

const repo = fileURLToPath(new URL('..', import.meta.url));
const outDir = `${repo}tmp/bench-browser/`;
const PG_WASM = `${repo}node_modules/@e4a/pg-wasm/web/index_bg.wasm`;

/**
 * The sources to build the page from: the working tree, or (--ref) lib/ and worker/ of a commit,
 * exported with git archive beside this benchmark's own page files, so a figure can name its commit
 * while others edit the tree.
 */
async function sources(ref: string | undefined): Promise<{ root: string; shake: string; label: string }> {
  const git = (...argv: string[]) => execFileSync('git', ['-C', repo, ...argv], { encoding: 'utf8' }).trim();
  if (ref === undefined) {
    const dirty = git('status', '--porcelain', '--', 'lib', 'worker').split('\n').filter(Boolean).length;
    const label = `working tree at ${git('rev-parse', '--short', 'HEAD')}${dirty ? ` + ${dirty} uncommitted files in lib/ worker/` : ''}`;
    return { root: `${repo}bench/browser/`, shake: browserAlias['#shake'], label };
  }
  const sha = git('rev-parse', '--verify', `${ref}^{commit}`);
  const tree = `${repo}tmp/bench-src/${sha}/`;
  await rm(tree, { recursive: true, force: true });
  await mkdir(`${tree}bench`, { recursive: true });
  execFileSync('sh', ['-c', `git -C "${repo}" archive ${sha} lib worker | tar -x -C "${tree}"`]);
  await cp(`${repo}bench/browser`, `${tree}bench/browser`, { recursive: true });
  await cp(`${repo}bench/shake-core.ts`, `${tree}bench/shake-core.ts`);
  await symlink(`${repo}node_modules`, `${tree}node_modules`);
  return {
    root: `${tree}bench/browser/`,
    shake: `${tree}lib/crypto/shake-portable.ts`,
    label: `commit ${sha.slice(0, 7)} (${ref})`,
  };
}

function makeKeys(): BenchKeys {
  const kem = generateKemKeys();
  const ibs = generateSigningKeys();
  const ts = Math.floor(Date.now() / 1000);
  const email = 'pbdf.sidn-pbdf.email.email';
  const recipient = { ts, con: [{ t: email, v: 'alice@example.org' }] };
  const sender = { ts, con: [{ t: email, v: 'bob@example.org' }] };
  return {
    mpk: kem.mpk,
    vk: ibs.vk,
    rid: 'alice@example.org',
    usk: extractUsk(kem.msk, recipient),
    options: {
      policy: { 'alice@example.org': recipient },
      pubSignKey: { key: extractSigningKey(ibs.sk, sender), policy: sender },
    },
  };
}

async function buildPage(root: string, shake: string): Promise<void> {
  // The '#aes' seam sits beside '#shake' (commits before it never import it).
  const aes = shake.replace(/shake-portable\.ts$/, 'aes-portable.ts');
  await rm(outDir, { recursive: true, force: true });
  await build({
    configFile: false,
    root,
    logLevel: 'warn',
    resolve: { alias: { '#aes': aes, '#shake': shake } },
    worker: { format: 'es' },
    build: { outDir, emptyOutDir: true, target: 'es2022', minify: false, sourcemap: false },
  });
  // pg-wasm's web build fetches its module from a URL we give it: serve the package's own file.
  await mkdir(outDir, { recursive: true });
  await copyFile(PG_WASM, `${outDir}pg-wasm_bg.wasm`);
}

declare const bench: Bench;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const mbps = (bytes: number, ms: number) => bytes / 1e6 / (ms / 1000);

interface Row {
  name: string;
  unit: 'ms' | 'MB/s';
  ours?: number;
  theirs?: number;
  /** The limits this row is judged against (MB/s): the slower of AES-GCM and SHAKE128, and one thread's ceiling. */
  limit?: Limits;
}

interface Limits {
  /** The issue's definition: the slower of pipelined AES-GCM and the SHAKE128 transcript. */
  slower: number;
  /** AES-GCM and SHAKE128 one after the other on one thread (how Chromium runs WebCrypto). */
  serial: number;
}

let ciphertextHeld = false;

const LABEL: Record<Where, string> = {
  worker: 'worker',
  ahead: 'worker, streams buffered 1 MiB in the worker',
  relay: 'worker, windowed relay, cloned',
  'relay-copy': 'worker, windowed relay, copied + transferred',
  'relay-batch': 'worker, windowed relay, copied in 256 KiB batches + transferred',
  'relay-aes': 'worker, relay as relay-batch, AES-GCM on a 2nd worker',
  main: 'main thread',
};

function printTable(rows: Row[]): void {
  const fmt = (v: number | undefined, unit: string) =>
    v === undefined ? '' : unit === 'ms' ? `${v.toFixed(v < 100 ? 1 : 0)} ms` : `${v.toFixed(0)} MB/s`;
  const pct = (r: Row, of: number | undefined) =>
    of !== undefined && r.ours !== undefined && r.unit === 'MB/s' ? `${((100 * r.ours) / of).toFixed(0)}%` : '';
  const header = ['case', 'postguard-ts', 'pg-wasm', 'ratio', 'limit', 'ours %', 'one-thread ceiling', 'ours %'];
  const cells = rows.map((r) => {
    const ratio =
      r.ours === undefined || r.theirs === undefined
        ? ''
        : `${(r.unit === 'ms' ? r.theirs / r.ours : r.ours / r.theirs).toFixed(2)}x`;
    return [
      r.name,
      fmt(r.ours, r.unit),
      fmt(r.theirs, r.unit),
      ratio,
      r.limit ? fmt(r.limit.slower, 'MB/s') : '',
      pct(r, r.limit?.slower),
      r.limit ? fmt(r.limit.serial, 'MB/s') : '',
      pct(r, r.limit?.serial),
    ];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) => `| ${c.map((x, i) => x.padEnd(widths[i]!)).join(' | ')} |`;
  console.log(line(header));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const c of cells) console.log(line(c));
  console.log(
    'ratio > 1: postguard-ts is faster (MB/s) or quicker (ms). limit: the slower of WebCrypto AES-128-GCM (best in-flight depth)\n' +
      'and the SHAKE128 transcript, measured in the same context (worker rows: a worker; main rows: the page). one-thread\n' +
      'ceiling: both on one thread, as Chromium runs WebCrypto AES-GCM inside the subtle call.',
  );
}

async function measureLimits(
  page: Page,
  where: 'worker' | 'main',
): Promise<{ open: Limits; seal: Limits; runs: LimitRun[] }> {
  // 64 MiB per limit run, best of 3 interleaved rounds.
  const segments = Math.max(32, Math.round(Math.min(BYTES, 64 * 2 ** 20) / 262_256));
  const runs = await page.evaluate(([w, n, s]) => bench.limits(w, n, s, [1, 4, 8], 3), [
    where,
    segments,
    Math.min(BYTES, 64 * 2 ** 20),
  ] as const);
  const best = (prefix: string) => Math.max(...runs.filter((r) => r.name.startsWith(prefix)).map((r) => r.mbPerSecond));
  const shake = runs.find((r) => r.name.startsWith('SHAKE128'))!.mbPerSecond;
  const serial = runs.find((r) => r.name.startsWith('AES-GCM open + SHAKE128'))!.mbPerSecond;
  // Sealing has the same shape (hash, then AES-GCM seal, per segment); its serial ceiling follows from the two rates.
  const sealAes = best('WebCrypto AES-128-GCM seal');
  return {
    open: { slower: Math.min(best('WebCrypto AES-128-GCM open'), shake), serial },
    seal: { slower: Math.min(sealAes, shake), serial: 1 / (1 / sealAes + 1 / shake) },
    runs,
  };
}

async function decryptRows(page: Page, limits: Partial<Record<'worker' | 'main', { open: Limits }>>, rows: Row[]) {
  const full = await page.evaluate(([n, c]) => bench.prepare('full', n, c), [BYTES, CHUNK] as const);
  await page.evaluate(([n, c]) => bench.prepare('warm', n, c), [8 * 2 ** 20, CHUNK] as const);
  console.log(
    `ciphertext: ${full.ciphertextBytes} bytes, sealed once by our worker, held in the page as ${CHUNK / 1024} KiB chunks`,
  );
  for (const where of places) {
    const impls: Impl[] =
      where === 'worker' || where === 'main' || where === 'relay-batch' ? ['ours', 'pgwasm'] : ['ours'];
    const runs: Record<Impl, DecryptRun[]> = { ours: [], pgwasm: [] };
    for (const impl of impls) await page.evaluate(([i, w]) => bench.decrypt(i, w, 'warm'), [impl, where] as const);
    for (let r = 0; r < REPEATS; r++) {
      for (const impl of impls) {
        const result = await page.evaluate(([i, w]) => bench.decrypt(i, w, 'full'), [impl, where] as const);
        // Same plaintext on both sides: the byte count and a sampled checksum of the generator's bytes.
        if (result.bytes !== BYTES || result.checksum !== full.plainChecksum) {
          throw new Error(`${impl} in ${where}: plaintext ${result.checksum}, expected ${full.plainChecksum}`);
        }
        runs[impl].push(result);
      }
    }
    const label = LABEL[where];
    const ms = (impl: Impl, f: (r: DecryptRun) => number) =>
      runs[impl].length ? median(runs[impl].map(f)) : undefined;
    const rate = (impl: Impl) => {
      const m = ms(impl, (r) => r.ms);
      return m === undefined ? undefined : mbps(BYTES, m);
    };
    rows.push({
      name: `StreamUnsealer ${MIB} MiB (${label})`,
      unit: 'MB/s',
      ours: rate('ours'),
      theirs: rate('pgwasm'),
      limit: limits[where === 'main' ? 'main' : 'worker']?.open,
    });
    // The first byte depends only on the stream's start: more samples from the 8 MiB ciphertext, alternating.
    const starts: Record<Impl, DecryptRun[]> = { ours: [...runs.ours], pgwasm: [...runs.pgwasm] };
    for (let r = 0; r < TTFB_REPEATS; r++) {
      for (const impl of impls)
        starts[impl].push(await page.evaluate(([i, w]) => bench.decrypt(i, w, 'warm'), [impl, where] as const));
    }
    const start = (impl: Impl, f: (r: DecryptRun) => number) =>
      starts[impl].length ? median(starts[impl].map(f)) : undefined;
    rows.push({
      name: '  time to first plaintext byte',
      unit: 'ms',
      ours: start('ours', (r) => r.ttfbMs),
      theirs: start('pgwasm', (r) => r.ttfbMs),
    });
    rows.push({
      name: '  of which StreamUnsealer.new',
      unit: 'ms',
      ours: start('ours', (r) => r.newMs),
      theirs: start('pgwasm', (r) => r.newMs),
    });
    const detail = (impl: Impl) => runs[impl].map((r) => `${mbps(BYTES, r.ms).toFixed(0)} MB/s`).join(', ');
    const firsts = (impl: Impl) => starts[impl].map((r) => r.ttfbMs.toFixed(0)).join(', ');
    console.log(
      `decrypt, ${label}:\n  ours:    ${detail('ours')}; first byte ${firsts('ours')} ms` +
        (runs.pgwasm.length ? `\n  pg-wasm: ${detail('pgwasm')}; first byte ${firsts('pgwasm')} ms` : ''),
    );
  }
  await page.evaluate(() => bench.release('warm'));
  if (PROFILE.length === 0) await page.evaluate(() => bench.release('full'));
  else ciphertextHeld = true;
}

async function sealRows(page: Page, limits: Partial<Record<'worker' | 'main', { seal: Limits }>>, rows: Row[]) {
  for (const where of places) {
    const impls: Impl[] =
      where === 'worker' || where === 'main' || where === 'relay-batch' ? ['ours', 'pgwasm'] : ['ours'];
    const runs: Record<Impl, SealRun[]> = { ours: [], pgwasm: [] };
    for (const impl of impls)
      await page.evaluate(([i, w, c]) => bench.seal(i, w, 8 * 2 ** 20, c), [impl, where, CHUNK] as const);
    for (let r = 0; r < REPEATS; r++) {
      for (const impl of impls) {
        runs[impl].push(
          await page.evaluate(([i, w, n, c]) => bench.seal(i, w, n, c), [impl, where, BYTES, CHUNK] as const),
        );
      }
    }
    const sizes = [...new Set([...runs.ours, ...runs.pgwasm].map((r) => r.ciphertextBytes))];
    const rate = (impl: Impl) => (runs[impl].length ? mbps(BYTES, median(runs[impl].map((r) => r.ms))) : undefined);
    rows.push({
      name: `sealStream ${MIB} MiB (${LABEL[where]})`,
      unit: 'MB/s',
      ours: rate('ours'),
      theirs: rate('pgwasm'),
      limit: limits[where === 'main' ? 'main' : 'worker']?.seal,
    });
    const detail = (impl: Impl) => runs[impl].map((r) => `${mbps(BYTES, r.ms).toFixed(0)}`).join(', ');
    console.log(
      `seal, ${LABEL[where]}: ours ${detail('ours')} MB/s${runs.pgwasm.length ? `; pg-wasm ${detail('pgwasm')} MB/s` : ''}; ` +
        `ciphertext bytes ${sizes.join(' / ')}`,
    );
  }
}

/** Streams moved between the page and a worker with no crypto: what the plumbing alone allows. */
async function plumbingRows(page: Page, rows: Row[]) {
  const kib = `${CHUNK / 1024} KiB`;
  const cases: Array<[Plumbing, number, string]> = [
    ['in-transfer', CHUNK, `page -> worker, transferred ReadableStream, ${kib}`],
    ['in-relay-clone', CHUNK, `page -> worker, windowed relay, ${kib} cloned`],
    ['in-relay-copy', CHUNK, `page -> worker, windowed relay, ${kib} copied + transferred`],
    ['out-transfer', 262_144, 'worker -> page, transferred WritableStream, 256 KiB'],
    ['out-relay-clone', 262_144, 'worker -> page, windowed relay, 256 KiB cloned'],
    ['out-relay-transfer', 262_144, 'worker -> page, windowed relay, 256 KiB transferred'],
  ];
  for (const [kind, chunk, name] of cases) {
    await page.evaluate(([k, c]) => bench.plumbing(k, 8 * 2 ** 20, c), [kind, chunk] as const);
    const times: number[] = [];
    for (let r = 0; r < REPEATS; r++)
      times.push(await page.evaluate(([k, n, c]) => bench.plumbing(k, n, c), [kind, BYTES, chunk] as const));
    rows.push({ name: `plumbing only: ${name}`, unit: 'MB/s', ours: mbps(BYTES, median(times)) });
  }
}

async function run(browser: Browser, page: Page, keys: BenchKeys, label: string): Promise<void> {
  const window = Number(args['window-kib']) * 1024;
  const info = await page.evaluate(([k, url, w]) => bench.init(k, url, w), [keys, '/pg-wasm_bg.wasm', window] as const);
  console.log(`postguard-ts: ${label}; @e4a/pg-wasm 0.5.10 (web build)`);
  console.log(`Chromium ${browser.version()} (${info.userAgent})`);
  console.log(
    `${cpus().length} cores, load ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}; our worker's SHAKE128: ${info.shakeBackend}`,
  );
  console.log(
    `${MIB} MiB per run, ${CHUNK / 1024} KiB source chunks, median of ${REPEATS} (after a warm-up on 8 MiB); ` +
      `relay variants: ${window / 1024} KiB window\n`,
  );
  if (info.shakeBackend !== 'wasm') process.exitCode = 1;

  const rows: Row[] = [];
  const limits: Partial<Record<'worker' | 'main', Awaited<ReturnType<typeof measureLimits>>>> = {};
  if (wanted('limits') || wanted('decrypt') || wanted('seal')) {
    limits.worker = await measureLimits(page, 'worker');
    if (!args['no-main']) limits.main = await measureLimits(page, 'main');
  }
  if (wanted('decrypt')) await decryptRows(page, limits, rows);
  if (wanted('seal')) await sealRows(page, limits, rows);
  if (wanted('plumbing')) await plumbingRows(page, rows);
  // Measured again after the long runs; each limit keeps its best (the rows hold the same objects).
  for (const where of ['worker', 'main'] as const) {
    const before = limits[where];
    if (!before) continue;
    const after = await measureLimits(page, where);
    for (const op of ['open', 'seal'] as const) {
      before[op].slower = Math.max(before[op].slower, after[op].slower);
      before[op].serial = Math.max(before[op].serial, after[op].serial);
    }
    before.runs = before.runs.map((r) => {
      const again = after.runs.find((a) => a.name === r.name);
      return again && again.mbPerSecond > r.mbPerSecond ? again : r;
    });
  }
  console.log(
    `load at the end: ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}`,
  );
  for (const where of ['worker', 'main'] as const) {
    for (const r of limits[where]?.runs ?? [])
      rows.push({ name: `limit (${where}): ${r.name}`, unit: 'MB/s', ours: r.mbPerSecond });
  }
  console.log('');
  printTable(rows);

  for (const entry of PROFILE) {
    const [op, where] = (entry.includes(':') ? entry.split(':') : ['decrypt', entry]) as ['decrypt' | 'seal', Where];
    if (!(op === 'decrypt' || op === 'seal') || !(where in LABEL)) throw new Error(`--profile: unknown entry ${entry}`);
    if (op === 'decrypt' && !ciphertextHeld)
      await page.evaluate(([n, c]) => bench.prepare('full', n, c), [BYTES, CHUNK] as const);
    if (op === 'decrypt') ciphertextHeld = true;
    const worker =
      where === 'ahead'
        ? 'bench-ours-ahead'
        : where === 'relay-aes'
          ? 'bench-ours-relay-aes'
          : where.startsWith('relay')
            ? 'bench-ours-relay'
            : 'postguard-crypto';
    // The crypto worker's nested hashing worker, when the browser lists it as a target of its own.
    const targets =
      where === 'main' ? ['page'] : [worker, 'page', ...(worker === 'postguard-crypto' ? ['?postguard-hash'] : [])];
    console.log(`\nCPU profile: one ${op} of ${MIB} MiB, postguard-ts (${LABEL[where]})`);
    const { profiles, value } = await profileDuring(browser, page, targets, (): Promise<{ ms: number }> =>
      op === 'seal'
        ? page.evaluate(([w, n, c]) => bench.seal('ours', w, n, c), [where, BYTES, CHUNK] as const)
        : page.evaluate((w) => bench.decrypt('ours', w, 'full'), where),
    );
    console.log(`(this run: ${mbps(BYTES, value.ms).toFixed(0)} MB/s while profiling)`);
    for (const [name, profile] of profiles) {
      const file = `${outDir}${op}-${where}-${name}.cpuprofile`;
      await writeFile(file, JSON.stringify(profile));
      console.log(`\n${name} (${file}):`);
      for (const line of summarizeProfile(profile, 16)) console.log(`  ${line}`);
    }
  }
}

const keys = makeKeys();
const tree = await sources(args.ref);
await buildPage(tree.root, tree.shake);
const server = await preview({
  configFile: false,
  root: tree.root,
  logLevel: 'warn',
  build: { outDir },
  preview: { host: '127.0.0.1', port: 0, strictPort: true },
});
const address = server.httpServer.address();
if (typeof address !== 'object' || address === null) throw new Error('the preview server has no port');
const browser = await chromium.launch(chromiumLaunchOptions);
try {
  const page = await browser.newPage();
  page.on('pageerror', (e) => console.error('page error:', e));
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') console.error(`page ${m.type()}: ${m.text()}`);
  });
  await page.goto(`http://127.0.0.1:${address.port}/`);
  await page.waitForFunction(() => 'bench' in globalThis);
  await run(browser, page, keys, tree.label);
} finally {
  await browser.close();
  await server.close();
}
