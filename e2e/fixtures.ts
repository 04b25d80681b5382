import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test as base, expect, type BrowserContext, type Page } from '@playwright/test';
import { build } from 'vite';
import { demoConfig } from '../demo/vite.js';
import type { PkgKeys } from '../lib/keys.js';
import { readPkgKeys } from '../server/keyfiles.js';
import { createApiKey } from '../server/db.js';
import { createTestSchema, type TestSchema } from '../server/db/testing.js';
import { startDev, type DevStack } from '../scripts/dev.js';
import { disclose } from '../devtools/standin/wallet.js';

/**
 * The whole product on loopback, as `npm start` runs it but on ephemeral ports (so a running
 * `npm start` is never in the way): the demo built by Vite and served by its preview server, the
 * PKG (real HTTP, real keys, an API-key database in a private PostgreSQL schema) and the stand-in
 * Yivi server with its wallet simulator page. One stack per Playwright worker; every test gets a
 * fresh browser context (so IndexedDB, the service worker and downloads start empty).
 */

const DEMO_BUILD = fileURLToPath(new URL('../tmp/e2e-demo/', import.meta.url));

export interface Stack {
  demoUrl: string;
  pkgUrl: string;
  walletUrl: string;
  /** The PKG's master keys (for pg-wasm interop in Node). */
  keys: PkgKeys;
  /** An organisation API key (signs as API_KEY_EMAIL). */
  apiKey: string;
  /** A scratch directory for this worker's files. */
  dir: string;
}

export const API_KEY_EMAIL = 'newsletter@example.com';
export const API_KEY_ORG = 'Example BV';

/**
 * Builds the demo into `demoBuild` and starts the stack around it; `close` stops it and removes
 * what it made. Also used by the cross-engine specs (e2e/engines/), one stack per test worker.
 */
export async function startStack(demoBuild: string): Promise<Stack & { close(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'pg-e2e-'));
  let schema: TestSchema | undefined;
  let dev: DevStack | undefined;
  const close = async () => {
    await dev?.close();
    await schema?.drop();
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await build({
      ...demoConfig({ outDir: demoBuild }),
      build: { ...demoConfig().build, outDir: demoBuild, sourcemap: false },
    });
    schema = await createTestSchema();
    const apiKey = await createApiKey(schema.url, { email: API_KEY_EMAIL, org: API_KEY_ORG });
    const keyDir = join(dir, 'keys');
    dev = await startDev(
      {
        host: '127.0.0.1',
        pkgPort: 0,
        standinPort: 0,
        demoPort: 0,
        demo: 'build',
        demoDir: demoBuild,
        origins: [],
        keyDir,
      },
      // The specs ask for many keys in a few seconds; the limits have their own tests.
      { LOG_LEVEL: 'error', PKG_RATELIMIT_DISABLED: 'true', DATABASE_URL: schema.url },
    );
    const keys = await readPkgKeys({
      ibePublic: join(keyDir, 'pkg_ibe.pub'),
      ibeSecret: join(keyDir, 'pkg_ibe.sec'),
      ibsPublic: join(keyDir, 'pkg_ibs.pub'),
      ibsSecret: join(keyDir, 'pkg_ibs.sec'),
    });
    return { demoUrl: dev.demoUrl!, pkgUrl: dev.pkg.url, walletUrl: dev.walletUrl, keys, apiKey, dir, close };
  } catch (error) {
    await close();
    throw error;
  }
}

export const test = base.extend<object, { stack: Stack }>({
  stack: [
    async ({}, use) => {
      const stack = await startStack(DEMO_BUILD);
      try {
        await use(stack);
      } finally {
        await stack.close();
      }
    },
    { scope: 'worker', timeout: 120_000 },
  ],
});

export { expect };

/** Opens a demo page and waits until its services (config, workers, service worker) are up. */
export async function openDemo(
  page: Page,
  stack: Stack,
  which: 'encrypt' | 'decrypt',
  serviceWorker = true,
): Promise<void> {
  await page.goto(`${stack.demoUrl}${which === 'encrypt' ? '' : 'decrypt.html'}`);
  await expect(page.locator('body')).toHaveAttribute('data-ready', 'true');
  await expect(page.locator('body')).toHaveAttribute('data-service-worker', String(serviceWorker));
}

/** The client token of the session the page shows, from its same-device link (the QR's pointer). */
export async function shownSessionToken(page: Page): Promise<string> {
  const link = page.getByRole('link', { name: 'Open the Yivi app on this device' });
  await expect(link).toBeVisible();
  const href = (await link.getAttribute('href')) ?? '';
  const pointer = JSON.parse(decodeURIComponent(new URL(href).hash.slice(1))) as { u: string };
  const token = new URL(pointer.u).pathname.split('/').pop();
  if (!token) throw new Error(`no session pointer in ${href}`);
  return token;
}

/**
 * Plays the phone: opens the wallet simulator page (as a person would, in another tab), finds the
 * session the demo page shows, fills in any values and presses Disclose.
 */
export async function discloseInWallet(
  context: BrowserContext,
  page: Page,
  stack: Stack,
  values: Record<string, string> = {},
): Promise<void> {
  const token = await shownSessionToken(page);
  const wallet = await context.newPage();
  try {
    await wallet.goto(stack.walletUrl);
    const form = wallet.locator(`form[action="wallet/${token}/disclose"]`);
    await expect(form).toBeVisible();
    for (const [type, value] of Object.entries(values)) {
      await form.locator('li', { hasText: type }).getByRole('textbox').fill(value);
    }
    await form.getByRole('button', { name: 'Disclose' }).click();
    await expect(wallet.getByRole('status')).toHaveText('Disclosed: proof status VALID.');
  } finally {
    await wallet.close();
  }
}

/**
 * Plays the phone from Node, without opening the wallet page: discloses `values` to the session
 * the page shows, over the stand-in's wallet API. For specs whose subject is not the wallet (the
 * sender's step of a large or a service-worker-less run): the same session, a page load less.
 */
export async function discloseDirectly(page: Page, values: Record<string, string> = {}): Promise<void> {
  const link = page.getByRole('link', { name: 'Open the Yivi app on this device' });
  await expect(link).toBeVisible();
  expect((await disclose((await link.getAttribute('href')) ?? '', values)).proofStatus).toBe('VALID');
}

/** Plays the phone that refuses: presses Cancel on the wallet page for the session the demo shows. */
export async function cancelInWallet(context: BrowserContext, page: Page, stack: Stack): Promise<void> {
  const token = await shownSessionToken(page);
  const wallet = await context.newPage();
  try {
    await wallet.goto(stack.walletUrl);
    await wallet.locator(`form[action="wallet/${token}/cancel"]`).getByRole('button', { name: 'Cancel' }).click();
    await expect(wallet.getByRole('status')).toHaveText('Cancelled.');
  } finally {
    await wallet.close();
  }
}

export const EMAIL = 'pbdf.sidn-pbdf.email.email';
export const MOBILE = 'pbdf.sidn-pbdf.mobilenumber.mobilenumber';
