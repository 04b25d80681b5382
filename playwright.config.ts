import { fileURLToPath } from 'node:url';
import { defineConfig } from '@playwright/test';
import type { EngineOptions } from './e2e/engines/fixtures.js';
import { chromiumLaunchOptions } from './test/chromium.js';

const root = fileURLToPath(new URL('.', import.meta.url));
// Servers the specs start under tsx see the library's sources wherever their working folder is.
process.env['TSX_TSCONFIG_PATH'] ??= fileURLToPath(new URL('./tsconfig.json', import.meta.url));
const under = (pattern: string) => new RegExp(`^${root.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}${pattern}$`);

/**
 * Browser tests. Every server a spec needs is started by the spec itself on an ephemeral loopback
 * port. Two sets:
 *
 *   chromium          worker/test/*.spec.ts and e2e/*.spec.ts in Chromium through Playwright: the
 *                     whole runtime and demo, with what needs Chromium's DevTools protocol (per-thread
 *                     heap, frame timing) and the 1 GiB run
 *   engine-chromium   e2e/engines/*.spec.ts: the product's browser parts, one test body per test run
 *   engine-firefox    on each engine through e2e/engines/driver.ts (Firefox ESR over WebDriver BiDi,
 *   engine-webkit     WebKitGTK over WebDriver under xvfb)
 *
 *   npx playwright test                                   all of them
 *   npx playwright test --project=chromium                the Chromium-only set
 *   npx playwright test --project='engine-*' --workers=3  the cross-engine set, engines side by side
 */
export default defineConfig<EngineOptions>({
  testDir: '.',
  timeout: 180_000,
  expect: { timeout: 15_000 },
  // The machine is small and shared, and the Chromium specs measure memory and responsiveness:
  // one at a time unless asked (--workers) for the cross-engine set.
  workers: 1,
  fullyParallel: false,
  forbidOnly: true,
  // The HTML report keeps what specs attach (the e2e screenshots): npx playwright show-report.
  reporter: [['list'], ['html', { open: 'never', outputFolder: 'playwright-report' }]],
  outputDir: 'test-results',
  projects: [
    {
      name: 'chromium',
      // Only the suites at this checkout's root: scratch copies of the sources (benchmarks build old
      // commits under tmp/) are not the suite. Matched relative to the root, since Playwright matches
      // globs against absolute paths and a checkout may itself live under /tmp.
      testMatch: under('(worker/test|e2e)/[^/]+\\.spec\\.ts'),
      use: { browserName: 'chromium', launchOptions: chromiumLaunchOptions },
    },
    {
      // e2e/consumer: the packed packages installed into fresh apps (npm run test:consumers).
      name: 'consumers',
      testMatch: under('e2e/consumer/[^/]+\\.spec\\.ts'),
      use: { browserName: 'chromium', launchOptions: chromiumLaunchOptions },
    },
    ...(['chromium', 'firefox', 'webkit'] as const).map((engine) => ({
      name: `engine-${engine}`,
      testMatch: under('e2e/engines/[^/]+\\.spec\\.ts'),
      use: { engine },
    })),
    // e2e/pgjs: interop with the published @e4a/pg-js 1.6.0 both ways, on each engine's driver.
    ...(['chromium', 'firefox', 'webkit'] as const).map((engine) => ({
      name: `pgjs-${engine}`,
      testMatch: under('e2e/pgjs/[^/]+\\.spec\\.ts'),
      use: { engine },
    })),
  ],
});
