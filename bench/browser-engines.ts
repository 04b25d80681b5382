/**
 * npm run bench:browser: postguard-ts in Chromium, Firefox ESR and WebKitGTK, one body for all
 * three (e2e/engines/driver.ts: one driver per engine), one table per engine.
 *
 *   stream  our crypto worker (postguard-ts/worker) sealing and unsealing a stream, beside
 *           @e4a/pg-wasm 0.5.10's sealStream / StreamUnsealer in a worker of the same page and on
 *           its main thread; time to first plaintext byte.
 *   sw      a sealed file fetched through our decrypting service worker (postguard-ts/sw:
 *           registerDecryptingServiceWorker, prepareDownload), with its defaults (verifyFirst) and
 *           with verifyFirst false, beside the same plaintext fetched from a Blob URL: throughput,
 *           ratio (the decrypter's overhead) and time to first byte.
 *
 * The page (bench/browser/engines.html) is built by Vite as an app would build it, importing only
 * the public entries (postguard-ts/worker, postguard-ts/sw; the postguard() Vite plugin emits
 * /postguard-sw.js from the sources), and served by Vite's preview server on a loopback port.
 * Every figure is the median of REPEATS runs after a warm-up (8 MiB); sides alternate run by run.
 * Every run's output is checked (byte count and a sampled checksum of the plaintext).
 *
 *   npm run bench:browser
 *   npm run bench:browser -- --engines firefox,webkit --cases sw --sw-mib 64 --repeats 1
 *   ENGINES=chromium CASES=stream STREAM_MIB=256 REPEATS=5 npm run bench:browser
 *
 * Options (or the environment variable in capitals): --engines (chromium,firefox,webkit),
 * --cases (stream,sw), --stream-mib (64), --sw-mib (256), --repeats (3), --chunk-kib (64), --sw-kinds
 * (the downloads), --pipe-chunks-kib and --pipe-hwm (the pipe's variants), --pipe-forms (pull; the
 * forms of response body the pipe is also measured in, every one with every variant, interleaved:
 * pull,push,bytes,byob,transform,blob,blob-parts,blob-stream,buffer,cache; bench/browser/public/pipe-sw.js
 * says what each is), --ref (a
 * commit whose lib/ and worker/ to build instead of the working tree, e.g. HEAD).
 * Each engine is launched, run and closed in turn; one that fails prints its error (and the rows it
 * had) and the others still run; the exit status is then 1. Every wait has a timeout.
 */
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ENGINES, launch, type Engine, type EngineBrowser, type EnginePage } from '../e2e/engines/driver.js';
import type {
  DownloadKind,
  DownloadRun,
  EnginesBench,
  PipeForm,
  PipeRun,
  StreamImpl,
  StreamRun,
} from './browser/engines.js';
import type { BenchKeys } from './browser/main.js';
import { enginesPageSources, makeKeys, serveEnginesPage } from './engines-page.js';
import { writeResult, type EngineResult } from './report.js';

const { values: args } = parseArgs({
  options: {
    engines: { type: 'string', default: process.env.ENGINES ?? ENGINES.join(',') },
    cases: { type: 'string', default: process.env.CASES ?? 'stream,sw' },
    'stream-mib': { type: 'string', default: process.env.STREAM_MIB ?? '64' },
    'sw-mib': { type: 'string', default: process.env.SW_MIB ?? '256' },
    repeats: { type: 'string', default: process.env.REPEATS ?? '3' },
    'chunk-kib': { type: 'string', default: process.env.CHUNK_KIB ?? '64' },
    'pipe-chunks-kib': { type: 'string', default: process.env.PIPE_CHUNKS_KIB ?? '64,256,1024,4096' },
    'pipe-hwm': { type: 'string', default: process.env.PIPE_HWM ?? '0' },
    'pipe-forms': { type: 'string', default: process.env.PIPE_FORMS ?? 'pull' },
    'sw-kinds': { type: 'string', default: process.env.SW_KINDS ?? 'blob,sw,sw-self,sw-stream,sw-stream-self' },
    ref: { type: 'string', default: process.env.REF },
    'with-ports': { type: 'boolean', default: process.env.WITH_PORTS === '1' },
  },
});
const MiB = 2 ** 20;
const STREAM_MIB = Number(args['stream-mib']);
const SW_MIB = Number(args['sw-mib']);
const REPEATS = Number(args.repeats);
const CHUNK = Number(args['chunk-kib']) * 1024;
const WARM = 8 * MiB;
const WITH_PORTS = args['with-ports'];
const engines = args.engines.split(',').filter(Boolean) as Engine[];
const list = (text: string) => text.split(',').filter(Boolean);
/** The pipe's variants: every chunk size with every queue length (chunks), each run in turn. */
const PIPES = list(args['pipe-chunks-kib']).flatMap((kib) =>
  list(args['pipe-hwm']).map((hwm) => ({ chunk: Number(kib) * 1024, hwm: Number(hwm) })),
);
const ALL_FORMS: PipeForm[] = [
  'pull',
  'push',
  'bytes',
  'byob',
  'transform',
  'blob',
  'blob-parts',
  'blob-stream',
  'buffer',
  'cache',
];
const FORMS = list(args['pipe-forms']) as PipeForm[];
for (const f of FORMS) if (!ALL_FORMS.includes(f)) throw new Error(`unknown pipe form ${f} (${ALL_FORMS.join(', ')})`);
if (!FORMS.includes('pull')) FORMS.unshift('pull');
const ALL_KINDS: DownloadKind[] = ['blob', 'sw', 'sw-self', 'sw-stream', 'sw-stream-self'];
const KINDS = list(args['sw-kinds']) as DownloadKind[];
for (const k of KINDS)
  if (!ALL_KINDS.includes(k)) throw new Error(`unknown download kind ${k} (${ALL_KINDS.join(', ')})`);
if (!KINDS.includes('blob')) KINDS.unshift('blob');
if (!PIPES.every((p) => p.chunk > 0 && p.hwm >= 0) || PIPES.length === 0) {
  throw new Error('--pipe-chunks-kib must list positive sizes and --pipe-hwm chunk counts of 0 or more');
}
const cases = args.cases.split(',').filter(Boolean);
for (const e of engines) if (!ENGINES.includes(e)) throw new Error(`unknown engine ${e} (${ENGINES.join(', ')})`);
for (const c of cases) if (c !== 'stream' && c !== 'sw') throw new Error(`unknown case ${c} (stream, sw)`);
if (!(STREAM_MIB > 0 && SW_MIB > 0 && REPEATS >= 1 && CHUNK > 0)) {
  throw new Error('--stream-mib, --sw-mib, --repeats and --chunk-kib must be positive');
}

const repo = fileURLToPath(new URL('..', import.meta.url));
const outDir = `${repo}tmp/bench-engines/`;

declare const benchEngines: EnginesBench;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const mbps = (bytes: number, ms: number) => bytes / 1e6 / (ms / 1000);

/** Rejects after `ms` with a message naming `what`; `onLate` gets the value should it come after all. */
async function withTimeout<T>(work: Promise<T>, ms: number, what: string, onLate?: (value: T) => void): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let late = false;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      late = true;
      reject(new Error(`timed out after ${Math.round(ms / 1000)} s: ${what}`));
    }, ms);
  });
  void work.then(
    (value) => {
      if (late) onLate?.(value);
    },
    () => undefined,
  );
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Time allowed for a page call that moves `bytes`: a minute, plus the bytes at 2 MB/s. */
const budget = (bytes: number) => 60_000 + (bytes / 2e6) * 1000;

interface Row {
  name: string;
  unit: 'ms' | 'MB/s';
  ours?: number;
  theirs?: number;
}

/** Every engine's rows, for the machine-readable result and docs/performance.md. */
const record: EngineResult[] = [];

/** 1.23x; two significant digits below 0.1 (a first byte 200 times later is 0.0050x, not 0.00x). */
const ratioText = (ratio: number) => `${ratio < 0.1 ? ratio.toPrecision(2) : ratio.toFixed(2)}x`;

function printTable(engine: string, theirs: string, rows: Row[]): void {
  const fmt = (v: number | undefined, unit: string) =>
    v === undefined || !Number.isFinite(v)
      ? ''
      : unit === 'ms'
        ? `${v.toFixed(v < 100 ? 1 : 0)} ms`
        : `${v.toFixed(0)} MB/s`;
  const header = ['case', 'postguard-ts', theirs, 'ratio'];
  const cells = rows.map((r) => {
    // Ratio > 1 means we are better: faster (MB/s) or less time (ms), as npm run bench prints it.
    const ratio =
      r.ours === undefined || r.theirs === undefined || !(r.ours > 0 && r.theirs > 0)
        ? ''
        : ratioText(r.unit === 'ms' ? r.theirs / r.ours : r.ours / r.theirs);
    return [r.name, fmt(r.ours, r.unit), fmt(r.theirs, r.unit), ratio];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) => `| ${c.map((x, i) => x.padEnd(widths[i]!)).join(' | ')} |`;
  console.log(`\n${engine}:`);
  console.log(line(header));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const c of cells) console.log(line(c));
}

/** One page, with a timeout on every call. */
function caller(page: EnginePage) {
  return <R, A>(what: string, ms: number, fn: (arg: A) => R | Promise<R>, arg: A): Promise<Awaited<R>> =>
    withTimeout(page.evaluate(fn, arg), ms, what).catch((error: unknown) => {
      throw new Error(`${what}: ${String(error)}`, { cause: error });
    });
}
type Call = ReturnType<typeof caller>;

async function streamCase(call: Call, rows: Row[], pgWorker: string): Promise<void> {
  const bytes = STREAM_MIB * MiB;
  const impls: StreamImpl[] = ['ours', 'pgwasm-worker', 'pgwasm-main', ...(WITH_PORTS ? ['ours-ports' as const] : [])];
  const label: Record<StreamImpl, string> = {
    ours: 'crypto worker',
    'ours-ports': 'crypto worker, a MessagePort per stream (--with-ports)',
    'pgwasm-worker': `pg-wasm in a worker, ${pgWorker}`,
    'pgwasm-main': 'pg-wasm on the main thread',
  };

  // Seal: generated plaintext in, ciphertext counted out.
  const seals: Record<StreamImpl, StreamRun[]> = { ours: [], 'pgwasm-worker': [], 'pgwasm-main': [], 'ours-ports': [] };
  let expected: string | undefined;
  for (const impl of impls) {
    await call(`seal warm-up (${impl})`, budget(WARM), (a) => benchEngines.seal(a.impl, a.bytes, a.chunk), {
      impl,
      bytes: WARM,
      chunk: CHUNK,
    });
  }
  for (let r = 0; r < REPEATS; r++) {
    for (const impl of impls) {
      const run = await call(
        `seal ${STREAM_MIB} MiB (${impl})`,
        budget(bytes),
        (a) => benchEngines.seal(a.impl, a.bytes, a.chunk),
        {
          impl,
          bytes,
          chunk: CHUNK,
        },
      );
      expected ??= run.checksum;
      if (run.checksum !== expected) throw new Error(`seal (${impl}): plaintext ${run.checksum}, expected ${expected}`);
      seals[impl].push(run);
    }
  }
  for (const impl of impls) {
    const sizes = [...new Set(seals[impl].map((r) => r.bytes))].join(' / ');
    console.log(
      `  seal, ${label[impl]}: ${seals[impl].map((r) => mbps(bytes, r.ms).toFixed(0)).join(', ')} MB/s; ciphertext ${sizes} bytes`,
    );
  }
  const sealRate = (impl: StreamImpl) => mbps(bytes, median(seals[impl].map((r) => r.ms)));

  // Unseal: a ciphertext sealed once by our worker, held in the page, fed to each side.
  const full = await call(
    `seal the ${STREAM_MIB} MiB ciphertext`,
    budget(bytes),
    (a) => benchEngines.prepare('full', a.bytes, a.chunk),
    { bytes, chunk: CHUNK },
  );
  await call('seal the warm-up ciphertext', budget(WARM), (a) => benchEngines.prepare('warm', a.bytes, a.chunk), {
    bytes: WARM,
    chunk: CHUNK,
  });
  const opens: Record<StreamImpl, StreamRun[]> = { ours: [], 'pgwasm-worker': [], 'pgwasm-main': [], 'ours-ports': [] };
  for (const impl of impls) {
    await call(`unseal warm-up (${impl})`, budget(WARM), (i) => benchEngines.decrypt(i, 'warm'), impl);
  }
  for (let r = 0; r < REPEATS; r++) {
    for (const impl of impls) {
      const run = await call(
        `unseal ${STREAM_MIB} MiB (${impl})`,
        budget(bytes),
        (i) => benchEngines.decrypt(i, 'full'),
        impl,
      );
      if (run.bytes !== bytes || run.checksum !== full.plainChecksum) {
        throw new Error(`unseal (${impl}): plaintext ${run.checksum}, expected ${full.plainChecksum}`);
      }
      opens[impl].push(run);
    }
  }
  await call('release', 30_000, () => benchEngines.release(), undefined);
  for (const impl of impls) {
    console.log(
      `  unseal, ${label[impl]}: ${opens[impl].map((r) => mbps(bytes, r.ms).toFixed(0)).join(', ')} MB/s; ` +
        `first byte ${opens[impl].map((r) => r.ttfbMs.toFixed(0)).join(', ')} ms`,
    );
  }
  const openRate = (impl: StreamImpl) => mbps(bytes, median(opens[impl].map((r) => r.ms)));
  const ttfb = (impl: StreamImpl) => median(opens[impl].map((r) => r.ttfbMs));

  const size = `${STREAM_MIB} MiB`;
  rows.push(
    {
      name: `sealStream ${size} (pg-wasm in a worker)`,
      unit: 'MB/s',
      ours: sealRate('ours'),
      theirs: sealRate('pgwasm-worker'),
    },
    {
      name: `sealStream ${size} (pg-wasm on the main thread)`,
      unit: 'MB/s',
      ours: sealRate('ours'),
      theirs: sealRate('pgwasm-main'),
    },
    {
      name: `StreamUnsealer ${size} (pg-wasm in a worker)`,
      unit: 'MB/s',
      ours: openRate('ours'),
      theirs: openRate('pgwasm-worker'),
    },
    { name: '  time to first plaintext byte', unit: 'ms', ours: ttfb('ours'), theirs: ttfb('pgwasm-worker') },
    {
      name: `StreamUnsealer ${size} (pg-wasm on the main thread)`,
      unit: 'MB/s',
      ours: openRate('ours'),
      theirs: openRate('pgwasm-main'),
    },
    { name: '  time to first plaintext byte', unit: 'ms', ours: ttfb('ours'), theirs: ttfb('pgwasm-main') },
  );
}

async function swCase(call: Call, rows: Row[]): Promise<void> {
  const controlled = await call(
    'register the decrypting service worker',
    60_000,
    () => benchEngines.registerServiceWorker(),
    undefined,
  );
  if (!controlled) throw new Error('the decrypting service worker does not control the page');
  const kinds = KINDS;
  const label: Record<DownloadKind, string> = {
    blob: 'Blob URL (plaintext)',
    sw: "service worker, defaults (verifyFirst), the page's crypto worker decrypting",
    'sw-self': 'service worker, defaults (verifyFirst), decrypting itself (offload: false)',
    'sw-stream': "service worker, verifyFirst: false, the page's crypto worker decrypting",
    'sw-stream-self': 'service worker, verifyFirst: false, decrypting itself (offload: false)',
  };
  const runAll = async (size: number, times: number, keep: Record<DownloadKind, DownloadRun[]> | undefined) => {
    const made = await call(
      `make the ${size / MiB} MiB files`,
      budget(2 * size),
      (n) => benchEngines.downloadSetup(n),
      size,
    );
    console.log(`  ${size / MiB} MiB plaintext Blob; sealed Blob ${made.sealedBytes} bytes`);
    for (let r = 0; r < times; r++) {
      for (const kind of kinds) {
        // verifyFirst reads the sealed file twice.
        const run = await call(
          `download ${size / MiB} MiB (${kind})`,
          budget(3 * size),
          (k) => benchEngines.download(k),
          kind,
        );
        if (run.bytes !== size || run.checksum !== made.plainChecksum) {
          throw new Error(
            `download (${kind}): HTTP ${run.status}, plaintext ${run.checksum}, expected ${made.plainChecksum}`,
          );
        }
        keep?.[kind].push(run);
      }
    }
  };
  await runAll(WARM, 1, undefined);
  const bytes = SW_MIB * MiB;
  const runs: Record<DownloadKind, DownloadRun[]> = {
    blob: [],
    sw: [],
    'sw-self': [],
    'sw-stream': [],
    'sw-stream-self': [],
  };
  await runAll(bytes, REPEATS, runs);
  await call('release the files', 30_000, () => benchEngines.downloadRelease(), undefined);
  // The engine's limits, measured in the same page: SHAKE128 on one thread (the format hashes the
  // whole payload in order) and a service worker whose body costs nothing to make (its pipe).
  const shake = await call(
    'SHAKE128 on one thread',
    budget(bytes * REPEATS),
    (a) => benchEngines.shakeLimit(a.n, a.r),
    {
      n: bytes,
      r: REPEATS,
    },
  );
  // Every form with every variant, interleaved round by round.
  const pipes = FORMS.flatMap((form) => PIPES.map((p) => ({ ...p, form, runs: [] as PipeRun[] })));
  const missing = new Set<PipeForm>();
  for (let r = 0; r < REPEATS; r++) {
    for (const p of pipes) {
      if (missing.has(p.form)) continue;
      const run = await call(
        `the do-nothing service worker (${p.form})`,
        budget(bytes),
        (a) => benchEngines.pipeLimit(a.bytes, a.chunk, a.hwm, a.form),
        { bytes, chunk: p.chunk, hwm: p.hwm, form: p.form },
      ).catch((error: unknown) => {
        // pipe-sw.js answers 501 for a form this engine cannot make: leave that form out here.
        if (p.form === 'pull' || !String(error).includes('HTTP 501')) throw error;
        console.log(`  the pipe's body form ${p.form} is not available here: ${String(error)}`);
        missing.add(p.form);
        return undefined;
      });
      if (run === undefined) continue;
      if (run.bytes !== bytes) {
        throw new Error(`the pipe's service worker (${p.form}) gave ${run.bytes} of ${bytes} bytes`);
      }
      p.runs.push(run);
    }
  }
  for (const kind of kinds) {
    console.log(
      `  ${label[kind]}: ${runs[kind].map((r) => mbps(bytes, r.ms).toFixed(0)).join(', ')} MB/s; ` +
        `first byte ${runs[kind].map((r) => r.ttfbMs.toFixed(0)).join(', ')} ms` +
        (kind === 'blob' ? '' : `; prepareDownload ${runs[kind].map((r) => r.prepareMs.toFixed(0)).join(', ')} ms`),
    );
  }
  console.log(`  SHAKE128 (WebAssembly, one thread, best of ${REPEATS}): ${shake.toFixed(0)} MB/s`);
  for (const p of pipes) {
    if (missing.has(p.form)) continue;
    const built = p.runs.every((r) => r.buildMs !== undefined)
      ? `; built in ${p.runs.map((r) => r.buildMs!.toFixed(0)).join(', ')} ms, served at ` +
        `${p.runs.map((r) => mbps(bytes, r.ms - r.buildMs!).toFixed(0)).join(', ')} MB/s`
      : '';
    console.log(
      `  service worker doing nothing, ${p.form}, ${p.chunk / 1024} KiB chunks, high-water mark ${p.hwm}: ` +
        `${p.runs.map((r) => mbps(bytes, r.ms).toFixed(0)).join(', ')} MB/s; ` +
        `first byte ${p.runs.map((r) => r.ttfbMs.toFixed(0)).join(', ')} ms, then ` +
        `${p.runs.map((r) => mbps(bytes, r.ms - r.ttfbMs).toFixed(0)).join(', ')} MB/s${built}`,
    );
  }
  const rate = (kind: DownloadKind) => (runs[kind].length ? mbps(bytes, median(runs[kind].map((r) => r.ms))) : NaN);
  const ttfb = (kind: DownloadKind) => (runs[kind].length ? median(runs[kind].map((r) => r.ttfbMs)) : NaN);
  const blob = rate('blob');
  // The pipe at its best in each form: the chunk size (and queue) that moved the bytes fastest here.
  const bestOf = (form: PipeForm) =>
    pipes
      .filter((p) => p.form === form)
      .map((p) => ({ ...p, rate: mbps(bytes, median(p.runs.map((r) => r.ms))) }))
      .reduce((a, b) => (b.rate > a.rate ? b : a));
  const best = bestOf('pull');
  const pipeRate = best.rate;
  const limit = Math.min(blob, shake);
  const size = `${SW_MIB} MiB`;
  const all: Row[] = [
    { name: 'limit: Blob URL (the plaintext, no decryption)', unit: 'MB/s', ours: blob },
    { name: 'limit: SHAKE128, WebAssembly on one thread', unit: 'MB/s', ours: shake },
    { name: 'limit: the lower of the two (the format in this engine)', unit: 'MB/s', ours: limit },
    {
      name: `pipe: a service worker doing nothing (best: ${best.chunk / 1024} KiB chunks${best.hwm ? `, ${best.hwm} queued` : ''})`,
      unit: 'MB/s',
      ours: pipeRate,
      theirs: limit,
    },
    ...FORMS.filter((form) => form !== 'pull' && !missing.has(form)).map((form): Row => {
      const b = bestOf(form);
      return {
        name: `pipe, body form ${form} (best: ${b.chunk / 1024} KiB chunks${b.hwm ? `, ${b.hwm} queued` : ''})`,
        unit: 'MB/s',
        ours: b.rate,
        theirs: limit,
      };
    }),
    {
      name: `download ${size}, service worker (defaults: verifyFirst)`,
      unit: 'MB/s',
      ours: rate('sw'),
      theirs: limit,
    },
    { name: '  time to first byte', unit: 'ms', ours: ttfb('sw'), theirs: ttfb('blob') },
    {
      name: `download ${size}, service worker (verifyFirst: false)`,
      unit: 'MB/s',
      ours: rate('sw-stream'),
      theirs: limit,
    },
    { name: '  time to first byte', unit: 'ms', ours: ttfb('sw-stream'), theirs: ttfb('blob') },
    {
      name: `download ${size}, service worker decrypting itself (defaults)`,
      unit: 'MB/s',
      ours: rate('sw-self'),
      theirs: limit,
    },
    {
      name: `download ${size}, service worker decrypting itself (verifyFirst: false)`,
      unit: 'MB/s',
      ours: rate('sw-stream-self'),
      theirs: limit,
    },
    { name: '  time to first byte', unit: 'ms', ours: ttfb('sw-stream-self'), theirs: ttfb('blob') },
  ];
  // The kinds left out with --sw-kinds have no figure.
  rows.push(...all.filter((row) => row.ours === undefined || Number.isFinite(row.ours)));
}

async function runEngine(engine: Engine, url: string, keys: BenchKeys): Promise<boolean> {
  console.log(`\n== ${engine} ==`);
  const streamRows: Row[] = [];
  const swRows: Row[] = [];
  let userAgent = '';
  let browser: EngineBrowser | undefined;
  let ok = true;
  try {
    // A launch that comes back after its timeout is closed at once.
    browser = await withTimeout(launch(engine), 180_000, `${engine}: launch`, (late) => void late.close());
    const page = await withTimeout(browser.newPage(), 60_000, `${engine}: a tab`);
    await withTimeout(page.goto(url), 60_000, `${engine}: load ${url}`);
    const call = caller(page);
    const deadline = Date.now() + 60_000;
    while (!(await call('the page script', 10_000, () => 'benchEngines' in globalThis, undefined))) {
      if (Date.now() > deadline) throw new Error('the page script did not start within 60 s');
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const info = await call('init', 120_000, (a) => benchEngines.init(a.keys, a.wasm, a.withPorts), {
      keys,
      wasm: '/pg-wasm_bg.wasm',
      withPorts: WITH_PORTS,
    });
    console.log(`${info.userAgent}`);
    userAgent = info.userAgent;
    console.log(`our crypto worker's SHAKE128: ${info.shakeBackend}; pg-wasm's worker: ${info.pgWasmWorker}`);
    console.log(
      `load ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')}`,
    );
    if (cases.includes('stream')) {
      try {
        await streamCase(
          call,
          streamRows,
          info.pgWasmWorker.startsWith('streams transferred') ? 'transferred streams' : 'relayed streams',
        );
      } finally {
        if (streamRows.length) {
          printTable(`${engine}, stream (${STREAM_MIB} MiB, median of ${REPEATS})`, 'pg-wasm', streamRows);
          record.push({ engine, userAgent, group: 'stream', rows: streamRows });
        }
      }
    }
    if (cases.includes('sw')) {
      try {
        await swCase(call, swRows);
      } finally {
        if (swRows.length) record.push({ engine, userAgent, group: 'sw', rows: swRows });
        if (swRows.length)
          printTable(`${engine}, service-worker download (${SW_MIB} MiB, median of ${REPEATS})`, 'the limit', swRows);
      }
    }
  } catch (error) {
    ok = false;
    console.error(`${engine}: FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  } finally {
    if (browser)
      await withTimeout(browser.close(), 60_000, `${engine}: close`).catch((e: unknown) => console.error(String(e)));
  }
  return ok;
}

const keys = makeKeys();
const { tree, label } = await enginesPageSources(args.ref);
console.log(`postguard-ts: ${label}; @e4a/pg-wasm 0.5.10 (web build)`);
console.log(
  `${cpus().length} cores, load ${loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}; engines ${engines.join(', ')}; cases ${cases.join(', ')}; ` +
    `stream ${STREAM_MIB} MiB, download ${SW_MIB} MiB, ${CHUNK / 1024} KiB chunks, median of ${REPEATS} after a warm-up on 8 MiB`,
);
const server = await serveEnginesPage(tree, outDir);
try {
  const { url } = server;
  const failed: Engine[] = [];
  for (const engine of engines) if (!(await runEngine(engine, url, keys))) failed.push(engine);
  console.log(
    '\nratio > 1: postguard-ts is faster (MB/s) or quicker (ms). stream: both sides read the same generated plaintext ' +
      'or the same ciphertext (sealed once by our worker, held in the page) and write to a counting sink in the page. ' +
      'download: the Blob URL serves the plaintext straight from memory, so its ratio is the decrypting service ' +
      "worker's overhead; time to first byte counts from prepareDownload (service worker) or fetch (Blob URL).",
  );
  // Only a whole run of the working tree is the page's figure (docs/performance.md); a partial one,
  // or one of another commit, is only printed, as npm run bench does.
  const partial = [
    ...(args.ref ? [`--ref ${args.ref}`] : []),
    ...(ENGINES.some((e) => !engines.includes(e)) ? ['not every engine'] : []),
    ...(['stream', 'sw'].some((c) => !cases.includes(c)) ? ['not every case'] : []),
    ...(ALL_KINDS.some((k) => !KINDS.includes(k)) ? ['not every download kind'] : []),
  ];
  if (partial.length === 0) {
    const written = await writeResult('browser', {
      source: label,
      settings: { streamMiB: STREAM_MIB, swMiB: SW_MIB, repeats: REPEATS, chunkKiB: CHUNK / 1024 },
      engines: record,
    });
    console.log(`\nwrote ${written.join(', ')}`);
  } else {
    console.log(`\nnot written to docs/performance (a partial run: ${partial.join(', ')})`);
  }
  if (failed.length) {
    console.error(`failed: ${failed.join(', ')}`);
    process.exitCode = 1;
  }
} finally {
  await server.close();
}
