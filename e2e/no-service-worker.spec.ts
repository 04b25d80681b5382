import { randomBytes } from 'node:crypto';
import { chooseEncFile, encrypt, getKey, keep, sha256, sha256File, startDownload } from './demo.js';
import { expect, openDemo, test } from './fixtures.js';

/**
 * Where no service worker can run (some private windows, plain http on a LAN address), the demo
 * still works: the ciphertext and the plaintext are assembled as Blobs chunk by chunk and offered
 * once complete, and the plaintext only after its last segment authenticated.
 */

test.use({ serviceWorkers: 'block' });

test('without a service worker: a file is encrypted and decrypted through Blobs, same bytes', async ({
  page,
  context,
  stack,
}) => {
  const bytes = randomBytes(2 * 1024 * 1024 + 99);
  await openDemo(page, stack, 'encrypt', false);
  const sealed = await encrypt(page, context, stack, {
    recipients: [{ email: 'bob@example.com' }],
    content: { files: [{ name: 'scan.bin', mimeType: 'application/octet-stream', buffer: bytes }] },
    sender: { yivi: {}, wallet: 'direct' },
  });
  await expect(page.locator('#result')).toContainText('Assembled in the browser, then saved (no service worker here).');

  await openDemo(page, stack, 'decrypt', false);
  await chooseEncFile(page, await keep(sealed, test.info().outputPath()));
  await getKey(page, context, stack);
  const plain = await startDownload(page);
  expect(plain.suggestedFilename()).toBe('scan.bin');
  expect(await plain.failure()).toBeNull();
  expect(await sha256File(await plain.path())).toBe(sha256(bytes));
  await expect(page.locator('#verified')).toContainText('Decrypted in the browser and saved once complete.');
});
