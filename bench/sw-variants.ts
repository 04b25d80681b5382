/**
 * Service-worker settings A/B-tested inside one page, in engines with no profiler to drive
 * (WebKitGTK; worker/README.md, "Where the service worker's time goes in WebKit"): the engines
 * page (bench/browser/engines.html, as bench:browser builds it) downloads a sealed Blob through the
 * decrypting service worker under each variant's file name, kind by kind, interleaved in rounds, with
 * every browser thread's CPU time around each download (bench/thread-cpu.ts, as bench/sw-cpu.ts).
 * Alternating in one page, both sides see the same moments of a busy machine, which whole processes
 * (bench:browser --ref) do not.
 *
 *   node --import tsx bench/sw-variants.ts --engines webkit --mib 128 --rounds 3
 *   node --import tsx bench/sw-variants.ts --kinds blob,sw-stream-self --top 12
 *   node --import tsx bench/sw-variants.ts --ref <build> --variants a-d4.bin,a-d8.bin --rounds 10
 *
 * Options: --engines (webkit), --mib (128), --rounds (3), --kinds (blob,sw-self,sw-stream-self),
 * --top (the busiest threads listed, 14), --ref (a commit's lib/ and worker/, as bench:browser),
 * --perf <kind> (`perf record` the service worker's thread during that kind's downloads; WebKit's
 * JIT code stays unnamed), --variants (file names to download under, interleaved run by run in the
 * same page: an A/B within one browser, far steadier on a busy machine than whole processes, for
 * a measurement build of the service worker that reads its settings from the name). A build that
 * answers with an `x-sw-timing` header (its phases, as text) has it printed for every download.
 */
import { spawn } from 'node:child_process';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { Engine } from '../e2e/engines/driver.js';
import type { DownloadKind, EnginesBench } from './browser/engines.js';
import { enginesPageSources, makeKeys, openEnginesPage, serveEnginesPage } from './engines-page.js';
import { median } from './streams.js';
import { threadTicks, ticksBetween } from './thread-cpu.js';

const { values: args } = parseArgs({
  options: {
    engines: { type: 'string', default: 'webkit' },
    mib: { type: 'string', default: '128' },
    rounds: { type: 'string', default: '3' },
    kinds: { type: 'string', default: 'blob,sw-self,sw-stream-self' },
    top: { type: 'string', default: '14' },
    ref: { type: 'string' },
    /** Also `perf record` the service worker's thread during this kind's downloads (tmp/sw-variants-<kind>-<round>.perf). */
    perf: { type: 'string' },
    /** Downloads under these file names, interleaved run by run (a measurement build may read settings from them). */
    variants: { type: 'string', default: 'bench.bin' },
  },
});
const MiB = 2 ** 20;
const BYTES = Number(args.mib) * MiB;
const ROUNDS = Number(args.rounds);
const KINDS = args.kinds.split(',').filter(Boolean) as DownloadKind[];
const TOP = Number(args.top);
const VARIANTS = args.variants.split(',').filter(Boolean);
declare const benchEngines: EnginesBench;
const repo = fileURLToPath(new URL('..', import.meta.url));
const outDir = `${repo}tmp/bench-sw-variants/`;
const load = () =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');

/**
 * `perf record` of the service worker's thread (a thread named "…ServiceWorker" among the
 * browser's) into `file`; with JSC_logJITCodeForPerf=1 in the environment, WebKit writes the map
 * that names its JIT's code.
 */
function perfRecord(file: string): { started: Promise<void>; stop(): Promise<void> } {
  const tid = [...threadTicks().keys()].find((key) => key.includes('ServiceWorker'))?.split('#')[1];
  if (tid === undefined) throw new Error('no service worker thread to record');
  const child = spawn('perf', ['record', '-q', '-F', '2999', '-g', '-t', tid, '-o', file], { stdio: 'ignore' });
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  return {
    started: new Promise((resolve) => setTimeout(resolve, 300)),
    async stop() {
      child.kill('SIGINT');
      await exited;
    },
  };
}

const { tree } = await enginesPageSources(args.ref);
const server = await serveEnginesPage(tree, outDir);
const keys = makeKeys();
try {
  for (const engine of args.engines.split(',') as Engine[]) {
    const { browser, page } = await openEnginesPage(engine, server.url);
    try {
      await page.evaluate((a) => benchEngines.init(a.k, '/pg-wasm_bg.wasm', false), { k: keys });
      if (!(await page.evaluate(() => benchEngines.registerServiceWorker(), undefined)))
        throw new Error('the decrypting service worker does not control the page');
      console.log(`${engine}, ${args.mib} MiB, ${ROUNDS} rounds, ${args.ref ?? 'working tree'}; load ${load()}`);
      for (const size of [8 * MiB, BYTES]) {
        await page.evaluate((n) => benchEngines.downloadSetup(n), size);
        const rounds = size === BYTES ? ROUNDS : 1;
        // Every kind under every variant's file name (the Blob URL has none), in turn, round by round.
        const cases = KINDS.flatMap((kind): { kind: DownloadKind; name: string }[] =>
          kind === 'blob' ? [{ kind, name: 'bench.bin' }] : VARIANTS.map((name) => ({ kind, name })),
        );
        const label = (c: { kind: DownloadKind; name: string }) =>
          VARIANTS.length > 1 && c.kind !== 'blob' ? `${c.kind} ${c.name}` : c.kind;
        const perCase = new Map<string, { ms: number[]; cpu: Map<string, number>[] }>();
        for (let r = 0; r < rounds; r++) {
          const line: string[] = [];
          for (const c of cases) {
            const { kind } = c;
            const recorder =
              size === BYTES && kind === args.perf ? perfRecord(`${repo}tmp/sw-variants-${kind}-${r}.perf`) : undefined;
            await recorder?.started;
            const before = threadTicks();
            const run = await page.evaluate((a) => benchEngines.download(a.kind, a.name), c);
            const cpu = ticksBetween(before, threadTicks());
            await recorder?.stop();
            if (run.bytes !== size) throw new Error(`${kind}: ${run.bytes} of ${size} bytes`);
            if (run.timing !== undefined && size === BYTES)
              console.log(
                `  ${label(c)}: ${run.ms.toFixed(0)} ms, first byte ${run.ttfbMs.toFixed(0)} ms; ${run.timing}`,
              );
            line.push(`${label(c)} ${(((size / 1e6) * 1000) / run.ms).toFixed(0)} (fb ${run.ttfbMs.toFixed(0)})`);
            const entry = perCase.get(label(c)) ?? { ms: [], cpu: [] };
            entry.ms.push(run.ms);
            entry.cpu.push(cpu);
            perCase.set(label(c), entry);
          }
          if (size === BYTES) console.log(`round ${r + 1}, load ${load()}: ${line.join(' | ')}`);
        }
        if (size !== BYTES) continue;
        const blobMs = perCase.get('blob')?.ms;
        for (const [name, { ms, cpu }] of perCase) {
          const keysSeen = new Set(cpu.flatMap((m) => [...m.keys()]));
          const rows = [...keysSeen]
            .map((key) => ({ key, ms: median(cpu.map((m) => m.get(key) ?? 0)) }))
            .sort((a, b) => b.ms - a.ms);
          const total = median(cpu.map((m) => [...m.values()].reduce((a, b) => a + b, 0)));
          const wall = median(ms);
          console.log(
            `\n${name}: ${ms
              .map((t) => ((BYTES / 1e6) * 1000) / t)
              .map((v) => v.toFixed(0))
              .join(', ')} MB/s; ` +
              `median ${(((BYTES / 1e6) * 1000) / wall).toFixed(0)} MB/s` +
              (blobMs ? ` (${(median(blobMs) / wall).toFixed(2)}x the Blob URL's)` : '') +
              `; wall ${wall.toFixed(0)} ms, CPU ${total.toFixed(0)} ms in all (medians), load ${load()}`,
          );
          for (const row of rows.slice(0, TOP)) {
            console.log(
              `  ${row.ms.toFixed(0).padStart(6)} ms  ${((row.ms / wall) * 100).toFixed(0).padStart(3)} % of wall  ${row.key}`,
            );
          }
        }
      }
      await page.evaluate(() => benchEngines.downloadRelease(), undefined);
    } finally {
      await browser.close();
    }
  }
} finally {
  await server.close();
}
