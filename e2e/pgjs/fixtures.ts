import { fileURLToPath } from 'node:url';
import { test as engineTest } from '../engines/fixtures.js';
import type { EnginePage } from '../engines/driver.js';
import type { PgJsPage, Received, Sent, Services } from './page/main.js';
import type { OursOpened, OursSent } from './page/ours.js';
import { startInteropStack, type InteropStack } from './stack.js';

/**
 * The interop spec's fixtures: the cross-engine ones (one browser and tab per worker, from
 * e2e/engines/fixtures.ts, so the same test body runs on every engine) plus the interop stack, and
 * the page's two pg-js calls, typed.
 */

const pageBuild = (engine: string, index: number) =>
  fileURLToPath(new URL(`../../tmp/pgjs/page-${engine}-${index}/`, import.meta.url));

export const test = engineTest.extend<object, { interop: InteropStack }>({
  interop: [
    async ({ engine }, use, info) => {
      const stack = await startInteropStack(pageBuild(engine, info.parallelIndex));
      try {
        await use(stack);
      } finally {
        await stack.close();
      }
    },
    { scope: 'worker', timeout: 120_000 },
  ],
});

/** Opens the pg-js page in `tab` and waits for its script. */
export async function openPage(tab: EnginePage, stack: InteropStack): Promise<void> {
  await tab.goto(stack.pageUrl);
  const deadline = Date.now() + 30_000;
  while (!(await tab.evaluate(() => document.body.dataset['ready'] === 'true'))) {
    if (Date.now() > deadline) throw new Error('the pg-js page did not start');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const services = (stack: InteropStack): Services => ({ pkgUrl: stack.pkgUrl, storageUrl: stack.storageUrl });

/** pg-js seals the three files, signs through a wallet session as the sender, and uploads them. */
export function pgjsSend(tab: EnginePage, stack: InteropStack): Promise<Sent> {
  return tab.evaluate((args) => (window as unknown as { pgjs: PgJsPage }).pgjs.send(args), services(stack));
}

/** pg-js opens upload `uuid` as the recipient, through a wallet session. */
export function pgjsReceive(tab: EnginePage, stack: InteropStack, uuid: string): Promise<Received> {
  return tab.evaluate((args) => (window as unknown as { pgjs: PgJsPage }).pgjs.receive(args), {
    ...services(stack),
    uuid,
  });
}

/** Our client in the page seals the three files, signs through a wallet session, and uploads them. */
export function oursSendInPage(tab: EnginePage, stack: InteropStack): Promise<OursSent> {
  return tab.evaluate((args) => (window as unknown as { pgjs: PgJsPage }).pgjs.oursSend(args), services(stack));
}

/** Our client in the page opens upload `uuid` file by file, then whole. */
export function oursOpenInPage(tab: EnginePage, stack: InteropStack, uuid: string): Promise<OursOpened> {
  return tab.evaluate((args) => (window as unknown as { pgjs: PgJsPage }).pgjs.oursOpen(args), {
    ...services(stack),
    uuid,
  });
}

export { expect } from '@playwright/test';
