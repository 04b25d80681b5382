import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { chooseEncFile, encrypt, getKey, keep, sha256, sha256File, startDownload } from './demo.js';
import { expect, openDemo, test } from './fixtures.js';

/**
 * The demo end to end: a person encrypts for bob@example.com (signing with Yivi on the wallet
 * simulator page), then Bob opens the file on the decrypt page with a QR session and gets the
 * same bytes back.
 */

const BOB = 'bob@example.com';
const ALICE = 'alice@example.org';

test('a message for bob@example.com: encrypted, then previewed and downloaded with the same bytes', async ({
  page,
  context,
  stack,
}) => {
  const text = 'Hello Bob,\nthe meeting moved to Thursday. — Alice ✉️\n';
  await openDemo(page, stack, 'encrypt');
  const sealed = await encrypt(page, context, stack, {
    recipients: [{ email: BOB }],
    content: { text },
    sender: { yivi: { email: ALICE } },
  });
  expect(sealed.suggestedFilename()).toBe('message.txt.enc');
  await expect(page.locator('#signer-status')).toHaveText(`Signing as E-mail address ${ALICE}.`);

  await openDemo(page, stack, 'decrypt');
  await chooseEncFile(page, await keep(sealed, test.info().outputPath()));
  // The header, before any key: the recipient and the sender's verified identity.
  await expect(page.locator('#sender')).toContainText(`E-mail address: ${ALICE}`);
  await expect(page.getByRole('radio', { name: new RegExp(`^${BOB}`) })).toBeChecked();
  expect(await getKey(page, context, stack)).toBe('session');

  await page.getByRole('button', { name: 'Preview' }).click();
  await expect(page.locator('#preview-area pre')).toHaveText(text);
  await expect(page.locator('#verified')).toContainText(`E-mail address: ${ALICE}`);

  const plain = await startDownload(page);
  expect(plain.suggestedFilename()).toBe('message.txt');
  expect(await plain.failure()).toBeNull();
  expect(await readFile(await plain.path(), 'utf8')).toBe(text);
  await expect(page.locator('#verified')).toContainText('Decrypted and saved as message.txt');
});

test('a file for bob@example.com: downloaded with the same bytes and its name back', async ({
  page,
  context,
  stack,
}) => {
  const bytes = randomBytes(3 * 1024 * 1024 + 12_345);
  await openDemo(page, stack, 'encrypt');
  const sealed = await encrypt(page, context, stack, {
    recipients: [{ email: BOB }],
    content: { files: [{ name: 'quarterly report.bin', mimeType: 'application/octet-stream', buffer: bytes }] },
    sender: { yivi: { email: ALICE } },
  });
  expect(sealed.suggestedFilename()).toBe('quarterly report.bin.enc');

  await openDemo(page, stack, 'decrypt');
  await chooseEncFile(page, await keep(sealed, test.info().outputPath()));
  await getKey(page, context, stack);
  // Not a previewable type.
  await expect(page.getByRole('button', { name: 'Preview' })).toBeHidden();
  const plain = await startDownload(page);
  expect(plain.suggestedFilename()).toBe('quarterly report.bin');
  expect(await plain.failure()).toBeNull();
  expect(await sha256File(await plain.path())).toBe(sha256(bytes));
});

test('two recipients, one also bound to a mobile number; the sender signs a private mobile number too', async ({
  page,
  context,
  stack,
}) => {
  const text = 'for the two of you';
  await openDemo(page, stack, 'encrypt');
  const sealed = await encrypt(page, context, stack, {
    recipients: [
      { email: 'carol@example.net' },
      { email: BOB, extras: [{ label: 'Mobile number', value: '+31 6 1234 5678' }] },
    ],
    content: { text },
    sender: { yivi: { email: ALICE, mobile: '+31698765432' } },
  });

  await openDemo(page, stack, 'decrypt');
  await chooseEncFile(page, await keep(sealed, test.info().outputPath()));
  // The hidden policy shows all but the last four characters of the number (a hint), nothing of the rest.
  const bob = page.getByRole('radio', { name: new RegExp(`^${BOB}`) });
  await expect(page.locator('#recipient-choices')).toContainText(
    'Whoever proves bob@example.com and: Mobile number +3161234****',
  );
  await expect(page.locator('#recipient-choices')).toContainText('Anyone who proves carol@example.net');
  // The public identity carries the e-mail address only.
  await expect(page.locator('#sender')).not.toContainText('+31698765432');
  await bob.check();
  await getKey(page, context, stack, { recipient: BOB, typed: { 'Your mobile number': '+31612345678' } });
  await page.getByRole('button', { name: 'Preview' }).click();
  await expect(page.locator('#preview-area pre')).toHaveText(text);
  const verified = page.locator('#verified');
  // The content is signed with the private key only, so the address is the header's claim.
  await expect(verified.locator('.badge')).toHaveText('Content signed by');
  await expect(verified).toContainText('Content signed by:Mobile number: +31698765432');
  await expect(verified).toContainText(
    `Claimed in the signed header (not part of the content signature):E-mail address: ${ALICE}`,
  );
  await expect(verified).not.toContainText('Verified sender');
});

test('a form with mistakes says what is wrong, next to the fields, and sends nothing', async ({ page, stack }) => {
  const requests: string[] = [];
  page.on('request', (r) => {
    if (r.url().startsWith(stack.pkgUrl)) requests.push(r.url());
  });
  await openDemo(page, stack, 'encrypt');
  await page.getByLabel('Recipient e-mail address').fill('not-an-address');
  await page.getByRole('button', { name: 'Encrypt and download' }).click();
  const email = page.getByLabel('Recipient e-mail address');
  await expect(email).toHaveAttribute('aria-invalid', 'true');
  await expect(email).toBeFocused();
  await expect(page.getByText('"not-an-address" is not an e-mail address.')).toBeVisible();
  await expect(page.getByText('Type a message to encrypt.')).toBeVisible();
  await page.getByLabel('Your e-mail address').fill('nonsense');
  await page.getByRole('button', { name: 'Encrypt and download' }).click();
  await expect(page.getByText('"nonsense" is not an e-mail address.')).toBeVisible();
  expect(requests).toEqual([]);
});
