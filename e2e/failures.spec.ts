import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { chooseEncFile, getKey } from './demo.js';
import { EMAIL, MOBILE, cancelInWallet, expect, openDemo, test } from './fixtures.js';
import { layout, sealInNode, sealWithPolicy } from './sealing.js';

/**
 * Damaged files: the decrypt page must never hand over plaintext that did not authenticate. The
 * service worker authenticates a picked file completely before the first byte (worker/README.md),
 * so a change or a cut anywhere, even in the last segment, never becomes a download at all, and
 * the page says what happened.
 */

const BOB = 'bob@example.com';
const SENDER = 'alice@example.org';

const cases = [
  {
    name: 'a flipped bit in the third segment',
    code: 'TAMPERED',
    text: 'changed after it was encrypted',
    edit: (ct: Uint8Array) => {
      const { framing, segment } = layout(ct);
      ct[framing + 2 * segment + 4000]! ^= 0x01;
      return ct;
    },
  },
  {
    // Without another length to compare with, a final segment one byte short is a changed one.
    name: 'the last byte cut off',
    code: 'TAMPERED',
    text: 'incomplete|changed after it was encrypted',
    edit: (ct: Uint8Array) => ct.slice(0, ct.length - 1),
  },
  {
    name: 'the final segment cut off at a segment boundary',
    code: 'TRUNCATED',
    text: 'incomplete|changed after it was encrypted',
    edit: (ct: Uint8Array) => {
      const { framing, segment } = layout(ct);
      return ct.slice(0, framing + 3 * segment);
    },
  },
] as const;

for (const c of cases) {
  test(`${c.name}: no download starts and the page shows why`, async ({ page, context, stack }) => {
    // Three whole segments and a bit: the damage is found after plaintext started flowing.
    const plain = randomBytes(3 * 262_144 + 5000);
    const ct = c.edit(await sealInNode(stack, [BOB], SENDER, plain));
    const path = join(test.info().outputPath(), 'statement.pdf.enc');
    await writeFile(path, ct);

    await openDemo(page, stack, 'decrypt');
    await chooseEncFile(page, path);
    await getKey(page, context, stack);
    let downloads = 0;
    page.on('download', () => downloads++);
    await page.getByRole('button', { name: 'Download', exact: true }).click();

    const alert = page.getByRole('alert');
    await expect(alert).toBeVisible();
    await expect(alert).toContainText(new RegExp(c.text));
    await expect(alert).toContainText('do not use any partial file');
    await expect(alert).toHaveAttribute('data-code', new RegExp(`^(${c.code})$`));
    await expect(page.locator('.progress')).toHaveAttribute('data-state', 'failed');
    await expect(page.locator('#verified')).toBeHidden();
    // Nothing reached the browser's downloads.
    expect(downloads).toBe(0);
  });
}

test('a file that is not PostGuard, and one damaged in its header, are refused when picked', async ({
  page,
  stack,
}) => {
  await openDemo(page, stack, 'decrypt');
  await chooseEncFile(page, {
    name: 'holiday.jpg.enc',
    mimeType: 'application/octet-stream',
    buffer: randomBytes(5000),
  });
  await expect(page.getByRole('alert')).toContainText('This is not a PostGuard file.');
  await expect(page.locator('#file-info')).toBeHidden();

  const ct = await sealInNode(stack, [BOB], SENDER, randomBytes(1000));
  // Inside the header: its signature no longer verifies (or it no longer parses).
  ct[40]! ^= 0x20;
  await chooseEncFile(page, { name: 'header.enc', mimeType: 'application/octet-stream', buffer: Buffer.from(ct) });
  await expect(page.getByRole('alert')).toHaveAttribute('data-code', /^(BAD_SIGNATURE|MALFORMED)$/);
  await expect(page.locator('#file-info')).toBeHidden();
});

test('the wrong person: a proof of another mobile number gives a key that opens nothing, and the page says so', async ({
  page,
  context,
  stack,
}) => {
  const ts = Math.floor(Date.now() / 1000) - 1;
  const policy = {
    [BOB]: {
      ts,
      con: [
        { t: EMAIL, v: BOB },
        { t: MOBILE, v: '+31611112222' },
      ],
    },
  };
  const ct = await sealWithPolicy(stack, policy, SENDER, randomBytes(1000));
  await openDemo(page, stack, 'decrypt');
  await chooseEncFile(page, { name: 'note.txt.enc', mimeType: 'application/octet-stream', buffer: Buffer.from(ct) });
  // The PKG issues a key for whatever is proved: here a number that is not the one the file names.
  await getKey(page, context, stack, { typed: { 'Your mobile number': '+31633334444' } });
  await page.getByRole('button', { name: 'Preview' }).click();
  const alert = page.getByRole('alert');
  await expect(alert).toHaveAttribute('data-code', 'WRONG_KEY');
  await expect(alert).toContainText('Your key does not open this file.');
  await expect(page.locator('#preview-area')).toBeHidden();
});

test('a scan refused in the wallet: no key, and the page says the session was cancelled', async ({
  page,
  context,
  stack,
}) => {
  const ct = await sealInNode(stack, [BOB], SENDER, randomBytes(1000));
  await openDemo(page, stack, 'decrypt');
  await chooseEncFile(page, { name: 'note.txt.enc', mimeType: 'application/octet-stream', buffer: Buffer.from(ct) });
  await page.getByRole('button', { name: 'Get my key with Yivi' }).click();
  await cancelInWallet(context, page, stack);
  await expect(page.getByRole('alert')).toContainText('The Yivi session was cancelled.');
  await expect(page.locator('.session')).toBeHidden();
  await expect(page.locator('#open')).toBeHidden();
});
