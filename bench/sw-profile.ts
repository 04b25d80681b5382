/**
 * Where a service-worker download's time goes, in Chromium: the benchmark page of
 * `npm run bench:browser` (bench/engines-page.ts), a sealed Blob fetched through the decrypting
 * service worker while the service worker's thread is CPU-profiled (bench/browser-profile.ts),
 * then the self time by function (worker/README.md, "Where a service-worker download's time
 * goes"). The profile is written to tmp/sw.cpuprofile.
 *
 *   npx tsx bench/sw-profile.ts                          64 MiB, verifyFirst: false
 *   npx tsx bench/sw-profile.ts --mib 128 --kind sw      the defaults (verify first)
 *   npx tsx bench/sw-profile.ts --kind sw-stream-self    the service worker decrypting itself (no offload)
 */
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { chromium } from '@playwright/test';
import { chromiumLaunchOptions } from '../test/chromium.js';
import { profileDuring, summarizeProfile } from './browser-profile.js';
import type { DownloadKind, DownloadRun, EnginesBench } from './browser/engines.js';
import { makeKeys, serveEnginesPage } from './engines-page.js';

const { values: args } = parseArgs({
  options: { mib: { type: 'string', default: '64' }, kind: { type: 'string', default: 'sw-stream' } },
});
const bytes = Number(args.mib) * 2 ** 20;
const kind = args.kind as DownloadKind;
if (!['sw', 'sw-stream', 'sw-self', 'sw-stream-self', 'blob'].includes(kind)) {
  throw new Error('--kind: sw, sw-stream, sw-self, sw-stream-self or blob');
}

const repo = fileURLToPath(new URL('..', import.meta.url));
const outDir = `${repo}tmp/sw-profile/`;
declare const benchEngines: EnginesBench;

const server = await serveEnginesPage(repo, outDir);
const browser = await chromium.launch(chromiumLaunchOptions);
try {
  const page = await browser.newPage();
  await page.goto(server.url);
  await page.waitForFunction(() => 'benchEngines' in globalThis);
  await page.evaluate((a) => benchEngines.init(a.keys, a.wasm), { keys: makeKeys(), wasm: '/pg-wasm_bg.wasm' });
  if (!(await page.evaluate(() => benchEngines.registerServiceWorker()))) throw new Error('no service worker');
  await page.evaluate((n) => benchEngines.downloadSetup(n), bytes);
  const rate = (run: DownloadRun) =>
    `${(bytes / 1e6 / (run.ms / 1000)).toFixed(0)} MB/s, first byte ${run.ttfbMs.toFixed(0)} ms`;
  const download = () => page.evaluate((k) => benchEngines.download(k), kind);
  // A warm-up, so that the profile shows the tiered-up code.
  console.log(`warm-up (${kind}): ${rate(await download())}`);
  const { profiles, value } = await profileDuring(browser, page, ['postguard-sw.js'], download);
  console.log(`profiled (${kind}): ${rate(value)}`);
  const profile = profiles.get('postguard-sw.js')!;
  await writeFile(`${repo}tmp/sw.cpuprofile`, JSON.stringify(profile));
  for (const line of summarizeProfile(profile, 20)) console.log(line);
} finally {
  await browser.close();
  await server.close();
}
