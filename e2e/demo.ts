import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { join } from 'node:path';
import type { BrowserContext, Download, Page } from '@playwright/test';
import { discloseDirectly, discloseInWallet, expect, type Stack } from './fixtures.js';

/**
 * What a person does in the demo, step by step, through labels and roles (the way assistive
 * technology sees the pages too).
 */

export interface RecipientEntry {
  email: string;
  /** Extra attributes by their label in the form ("Mobile number"). */
  extras?: Array<{ label: string; value: string }>;
}

export type Content =
  { text: string } | { files: string[] | Array<{ name: string; mimeType: string; buffer: Buffer }> };

/**
 * Who signs: a Yivi session (the demo's pages take no API key; an organisation's key is used
 * through the SDK in Node, as apikey.spec.ts does).
 */
export interface Sender {
  yivi: { email?: string; mobile?: string };
  /** How the phone is played: the wallet page (default), or directly from Node (discloseDirectly). */
  wallet?: 'page' | 'direct';
}

export interface EncryptRequest {
  recipients: RecipientEntry[];
  content: Content;
  sender: Sender;
}

export async function fillEncryptForm(page: Page, request: EncryptRequest): Promise<void> {
  for (let i = 1; i < request.recipients.length; i++) await page.getByRole('button', { name: 'Add recipient' }).click();
  const many = request.recipients.length > 1;
  for (const [i, recipient] of request.recipients.entries()) {
    await page
      .getByLabel(many ? `Recipient ${i + 1} e-mail address` : 'Recipient e-mail address')
      .fill(recipient.email);
    const row = page.locator('.recipient').nth(i);
    for (const extra of recipient.extras ?? []) {
      await row.getByLabel('Also require').selectOption({ label: extra.label });
      await row.getByRole('button', { name: 'Add attribute' }).click();
      await row.getByLabel(extra.label, { exact: true }).fill(extra.value);
    }
  }
  if ('text' in request.content) {
    await page.getByRole('radio', { name: 'A message' }).check();
    await page.getByRole('textbox', { name: 'Message' }).fill(request.content.text);
  } else {
    await page.getByRole('radio', { name: 'Files' }).check();
    await page.getByLabel('Files to encrypt').setInputFiles(request.content.files);
  }
  if (request.sender.yivi.email !== undefined)
    await page.getByLabel('Your e-mail address').fill(request.sender.yivi.email);
  await page.getByLabel('Also sign with my mobile number').setChecked(request.sender.yivi.mobile !== undefined);
}

/** Fills the form, presses Encrypt, proves the sender in the wallet if needed; returns the .enc download. */
export async function encrypt(
  page: Page,
  context: BrowserContext,
  stack: Stack,
  request: EncryptRequest,
): Promise<Download> {
  await fillEncryptForm(page, request);
  const download = page.waitForEvent('download', { timeout: 600_000 });
  await page.getByRole('button', { name: 'Encrypt and download' }).click();
  const values: Record<string, string> = {};
  if (request.sender.yivi.email === undefined) values['pbdf.sidn-pbdf.email.email'] = 'sender@example.org';
  if (request.sender.yivi.mobile !== undefined)
    values['pbdf.sidn-pbdf.mobilenumber.mobilenumber'] = request.sender.yivi.mobile;
  if (request.sender.wallet === 'direct') await discloseDirectly(page, values);
  else await discloseInWallet(context, page, stack, values);
  const saved = await download;
  await settled(page, '#result');
  await expect(page.locator('#result')).toContainText('Encrypted');
  expect(await saved.failure()).toBeNull();
  return saved;
}

/** Waits until the outcome region or the error alert shows, and fails with the alert's text if that came. */
export async function settled(page: Page, outcome: string): Promise<void> {
  const shown = page.locator(`${outcome}:not([hidden]), #error:not([hidden])`).first();
  await shown.waitFor({ timeout: 600_000 });
  const error = page.locator('#error');
  if (await error.isVisible()) throw new Error(`the page shows an error: ${await error.innerText()}`);
}

export async function chooseEncFile(
  page: Page,
  file: string | { name: string; mimeType: string; buffer: Buffer },
): Promise<void> {
  await page.getByLabel(/Drop a \.enc file here/).setInputFiles(file);
}

export interface KeyRequest {
  recipient?: string;
  /** Hidden values typed into the decrypt form, by label ("Your mobile number"). */
  typed?: Record<string, string>;
  remember?: boolean;
  /** What the wallet discloses beyond prefilled values. */
  disclose?: Record<string, string>;
  /** Whether a QR scan is expected (false: a remembered key). */
  expectScan?: boolean;
}

/** Picks the recipient, presses "Get my key", does the scan if one is asked for; returns where the key came from. */
export async function getKey(
  page: Page,
  context: BrowserContext,
  stack: Stack,
  request: KeyRequest = {},
): Promise<string> {
  await expect(page.locator('#file-info')).toBeVisible();
  if (request.recipient !== undefined)
    await page
      .getByRole('radio', { name: new RegExp(`^${request.recipient.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`) })
      .check();
  for (const [label, value] of Object.entries(request.typed ?? {})) await page.getByLabel(label).fill(value);
  await page.getByLabel(/Remember my key/).setChecked(request.remember ?? false);
  await page.getByRole('button', { name: 'Get my key with Yivi' }).click();
  if (request.expectScan ?? true) {
    await discloseInWallet(context, page, stack, request.disclose ?? {});
  }
  const open = page.locator('#open');
  await settled(page, '#open');
  if (request.expectScan === false) await expect(page.locator('.session')).toBeHidden();
  return (await open.getAttribute('data-key-source')) ?? '';
}

/** Presses Download; returns the browser download (not yet awaited for success). */
export async function startDownload(page: Page): Promise<Download> {
  const download = page.waitForEvent('download', { timeout: 600_000 });
  await page.getByRole('button', { name: 'Download', exact: true }).click();
  return download;
}

/** Keeps a download under its suggested name (the browser's copy has a random one) in `dir`. */
export async function keep(download: Download, dir: string): Promise<string> {
  const path = join(dir, download.suggestedFilename());
  await download.saveAs(path);
  return path;
}

export async function sha256File(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

export const sha256 = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');
