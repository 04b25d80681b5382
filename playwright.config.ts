import { fileURLToPath } from 'node:url';
import { defineConfig } from '@playwright/test';
import { chromiumLaunchOptions } from './test/chromium.js';

const root = fileURLToPath(new URL('.', import.meta.url));

/**
 * Browser tests: worker/test/*.spec.ts (the crypto worker, the decrypting service worker and the
 * PKG client in Chromium) and e2e/*.spec.ts (the demo, end to end). Every server a spec needs is
 * started by the spec itself on an ephemeral loopback port.
 *
 *   npx playwright test                       all of them
 *   npx playwright test worker/test           the browser runtime only
 */
export default defineConfig({
  testDir: '.',
  // Only the suites at this checkout's root: scratch copies of the sources (benchmarks build old
  // commits under tmp/) are not the suite. Matched relative to the root, since Playwright matches
  // globs against absolute paths and a checkout may itself live under /tmp.
  testMatch: new RegExp(`^${root.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}(worker/test|e2e)/.+\\.spec\\.ts$`),
  timeout: 180_000,
  expect: { timeout: 15_000 },
  // The machine is small and shared; the specs measure memory and responsiveness.
  workers: 1,
  fullyParallel: false,
  forbidOnly: true,
  // The HTML report keeps what specs attach (the e2e screenshots): npx playwright show-report.
  reporter: [['list'], ['html', { open: 'never', outputFolder: 'playwright-report' }]],
  outputDir: 'test-results',
  use: {
    browserName: 'chromium',
    launchOptions: chromiumLaunchOptions,
  },
});
