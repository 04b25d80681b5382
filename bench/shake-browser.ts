/**
 * The SHAKE128 benchmark of bench/shake.ts, inside Chromium: bundles bench/shake-browser-page.ts
 * with Vite's JS API (in memory, nothing written), loads it into a blank page under Playwright
 * and prints noble vs WebAssembly MB/s there.
 *
 *   npx tsx bench/shake-browser.ts               256 MiB per run
 *   npx tsx bench/shake-browser.ts --mib 64 --repeats 5
 *   CHROMIUM=/path/to/chrome npx tsx bench/shake-browser.ts
 */
import { parseArgs } from 'node:util';
import { chromium } from '@playwright/test';
import type { PageReport } from './shake-browser-page.js';
import { formatRun } from './shake-core.js';
import { chromiumLaunchOptions } from '../test/chromium.js';
import { bundleEntry } from './bundle.js';

const { values: args } = parseArgs({
  options: { mib: { type: 'string', default: '256' }, repeats: { type: 'string', default: '3' } },
});
const total = Number(args.mib) * 2 ** 20;
const repeats = Number(args.repeats);

const code = await bundleEntry(new URL('./shake-browser-page.ts', import.meta.url), 'shake-bench');
const browser = await chromium.launch(chromiumLaunchOptions);
try {
  const page = await browser.newPage();
  page.on('pageerror', (e) => console.error('page error:', e));
  await page.setContent('<!doctype html><title>SHAKE128 benchmark</title>');
  await page.addScriptTag({ content: code, type: 'module' });
  await page.waitForFunction(() => 'runShakeBench' in globalThis);
  const report = await page.evaluate(
    ([bytes, n]) =>
      (globalThis as unknown as { runShakeBench: (b: number, r: number) => Promise<PageReport> }).runShakeBench(
        bytes,
        n,
      ),
    [total, repeats] as const,
  );
  console.log(`Chromium ${browser.version()}: ${report.userAgent}`);
  console.log(`portable backend selected: ${report.portableBackend}; wasm agrees with noble: ${report.agree}`);
  console.log(`${args.mib} MiB in 256 KiB segments, each followed by clone + digest(64); best of ${repeats}\n`);
  for (const run of report.runs) console.log(formatRun(run));
  if (!report.agree || report.portableBackend !== 'wasm') process.exitCode = 1;
} finally {
  await browser.close();
}
