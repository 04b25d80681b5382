import { randomBytes } from 'node:crypto';
import type { Page, TestInfo } from '@playwright/test';
import { chooseEncFile, fillEncryptForm, getKey } from './demo.js';
import { MOBILE, expect, openDemo, test } from './fixtures.js';
import { layout, sealWithPolicy } from './sealing.js';

/**
 * Every page in its main states at desktop and phone width, attached to the test report
 * (playwright-report/). Each shot also checks what a person would notice first: nothing wider than
 * the screen, and every visible form control labelled.
 */

const VIEWPORTS = [
  { name: 'desktop', width: 1280, height: 800 },
  { name: 'phone', width: 390, height: 844 },
] as const;

async function shoot(page: Page, info: TestInfo, name: string): Promise<void> {
  // Progress bars and the QR settle before the picture.
  await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  expect(overflow, `${name}: content wider than the viewport`).toBeLessThanOrEqual(0);
  const unlabelled = await page.evaluate(() =>
    Array.from(document.querySelectorAll<HTMLInputElement>('input, select, textarea'))
      .filter((el) => el.type !== 'hidden' && el.offsetParent !== null)
      .filter((el) => (el.labels?.length ?? 0) === 0 && !el.getAttribute('aria-label'))
      .map((el) => el.outerHTML),
  );
  expect(unlabelled, `${name}: controls without a label`).toEqual([]);
  const path = info.outputPath(`${name}.png`);
  await page.screenshot({ path, fullPage: true });
  await info.attach(name, { path, contentType: 'image/png' });
}

for (const viewport of VIEWPORTS) {
  test.describe(`at ${viewport.name} width (${viewport.width}px)`, () => {
    test.use({ viewport: { width: viewport.width, height: viewport.height } });

    test("encrypt page: empty, filled in, and waiting for the sender's scan", async ({ page, stack }, info) => {
      await openDemo(page, stack, 'encrypt');
      await shoot(page, info, `encrypt-empty-${viewport.name}`);
      await fillEncryptForm(page, {
        recipients: [
          { email: 'bob@example.com', extras: [{ label: 'Mobile number', value: '+31612345678' }] },
          { email: 'carol@example.net' },
        ],
        content: { text: "The minutes of Thursday's meeting are attached." },
        sender: { yivi: { email: 'alice@example.org', mobile: '+31698765432' } },
      });
      await shoot(page, info, `encrypt-filled-${viewport.name}`);
      await page.getByRole('button', { name: 'Encrypt and download' }).click();
      await expect(page.locator('.session .qr svg')).toBeVisible();
      await shoot(page, info, `encrypt-scan-${viewport.name}`);
      await page.locator('.session').getByRole('button', { name: 'Cancel' }).click();
      await expect(page.getByRole('alert')).toContainText('The Yivi session was cancelled.');
      await shoot(page, info, `encrypt-cancelled-${viewport.name}`);
    });

    test('decrypt page: empty, a file picked, the scan, decrypted with a preview, and a damaged file', async ({
      page,
      context,
      stack,
    }, info) => {
      const ts = Math.floor(Date.now() / 1000) - 1;
      const policy = {
        'bob@example.com': {
          ts,
          con: [
            { t: 'pbdf.sidn-pbdf.email.email', v: 'bob@example.com' },
            { t: MOBILE, v: '+31612345678' },
          ],
        },
        'carol@example.net': { ts, con: [{ t: 'pbdf.sidn-pbdf.email.email', v: 'carol@example.net' }] },
      };
      const text = "The minutes of Thursday's meeting:\n1. Budget approved.\n2. Next meeting on the 14th.\n";
      const ct = Buffer.from(await sealWithPolicy(stack, policy, 'alice@example.org', new TextEncoder().encode(text)));

      await openDemo(page, stack, 'decrypt');
      await shoot(page, info, `decrypt-empty-${viewport.name}`);
      await chooseEncFile(page, { name: 'minutes.txt.enc', mimeType: 'application/octet-stream', buffer: ct });
      await expect(page.locator('#file-info')).toBeVisible();
      await shoot(page, info, `decrypt-file-${viewport.name}`);
      await page.getByRole('button', { name: 'Get my key with Yivi' }).click();
      await expect(page.locator('.session .qr svg')).toBeVisible();
      await shoot(page, info, `decrypt-scan-${viewport.name}`);
      await page.locator('.session').getByRole('button', { name: 'Cancel' }).click();
      await expect(page.getByRole('alert')).toBeVisible();

      await getKey(page, context, stack, { typed: { 'Your mobile number': '+31612345678' } });
      await page.getByRole('button', { name: 'Preview' }).click();
      await expect(page.locator('#preview-area pre')).toHaveText(text);
      await shoot(page, info, `decrypt-preview-${viewport.name}`);

      const big = await sealWithPolicy(
        stack,
        { 'bob@example.com': policy['bob@example.com'] },
        'alice@example.org',
        randomBytes(600_000),
      );
      big[layout(big).framing + layout(big).segment + 10]! ^= 1;
      await chooseEncFile(page, {
        name: 'report.pdf.enc',
        mimeType: 'application/octet-stream',
        buffer: Buffer.from(big),
      });
      await getKey(page, context, stack, { typed: { 'Your mobile number': '+31612345678' } });
      await page.getByRole('button', { name: 'Download', exact: true }).click();
      await expect(page.getByRole('alert')).toContainText('This file was changed after it was encrypted.');
      await shoot(page, info, `decrypt-tampered-${viewport.name}`);
    });
  });
}
