import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser } from '@playwright/test';
import { createServer, type ViteDevServer } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoConfig } from '../demo/vite.js';
import { chromiumLaunchOptions } from '../test/chromium.js';

/**
 * The first visit after `npm ci`: Vite's dependency cache is empty. Vite used to find more of the
 * library's dependencies while serving the first page (the crypto worker's, the service worker's)
 * and reload the page to use them, about 2 s in, losing whatever the person had typed. Every
 * dependency is now known before the first request.
 */

let cacheDir: string;
let server: ViteDevServer;
let browser: Browser;

beforeAll(async () => {
  cacheDir = await mkdtemp(join(tmpdir(), 'pg-vite-cache-'));
  const config = demoConfig();
  // No file watcher: an edit elsewhere in the checkout would reload the page too; the optimiser's
  // reload, the one under test, goes over the same HMR socket and stays on.
  server = await createServer({
    ...config,
    cacheDir,
    server: { ...config.server, host: '127.0.0.1', port: 0, watch: null },
  });
  await server.listen();
  browser = await chromium.launch(chromiumLaunchOptions);
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  await rm(cacheDir, { recursive: true, force: true });
});

describe('the demo on a fresh dependency cache', () => {
  it('loads once: the page is not reloaded under the person typing', async () => {
    const page = await browser.newPage();
    let loads = 0;
    page.on('load', () => loads++);
    const url = server.resolvedUrls!.local[0]!;
    await page.goto(url);
    await page.waitForFunction(() => document.body.dataset['ready'] === 'true', undefined, { timeout: 60_000 });
    // What a person types right away must still be there once everything has loaded.
    await page.evaluate(() => {
      (window as unknown as { marker: number }).marker = 1;
    });
    await page.waitForTimeout(6_000);
    expect(await page.evaluate(() => (window as unknown as { marker?: number }).marker)).toBe(1);
    expect(loads).toBe(1);
    await page.close();
  }, 90_000);
});
