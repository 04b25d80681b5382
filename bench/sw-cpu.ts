/**
 * What a service-worker download costs the machine, per engine: the CPU time each of the browser's
 * threads spends on one 128 MiB download (bench/thread-cpu.ts, from /proc), beside the same bytes
 * from a Blob URL and through the do-nothing service worker's pipe (bench:browser's "pipe"), on
 * the benchmark page of `npm run bench:browser`. CPU time does not depend on what else the machine
 * runs, so this answers what wall time on a shared 2-core machine cannot: whether a target speed
 * fits in the cores at all (worker/README.md, "What a download costs in CPU").
 *
 *   node --import tsx bench/sw-cpu.ts                                  Chromium, 3 rounds
 *   node --import tsx bench/sw-cpu.ts --engines chromium,firefox,webkit --kinds blob,pipe,sw-stream-self
 */
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { Engine } from '../e2e/engines/driver.js';
import type { DownloadKind, DownloadRun, EnginesBench } from './browser/engines.js';
import { makeKeys, openEnginesPage, serveEnginesPage } from './engines-page.js';
import { median } from './streams.js';
import { threadTicks, ticksBetween } from './thread-cpu.js';

const { values: args } = parseArgs({
  options: {
    engines: { type: 'string', default: 'chromium' },
    kinds: { type: 'string', default: 'blob,pipe,sw-stream-self,sw-self' },
    mib: { type: 'string', default: '128' },
    rounds: { type: 'string', default: '3' },
    top: { type: 'string', default: '6' },
  },
});
const BYTES = Number(args.mib) * 2 ** 20;
type Kind = DownloadKind | 'pipe';
const kinds = args.kinds.split(',') as Kind[];
declare const benchEngines: EnginesBench;

const repo = fileURLToPath(new URL('..', import.meta.url));
const outDir = `${repo}tmp/sw-cpu/`;
const server = await serveEnginesPage(repo, outDir);

/** A thread's name without its id, and without the number an engine gives each thread of a pool. */
function role(thread: string): string {
  let end = thread.lastIndexOf('#');
  if (end < 0) end = thread.length;
  while (end > 0 && thread.charCodeAt(end - 1) >= 48 && thread.charCodeAt(end - 1) <= 57) end--;
  return thread.slice(0, end);
}

try {
  for (const engine of args.engines.split(',') as Engine[]) {
    const { browser, page } = await openEnginesPage(engine, server.url);
    try {
      await page.evaluate((k) => benchEngines.init(k, '/pg-wasm_bg.wasm', false), makeKeys());
      if (!(await page.evaluate(() => benchEngines.registerServiceWorker(), undefined))) {
        throw new Error(`${engine}: the decrypting service worker does not control the page`);
      }
      await page.evaluate((n) => benchEngines.downloadSetup(n), BYTES);
      const seen = new Map<Kind, { mbps: number; cpuMs: number; threads: Map<string, number> }[]>();
      for (let round = 0; round < Number(args.rounds); round++) {
        for (const kind of kinds) {
          const before = threadTicks();
          const run: DownloadRun =
            kind === 'pipe'
              ? await page.evaluate((n) => benchEngines.pipeLimit(n, 256 * 1024, 0), BYTES)
              : await page.evaluate((k) => benchEngines.download(k), kind);
          const used = ticksBetween(before, threadTicks());
          if (run.bytes !== BYTES) throw new Error(`${engine} ${kind}: ${run.bytes} bytes of ${BYTES}`);
          const threads = new Map<string, number>();
          for (const [thread, ms] of used) threads.set(role(thread), (threads.get(role(thread)) ?? 0) + ms);
          const cpuMs = [...used.values()].reduce((a, b) => a + b, 0);
          seen.set(kind, [...(seen.get(kind) ?? []), { mbps: BYTES / 1e6 / (run.ms / 1000), cpuMs, threads }]);
        }
      }
      console.log(`\n== ${engine}, ${args.mib} MiB, median of ${args.rounds}; load ${loadavg()[0]!.toFixed(1)}`);
      for (const [kind, runs] of seen) {
        const mbps = median(runs.map((r) => r.mbps));
        const cpuMs = median(runs.map((r) => r.cpuMs));
        const perThread = new Map<string, number>();
        for (const r of runs)
          for (const [t, ms] of r.threads) perThread.set(t, (perThread.get(t) ?? 0) + ms / runs.length);
        const top = [...perThread]
          .sort((a, b) => b[1] - a[1])
          .slice(0, Number(args.top))
          .map(([t, ms]) => `${t} ${ms.toFixed(0)}`)
          .join(', ');
        // The speed the CPU alone would allow with every core busy and nothing waiting.
        const fits = (cpus().length * BYTES) / 1e6 / (cpuMs / 1000);
        console.log(
          `${kind.padEnd(15)} ${mbps.toFixed(0).padStart(4)} MB/s  CPU ${cpuMs.toFixed(0)} ms (${((cpuMs / 1000) * (mbps / (BYTES / 1e6))).toFixed(2)} cores busy; ${cpus().length} cores fit ${fits.toFixed(0)} MB/s)  ${top}`,
        );
      }
    } finally {
      await browser.close();
    }
  }
} finally {
  await server.close();
}
