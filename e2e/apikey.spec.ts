import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PostGuard } from '../sdk/index.js';
import { chooseEncFile, getKey } from './demo.js';
import { API_KEY_EMAIL, expect, openDemo, test } from './fixtures.js';

/**
 * An organisation signs with its API key (PG-…, from PostgreSQL) instead of a Yivi session. A key
 * belongs on a server, so it is used where an organisation uses it: through the SDK in Node (the
 * demo's pages take none, and the library refuses one in a page). What a recipient then sees is
 * the demo's: the organisation as the sender, no scan of the sender's. An unknown, revoked or
 * expired key is refused before anything is sealed or uploaded: client/pkg-real.test.ts.
 */

test('sealed through the SDK with an organisation API key: recipients see the organisation in the demo', async ({
  page,
  context,
  stack,
}) => {
  const pg = new PostGuard({ pkgUrl: stack.pkgUrl, allowInsecureUrls: true });
  const sealed = await pg
    .encrypt({
      data: new TextEncoder().encode('Your monthly statement is ready.'),
      recipients: [pg.recipient.email('bob@example.com')],
      sign: pg.sign.apiKey(stack.apiKey),
    })
    .toBytes();
  const path = join(test.info().outputPath(), 'message.txt.enc');
  await writeFile(path, sealed);

  await openDemo(page, stack, 'decrypt');
  await chooseEncFile(page, path);
  await expect(page.locator('#sender')).toContainText(`E-mail address: ${API_KEY_EMAIL}`);
  await getKey(page, context, stack);
  await page.getByRole('button', { name: 'Preview' }).click();
  await expect(page.locator('#preview-area pre')).toHaveText('Your monthly statement is ready.');
});
