import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, test } from '@playwright/test';
import ts from 'typescript';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from '../../lib/keys.js';
import { ROOT } from '../../scripts/packages.js';
import { ENGINES, launch, listDownloads } from '../engines/driver.js';
import { until } from '../engines/fixtures.js';
import { serveStatic, type StaticServer } from './static-server.js';

/**
 * lib/README.md's "No bundler" path, as a user takes it: postguard-ts's packed tarball installed
 * into a fresh folder with no build tool, the three ready-built files copied next to a page
 * (apps/static/index.html, whose script is the README's snippet followed by the test's calls),
 * served by a plain static file server, and opened in Chromium, Firefox ESR and WebKitGTK through
 * e2e/engines/driver.ts. The module loads with no import map, starts the crypto worker from the
 * copied script, seals and unseals with keys the test wrote next to the page (keys.json), draws a
 * QR code, and downloads a decrypted file through the copied service worker. A second page imports
 * postguard.js where npm put it and starts the worker from beside it (no workerUrl).
 */

interface NoBundler {
  pkgUrl(): string | null;
  roundTrip(text: string): Promise<{
    memory: string;
    stream: string;
    claimed: string;
    headline: string;
    sender: string[];
    streamedSender: string;
    refused: { code: string; postguard: boolean; format: boolean };
    shake: string;
  }>;
  qr(text: string): { svg: boolean; paths: number; viewBox: string | null };
  download(text: string, filename: string): Promise<{ sender: string; controlled: boolean }>;
}
/** What the pages put on window. */
declare const noBundler: NoBundler;
declare const fromNodeModules: (text: string) => Promise<string>;

const EMAIL = 'pbdf.sidn-pbdf.email.email';
const FILES = ['postguard.js', 'postguard-crypto-worker.js', 'postguard-sw.js'];

let work: string | undefined;
let app: string;
let server: StaticServer | undefined;

const run = (command: string, args: string[], cwd: string): string =>
  execFileSync(command, args, {
    cwd,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, npm_config_update_notifier: 'false' },
  });

/** The html block under lib/README.md's "No bundler" heading, without blank and comment lines. */
function readmeSnippet(): string[] {
  const readme = readFileSync(join(ROOT, 'lib', 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('**No bundler**'));
  const block = /```html\n([\s\S]*?)```/.exec(section)?.[1];
  if (block === undefined) throw new Error('lib/README.md has no html block under **No bundler**');
  return block
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('//'));
}

function keys() {
  const kem = generateKemKeys();
  const ibs = generateSigningKeys();
  const alice = { ts: 1_700_000_000, con: [{ t: EMAIL, v: 'alice@example.com' }] };
  const bob = { ts: 1_700_000_000, con: [{ t: EMAIL, v: 'bob@example.com' }] };
  return {
    mpk: kem.mpk,
    vk: ibs.vk,
    usk: extractUsk(kem.msk, bob),
    policy: { bob },
    pubSignKey: { key: extractSigningKey(ibs.sk, alice), policy: alice },
  };
}

test.beforeAll(async () => {
  test.setTimeout(300_000);
  if (process.env['CONSUMER_SKIP_BUILD'] !== '1' || !existsSync(join(ROOT, 'lib', 'dist', 'browser', 'postguard.js'))) {
    run('npm', ['run', 'build', '-w', 'postguard-ts'], ROOT);
  }
  work = mkdtempSync(join(tmpdir(), 'pg-no-bundler-'));
  const [pack] = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', work], join(ROOT, 'lib'))) as Array<{
    filename: string;
  }>;
  app = join(work, 'app');
  mkdirSync(app);
  writeFileSync(
    join(app, 'package.json'),
    JSON.stringify({
      name: 'consumer-static',
      private: true,
      dependencies: { 'postguard-ts': join(work, pack!.filename) },
    }),
  );
  run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], app);
  // The README's cp: the three files next to the page.
  for (const file of FILES) cpSync(join(app, 'node_modules', 'postguard-ts', 'dist', 'browser', file), join(app, file));
  for (const page of ['index.html', 'from-node-modules.html']) {
    cpSync(join(ROOT, 'e2e', 'consumer', 'apps', 'static', page), join(app, page));
  }
  writeFileSync(join(app, 'keys.json'), JSON.stringify(keys()));
  server = await serveStatic(app);
});

test.afterAll(async () => {
  await server?.close();
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

test("the page is lib/README.md's snippet; the module has no imports left", () => {
  const page = readFileSync(join(ROOT, 'e2e', 'consumer', 'apps', 'static', 'index.html'), 'utf8')
    .split('\n')
    .map((line) => line.trim());
  let at = 0;
  for (const line of readmeSnippet()) {
    const found = page.indexOf(line, at);
    expect(found, `README line in the page, in order: ${line}`).toBeGreaterThanOrEqual(0);
    at = found + 1;
  }
  for (const file of FILES) {
    // Static and dynamic imports, re-exports and CommonJS requires, as TypeScript's scanner finds them: none.
    const { importedFiles } = ts.preProcessFile(readFileSync(join(app, file), 'utf8'), true, true);
    expect(
      importedFiles.map((f) => f.fileName),
      file,
    ).toEqual([]);
  }
});

for (const engine of ENGINES) {
  test(`${engine}: with no build step the module loads, seals and unseals in the copied crypto worker, draws a QR code, and downloads through the copied service worker`, async () => {
    test.setTimeout(180_000);
    const browser = await launch(engine);
    try {
      const tab = await browser.newPage();
      await tab.goto(`${server!.url}/`);
      await until(() => tab.evaluate(() => document.body.dataset['ready'] === 'true'), 'the page', 60_000);
      expect(await tab.evaluate(() => noBundler.pkgUrl())).toBe('https://pkg.example.org');

      const text = 'hello from a page with no build step';
      expect(await tab.evaluate((t) => noBundler.roundTrip(t), text)).toEqual({
        memory: text,
        stream: text,
        claimed: 'Claimed sender',
        headline: 'Verified sender',
        sender: ['Verified sender: alice@example.com'],
        streamedSender: 'alice@example.com',
        refused: { code: 'NOT_POSTGUARD', postguard: true, format: true },
        shake: 'wasm',
      });

      const qr = await tab.evaluate(() => noBundler.qr('https://open.yivi.app/-/session#example'));
      expect(qr).toMatchObject({ svg: true, paths: 1 });
      expect(qr.viewBox).toMatch(/^0 0 \d+ \d+$/);

      const filename = `no-bundler-${engine}.txt`;
      const body = `${text}, saved to disk`;
      expect(await tab.evaluate(([t, f]) => noBundler.download(t, f), [body, filename] as const)).toEqual({
        sender: 'alice@example.com',
        controlled: true,
      });
      await until(
        async () => (await listDownloads(browser.downloads))[filename] === body.length,
        `${filename} on disk`,
        60_000,
      );
      expect(readFileSync(join(browser.downloads, filename), 'utf8')).toBe(body);

      await tab.goto(`${server!.url}/from-node-modules.html`);
      await until(() => tab.evaluate(() => document.body.dataset['ready'] === 'true'), 'the page', 60_000);
      expect(await tab.evaluate((t) => fromNodeModules(t), text)).toBe(text);
    } finally {
      await browser.close();
    }
  });
}
