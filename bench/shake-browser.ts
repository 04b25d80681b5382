/**
 * The SHAKE128 benchmark of bench/shake.ts, inside Chromium: bundles bench/shake-browser-page.ts
 * with Vite's JS API (in memory, nothing written), loads it into a blank page under Playwright
 * and prints noble vs WebAssembly MB/s there.
 *
 *   npx tsx bench/shake-browser.ts               256 MiB per run
 *   npx tsx bench/shake-browser.ts --mib 64 --repeats 5
 *   CHROMIUM=/path/to/chrome npx tsx bench/shake-browser.ts
 */
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { chromium } from '@playwright/test';
import { build } from 'vite';
import type { PageReport } from './shake-browser-page.js';
import { formatRun } from './shake-core.js';

const { values: args } = parseArgs({
  options: { mib: { type: 'string', default: '256' }, repeats: { type: 'string', default: '3' } },
});
const total = Number(args.mib) * 2 ** 20;
const repeats = Number(args.repeats);

async function bundle(): Promise<string> {
  const result = await build({
    configFile: false,
    root: fileURLToPath(new URL('..', import.meta.url)),
    logLevel: 'warn',
    build: {
      write: false,
      minify: false,
      target: 'es2022',
      lib: {
        entry: fileURLToPath(new URL('./shake-browser-page.ts', import.meta.url)),
        formats: ['es'],
        fileName: 'shake-bench',
      },
    },
  });
  const outputs = Array.isArray(result) ? result : [result];
  for (const out of outputs) {
    if (!('output' in out)) continue;
    const chunk = out.output.find((o) => o.type === 'chunk' && o.isEntry);
    if (chunk && chunk.type === 'chunk') return chunk.code;
  }
  throw new Error('vite produced no entry chunk');
}

const code = await bundle();
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--no-first-run',
  ],
});
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
