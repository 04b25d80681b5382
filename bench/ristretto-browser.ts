/**
 * The ristretto255 benchmark of bench/ristretto.ts, inside Chromium: bundles
 * bench/ristretto-browser-page.ts with Vite's JS API (in memory, nothing written), loads it
 * into a blank page under Playwright and prints noble vs WebAssembly µs per operation there.
 *
 *   npx tsx bench/ristretto-browser.ts
 *   npx tsx bench/ristretto-browser.ts --repeats 9
 *   CHROMIUM=/path/to/chrome npx tsx bench/ristretto-browser.ts
 */
import { parseArgs } from 'node:util';
import { chromium } from '@playwright/test';
import type { PageReport } from './ristretto-browser-page.js';
import { formatReport } from './ristretto-core.js';
import { chromiumLaunchOptions } from '../test/chromium.js';
import { bundleEntry } from './bundle.js';

const { values: args } = parseArgs({ options: { repeats: { type: 'string', default: '5' } } });
const repeats = Number(args.repeats);
if (!(repeats >= 1)) throw new Error('--repeats must be positive');

const code = await bundleEntry(new URL('./ristretto-browser-page.ts', import.meta.url), 'ristretto-bench');
const browser = await chromium.launch(chromiumLaunchOptions);
try {
  const page = await browser.newPage();
  page.on('pageerror', (e) => console.error('page error:', e));
  await page.setContent('<!doctype html><title>ristretto255 benchmark</title>');
  await page.addScriptTag({ content: code, type: 'module' });
  await page.waitForFunction(() => 'runRistrettoBench' in globalThis);
  const report = await page.evaluate(
    (n) => (globalThis as unknown as { runRistrettoBench: (r: number) => Promise<PageReport> }).runRistrettoBench(n),
    repeats,
  );
  console.log(`Chromium ${browser.version()}: ${report.userAgent}`);
  console.log(`best of ${repeats} batches\n`);
  for (const line of formatReport(report)) console.log(line);
  if (!report.agree) process.exitCode = 1;
} finally {
  await browser.close();
}
