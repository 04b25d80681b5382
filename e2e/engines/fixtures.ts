import { fileURLToPath } from 'node:url';
import { test as base, expect } from '@playwright/test';
import { serveApp } from '../../worker/test/fixtures.js';
import { startStack, type Stack } from '../fixtures.js';
import { launch, type Engine, type EngineBrowser, type EnginePage } from './driver.js';

/**
 * Fixtures for the cross-engine specs (e2e/engines/*.spec.ts). Playwright runs them once per
 * project (engine-chromium, engine-firefox, engine-webkit in playwright.config.ts); the `engine`
 * option picks the driver. Each test worker launches its browser once and builds its own copies of
 * the test app and the demo (build folders per engine and worker, so parallel workers never share
 * one); the tests of a worker share its one tab, each navigating it afresh.
 */

export interface EngineOptions {
  engine: Engine;
}

const scratch = (what: string, engine: Engine, index: number) =>
  fileURLToPath(new URL(`../../tmp/engines/${what}-${engine}-${index}/`, import.meta.url));

export const test = base.extend<
  object,
  EngineOptions & { browserOf: EngineBrowser; tab: EnginePage; runtimeApp: string; stack: Stack }
>({
  engine: ['chromium', { option: true, scope: 'worker' }],
  browserOf: [
    async ({ engine }, use) => {
      const browser = await launch(engine);
      try {
        await use(browser);
      } finally {
        await browser.close();
      }
    },
    { scope: 'worker', timeout: 120_000 },
  ],
  runtimeApp: [
    async ({ engine }, use, info) => {
      const app = await serveApp(scratch('runtime-app', engine, info.parallelIndex));
      try {
        await use(app.url);
      } finally {
        await app.close();
      }
    },
    { scope: 'worker', timeout: 120_000 },
  ],
  stack: [
    async ({ engine }, use, info) => {
      const stack = await startStack(scratch('demo', engine, info.parallelIndex));
      try {
        await use(stack);
      } finally {
        await stack.close();
      }
    },
    { scope: 'worker', timeout: 180_000 },
  ],
  // One tab per worker, navigated afresh by each test (WebKit's session ends with its last window).
  tab: [async ({ browserOf }, use) => use(await browserOf.newPage()), { scope: 'worker' }],
});

/** Polls `probe` until it returns something other than undefined/false, or fails after `timeoutMs`. */
export async function until<T>(
  probe: () => Promise<T | undefined | false>,
  what: string,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      // A navigation in between: try again.
      last = error;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}${last ? ` (last error: ${String(last)})` : ''}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export { expect };
export type { EnginePage, EngineBrowser, Engine };
