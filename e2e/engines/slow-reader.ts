import { readFile, readdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { makeKeys, serveApp } from '../../worker/test/fixtures.js';
import { ENGINES, launch, type Engine } from './driver.js';

/**
 * Measures what a slow reader costs in each engine: a file sealed on the fly in the crypto worker,
 * relayed into the decrypting service worker and read back by the page at a fixed rate. Samples
 * the resident memory of every process this script started (the browser's whole process tree:
 * page, workers, service worker, network process; for WebKit also Xvfb) four times a second and
 * prints the peak growth over the baseline taken just before the read (RSS also counts garbage not
 * yet collected, so it is an upper bound). The sharper figure is the backlog: the service worker
 * reports the bytes it has handed to the browser, the page compares them with what it has read;
 * an engine that pulls the body regardless of its reader buffers the difference. Each engine runs
 * twice: a plain fetch of the download URL, and PreparedDownload.fetch with `paced` (the page
 * acknowledges what it reads).
 *
 *   node --import tsx e2e/engines/slow-reader.ts [MiB=256] [MB/s=10] [engines=chromium,firefox,webkit]
 */

type Pgt = import('../../worker/test/app/main.js').Pgt;
declare const pgt: Pgt;

const MiB = 1024 * 1024;
const size = Number(process.argv[2] ?? 256) * MiB;
const rate = Number(process.argv[3] ?? 10) * 1_000_000;
const engines = (process.argv[4]?.split(',') ?? ENGINES) as Engine[];

/** Resident bytes of every descendant of this process, by pid, with its command name. */
async function treeRss(): Promise<Map<number, { name: string; rss: number }>> {
  const parents = new Map<number, number>();
  const rss = new Map<number, { name: string; rss: number }>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = await readFile(`/proc/${entry}/stat`, 'utf8');
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      parents.set(Number(entry), Number(fields[1]));
      rss.set(Number(entry), { name, rss: Number(fields[21]) * 4096 });
    } catch {
      // gone
    }
  }
  const mine = new Set([process.pid]);
  let grew = true;
  while (grew) {
    grew = false;
    for (const [pid, ppid] of parents) if (!mine.has(pid) && mine.has(ppid)) (mine.add(pid), (grew = true));
  }
  mine.delete(process.pid);
  return new Map([...mine].filter((pid) => rss.has(pid)).map((pid) => [pid, rss.get(pid)!]));
}

const total = (tree: Map<number, { rss: number }>) => [...tree.values()].reduce((sum, p) => sum + p.rss, 0);

const keys = makeKeys();
const app = await serveApp(fileURLToPath(new URL('../../tmp/engines/slow-reader-app/', import.meta.url)));
try {
  for (const engine of engines) {
    const browser = await launch(engine);
    try {
      const tab = await browser.newPage();
      await tab.goto(app.url);
      for (let i = 0; i < 100 && !(await tab.evaluate(() => 'pgt' in window)); i++)
        await new Promise((r) => setTimeout(r, 100));
      await tab.evaluate(() => pgt.init());
      await tab.evaluate(() => pgt.registerServiceWorker());
      // Warm up the service worker and the crypto worker, then take the baseline.
      await tab.evaluate(([k, n]) => pgt.swSlowRead(k.mpk, k.options, k.id, k.usk, k.vk, n, 1e9), [
        keys,
        4 * MiB,
      ] as const);
      await new Promise((r) => setTimeout(r, 1000));
      for (const paced of [false, true]) {
        await new Promise((r) => setTimeout(r, 1000));
        const baseline = await treeRss();
        let peak = total(baseline);
        const peaks = new Map<number, number>();
        let sampling = true;
        const sampler = (async () => {
          while (sampling) {
            const now = await treeRss();
            peak = Math.max(peak, total(now));
            for (const [pid, p] of now) peaks.set(pid, Math.max(peaks.get(pid) ?? 0, p.rss));
            await new Promise((r) => setTimeout(r, 250));
          }
        })();
        const r = await tab.evaluate(
          ([k, n, bps, p]) => pgt.swSlowRead(k.mpk, k.options, k.id, k.usk, k.vk, n, bps, p),
          [keys, size, rate, paced] as const,
        );
        sampling = false;
        await sampler;
        console.log(
          `${engine}${paced ? ' (paced)' : ''}: ${size / MiB} MiB read at ${rate / 1e6} MB/s in ${r.seconds.toFixed(1)} s, same bytes: ${r.ok}; ` +
            `decrypted and handed to the browser but not yet read by the page: at most ${(r.maxAhead / MiB).toFixed(1)} MiB ` +
            `(${(r.aheadAtDone / MiB).toFixed(1)} MiB when the worker sent its last byte); ` +
            `browser process tree RSS baseline ${(total(baseline) / MiB).toFixed(0)} MiB, peak growth ${((peak - total(baseline)) / MiB).toFixed(1)} MiB`,
        );
        const growth = [...peaks]
          .map(([pid, p]) => ({ name: baseline.get(pid)?.name ?? '(new)', grew: p - (baseline.get(pid)?.rss ?? 0) }))
          .sort((a, b) => b.grew - a.grew)
          .slice(0, 3)
          .map((p) => `${p.name} +${(p.grew / MiB).toFixed(0)} MiB`);
        console.log(`  processes that grew most: ${growth.join(', ')}`);
      }
    } finally {
      await browser.close();
    }
  }
} finally {
  await app.close();
}
process.exit(0);
