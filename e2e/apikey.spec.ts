import { chooseEncFile, encrypt, getKey, keep } from './demo.js';
import { API_KEY_EMAIL, expect, openDemo, test } from './fixtures.js';

/** An organisation signs with its API key (PG-…, from PostgreSQL) instead of a Yivi session. */

test('signed with an organisation API key: no sender scan, and recipients see the organisation', async ({
  page,
  context,
  stack,
}) => {
  await openDemo(page, stack, 'encrypt');
  const sealed = await encrypt(page, context, stack, {
    recipients: [{ email: 'bob@example.com' }],
    content: { text: 'Your monthly statement is ready.' },
    sender: { apiKey: stack.apiKey },
  });
  await expect(page.locator('#signer-status')).toHaveText(`Signing as E-mail address ${API_KEY_EMAIL}.`);

  await openDemo(page, stack, 'decrypt');
  await chooseEncFile(page, await keep(sealed, test.info().outputPath()));
  await expect(page.locator('#sender')).toContainText(`E-mail address: ${API_KEY_EMAIL}`);
  await getKey(page, context, stack);
  await page.getByRole('button', { name: 'Preview' }).click();
  await expect(page.locator('#preview-area pre')).toHaveText('Your monthly statement is ready.');
});

test('an unknown API key is refused with a clear message and nothing is downloaded', async ({ page, stack }) => {
  let downloads = 0;
  page.on('download', () => downloads++);
  await openDemo(page, stack, 'encrypt');
  await page.getByLabel('Recipient e-mail address').fill('bob@example.com');
  await page.getByRole('textbox', { name: 'Message' }).fill('hello');
  await page.getByRole('radio', { name: 'Organisation API key' }).check();
  await page.getByRole('textbox', { name: 'API key' }).fill('PG-thisKeyWasNeverIssuedByAnyone0123456789');
  await page.getByRole('button', { name: 'Encrypt and download' }).click();
  const alert = page.getByRole('alert');
  await expect(alert).toContainText('Not encrypted: The key server refused the credential.');
  await expect(alert).toHaveAttribute('data-code', 'UNAUTHORIZED');
  await expect(page.getByRole('button', { name: 'Encrypt and download' })).toBeEnabled();
  expect(downloads).toBe(0);
});
