/**
 * Where a service-worker download's time goes, in Chromium: the benchmark page of
 * `npm run bench:browser` (bench/browser/engines.html, built the same way), a sealed Blob fetched
 * through the decrypting service worker while the service worker's thread is CPU-profiled over
 * the DevTools protocol, then the self time by function (worker/README.md, "Where a
 * service-worker download's time goes"). The profile is written to tmp/sw.cpuprofile.
 *
 *   npx tsx bench/sw-profile.ts                          64 MiB, verifyFirst: false
 *   npx tsx bench/sw-profile.ts --mib 128 --kind sw      the defaults (verify first)
 */
import { copyFile, mkdir, rm, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { chromium } from '@playwright/test';
import { build, preview } from 'vite';
import { postguardFromSources } from '../lib/build/bundles.js';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from '../lib/keys.js';
import { sourceAliases } from '../scripts/source-aliases.js';
import { chromiumLaunchOptions } from '../test/chromium.js';
import { summarizeProfile, type CpuProfile } from './browser-profile.js';
import type { DownloadKind, DownloadRun, EnginesBench } from './browser/engines.js';

const { values: args } = parseArgs({
  options: { mib: { type: 'string', default: '64' }, kind: { type: 'string', default: 'sw-stream' } },
});
const bytes = Number(args.mib) * 2 ** 20;
const kind = args.kind as DownloadKind;
if (!['sw', 'sw-stream', 'blob'].includes(kind)) throw new Error('--kind: sw, sw-stream or blob');

const repo = fileURLToPath(new URL('..', import.meta.url));
const outDir = `${repo}tmp/sw-profile/`;
declare const benchEngines: EnginesBench;

await rm(outDir, { recursive: true, force: true });
await build({
  configFile: false,
  root: `${repo}bench/browser/`,
  logLevel: 'error',
  resolve: { alias: sourceAliases('portable') },
  worker: { format: 'es' },
  plugins: [postguardFromSources()],
  build: {
    outDir,
    emptyOutDir: true,
    target: 'es2022',
    minify: false,
    rollupOptions: { input: `${repo}bench/browser/engines.html` },
  },
});
await mkdir(outDir, { recursive: true });
await copyFile(`${repo}node_modules/@e4a/pg-wasm/web/index_bg.wasm`, `${outDir}pg-wasm_bg.wasm`);
const server = await preview({
  configFile: false,
  root: outDir,
  logLevel: 'error',
  build: { outDir },
  preview: { host: '127.0.0.1', port: 0 },
});

const kem = generateKemKeys();
const ibs = generateSigningKeys();
const ts = Math.floor(Date.now() / 1000);
const email = 'pbdf.sidn-pbdf.email.email';
const recipient = { ts, con: [{ t: email, v: 'alice@example.org' }] };
const sender = { ts, con: [{ t: email, v: 'bob@example.org' }] };
const keys = {
  mpk: kem.mpk,
  vk: ibs.vk,
  rid: 'alice@example.org',
  usk: extractUsk(kem.msk, recipient),
  options: {
    policy: { 'alice@example.org': recipient },
    pubSignKey: { key: extractSigningKey(ibs.sk, sender), policy: sender },
  },
};

const browser = await chromium.launch(chromiumLaunchOptions);
try {
  const page = await browser.newPage();
  await page.goto(`${server.resolvedUrls!.local[0]!}engines.html`);
  await page.waitForFunction(() => 'benchEngines' in globalThis);
  await page.evaluate((a) => benchEngines.init(a.keys, a.wasm), { keys, wasm: '/pg-wasm_bg.wasm' });
  if (!(await page.evaluate(() => benchEngines.registerServiceWorker()))) throw new Error('no service worker');
  await page.evaluate((n) => benchEngines.downloadSetup(n), bytes);
  const rate = (run: DownloadRun) =>
    `${(bytes / 1e6 / (run.ms / 1000)).toFixed(0)} MB/s, first byte ${run.ttfbMs.toFixed(0)} ms`;
  // A warm-up, so that the profile shows the tiered-up code.
  console.log(`warm-up (${kind}): ${rate(await page.evaluate((k) => benchEngines.download(k), kind))}`);

  const cdp = await browser.newBrowserCDPSession();
  const { targetInfos } = (await cdp.send('Target.getTargets')) as unknown as {
    targetInfos: { targetId: string; type: string }[];
  };
  const target = targetInfos.find((t) => t.type === 'service_worker');
  if (!target) throw new Error('no service worker target');
  const { sessionId } = (await cdp.send('Target.attachToTarget', {
    targetId: target.targetId,
    flatten: false,
  })) as unknown as {
    sessionId: string;
  };
  let next = 1;
  const waiting = new Map<number, (result: unknown) => void>();
  cdp.on('Target.receivedMessageFromTarget', (event: { sessionId: string; message: string }) => {
    if (event.sessionId !== sessionId) return;
    const message = JSON.parse(event.message) as { id?: number; result?: unknown };
    if (message.id !== undefined) waiting.get(message.id)?.(message.result);
  });
  const send = <T>(method: string, params: Record<string, unknown> = {}) =>
    new Promise<T>((resolve) => {
      const id = next++;
      waiting.set(id, resolve as (result: unknown) => void);
      void cdp.send('Target.sendMessageToTarget', { sessionId, message: JSON.stringify({ id, method, params }) });
    });
  await send('Profiler.enable');
  await send('Profiler.setSamplingInterval', { interval: 200 });
  await send('Profiler.start');
  console.log(`profiled (${kind}): ${rate(await page.evaluate((k) => benchEngines.download(k), kind))}`);
  const { profile } = await send<{ profile: CpuProfile }>('Profiler.stop');
  await writeFile(`${repo}tmp/sw.cpuprofile`, JSON.stringify(profile));
  for (const line of summarizeProfile(profile, 20)) console.log(line);
} finally {
  await browser.close();
  await server.close();
}
