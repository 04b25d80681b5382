import { chooseEncFile, getKey } from './demo.js';
import { expect, openDemo, test } from './fixtures.js';
import { policyFor, sealWithPolicy } from './sealing.js';
import { dumpOriginStorage } from './storage-dump.js';
import { addVirtualAuthenticator } from '../test/virtual-authenticator.js';

/**
 * "Remember my key": one Yivi scan serves every file for the same identity until the session
 * expires (04:00), kept in IndexedDB across reloads; "Forget my keys" drops it and the next file
 * asks for a scan again. Unchecked, nothing is kept.
 */

const BOB = 'bob@example.com';

async function files(stack: Parameters<typeof sealWithPolicy>[0]) {
  const now = Math.floor(Date.now() / 1000);
  const seal = async (text: string, ts: number) =>
    Buffer.from(await sealWithPolicy(stack, policyFor([BOB], ts), 'alice@example.org', new TextEncoder().encode(text)));
  // Sealed at different times: different keys (the policy timestamp is part of the identity).
  return {
    first: await seal('first letter', now - 20),
    second: await seal('second letter', now - 10),
    third: await seal('third letter', now - 5),
  };
}

async function open(page: import('@playwright/test').Page, name: string, buffer: Buffer): Promise<void> {
  await chooseEncFile(page, { name, mimeType: 'application/octet-stream', buffer });
}

async function previewText(page: import('@playwright/test').Page): Promise<string> {
  await page.getByRole('button', { name: 'Preview' }).click();
  const pre = page.locator('#preview-area pre');
  await expect(pre).toBeVisible();
  return pre.innerText();
}

test('a remembered key opens the next file for the same identity without a scan; after "forget" the page asks again', async ({
  page,
  context,
  stack,
}) => {
  const f = await files(stack);
  await openDemo(page, stack, 'decrypt');

  await open(page, 'first.txt.enc', f.first);
  expect(await getKey(page, context, stack, { remember: true })).toBe('session');
  expect(await previewText(page)).toBe('first letter');

  // Another file, sealed at another time: the session from the first scan fetches its key.
  await open(page, 'second.txt.enc', f.second);
  expect(await getKey(page, context, stack, { remember: true, expectScan: false })).toBe('cached-jwt');
  await expect(page.locator('#key-status')).toHaveText('Key fetched with your earlier Yivi session: no scan needed.');
  expect(await previewText(page)).toBe('second letter');

  // Kept in IndexedDB: a reload changes nothing; a key fetched before comes straight from the cache.
  await openDemo(page, stack, 'decrypt');
  await expect(page.getByLabel(/Remember my key/)).toBeChecked();
  await open(page, 'first.txt.enc', f.first);
  expect(await getKey(page, context, stack, { remember: true, expectScan: false })).toBe('cache');
  expect(await previewText(page)).toBe('first letter');

  await page.getByRole('button', { name: 'Forget my keys' }).click();
  await expect(page.locator('#forget-status')).toHaveText('Forgotten. The next file asks for a new Yivi scan.');
  await expect(page.locator('#open')).toBeHidden();

  await open(page, 'third.txt.enc', f.third);
  expect(await getKey(page, context, stack, { remember: true })).toBe('session');
  expect(await previewText(page)).toBe('third letter');
});

test('without "remember", every file asks for a scan', async ({ page, context, stack }) => {
  const f = await files(stack);
  await openDemo(page, stack, 'decrypt');
  await open(page, 'first.txt.enc', f.first);
  expect(await getKey(page, context, stack, { remember: false })).toBe('session');
  await open(page, 'second.txt.enc', f.second);
  await page.getByRole('button', { name: 'Get my key with Yivi' }).click();
  await expect(page.locator('.session .qr svg')).toBeVisible();
  await expect(page.getByRole('status').filter({ hasText: 'Waiting for you to scan the QR code' })).toBeVisible();
});

test('a remembered key and its session JWT are kept sealed: a dump of IndexedDB and OPFS holds no byte of them; "forget" leaves nothing', async ({
  page,
  context,
  stack,
}) => {
  const f = await files(stack);
  // What the PKG handed out: the JWT (the key request's bearer token) and the user secret key.
  const jwts = new Set<string>();
  const usks = new Set<string>();
  context.on('request', (request) => {
    if (!request.url().includes('/v2/irma/key/')) return;
    const bearer = /^Bearer (.+)$/.exec(request.headers()['authorization'] ?? '');
    if (bearer) jwts.add(bearer[1]!);
  });
  context.on('response', async (response) => {
    if (!response.url().includes('/v2/irma/key/') || response.status() !== 200) return;
    const body = (await response.json().catch(() => ({}))) as { key?: string };
    if (typeof body.key === 'string') usks.add(body.key);
  });
  await openDemo(page, stack, 'decrypt');
  await open(page, 'first.txt.enc', f.first);
  expect(await getKey(page, context, stack, { remember: true })).toBe('session');
  await open(page, 'second.txt.enc', f.second);
  expect(await getKey(page, context, stack, { remember: true, expectScan: false })).toBe('cached-jwt');
  expect(jwts.size).toBeGreaterThan(0);
  expect(usks.size).toBe(2);

  const secrets = [...jwts, ...usks].flatMap((s) => [
    s,
    // the raw bytes too: the USK's decoded, the JWT's signature part decoded
    Buffer.from(s.split('.').at(-1)!, s.includes('.') ? 'base64url' : 'base64').toString('latin1'),
  ]);
  const dump = await dumpOriginStorage(page);
  expect(dump).toContain('[CryptoKey AES-GCM extractable=false]');
  expect(dump).toContain('|usk|'); // the entries are there, sealed
  for (const secret of secrets)
    expect(dump.includes(secret), `a secret of ${secret.length} bytes in storage`).toBe(false);

  // Sealed, and still a cache hit after a reload.
  await openDemo(page, stack, 'decrypt');
  await open(page, 'first.txt.enc', f.first);
  expect(await getKey(page, context, stack, { remember: true, expectScan: false })).toBe('cache');
  expect(await previewText(page)).toBe('first letter');

  await page.getByRole('button', { name: 'Forget my keys' }).click();
  await expect(page.locator('#forget-status')).toHaveText('Forgotten. The next file asks for a new Yivi scan.');
  const after = await dumpOriginStorage(page);
  expect(after).not.toContain('|usk|');
  expect(after).not.toContain('|jwt|');
  expect(after).not.toContain('CryptoKey');
});

test('"Remember my key" behind a passkey (a virtual authenticator with PRF): the page says which key protects them; one prompt, then the next file opens without a scan', async ({
  page,
  context,
  stack,
}) => {
  const f = await files(stack);
  const cdp = await context.newCDPSession(page);
  await cdp.send('WebAuthn.enable', { enableUI: false });
  await addVirtualAuthenticator(cdp);
  // WebAuthn refuses an IP address as its relying party: the same demo, named localhost.
  await page.goto(`${stack.demoUrl.replace('//127.0.0.1:', '//localhost:')}decrypt.html`);
  await expect(page.locator('body')).toHaveAttribute('data-ready', 'true');
  await open(page, 'first.txt.enc', f.first);
  const tier = page.locator('#tier-status');
  await expect(tier).toHaveText("In use: this browser's own key.");
  await page.getByRole('radio', { name: /a passkey/ }).check();
  await expect(tier).toHaveText(/none is set up yet/);
  await page.getByRole('button', { name: 'Set up a passkey' }).click();
  await expect(tier).toHaveText('In use: your passkey. It is asked once per visit.');

  expect(await getKey(page, context, stack, { remember: true })).toBe('session');
  await open(page, 'second.txt.enc', f.second);
  expect(await getKey(page, context, stack, { remember: true, expectScan: false })).toBe('cached-jwt');
  await expect(page.locator('#key-status')).toHaveText(
    'Key fetched with your earlier Yivi session, unlocked by your passkey: no scan needed.',
  );
  expect(await previewText(page)).toBe('second letter');
  const dump = await dumpOriginStorage(page);
  expect(dump).toContain('|usk|');
  expect(dump).not.toContain('CryptoKey'); // no device key: the passkey's key is never stored

  // A reload (a new page session): still the passkey, which opens the remembered key without a scan.
  await page.reload();
  await expect(page.locator('body')).toHaveAttribute('data-ready', 'true');
  await open(page, 'first.txt.enc', f.first);
  await expect(tier).toHaveText('In use: your passkey. It is asked once per visit.');
  expect(await getKey(page, context, stack, { remember: true, expectScan: false })).toBe('cache');
  await expect(page.locator('#key-status')).toHaveText('Key remembered under your passkey: no scan needed.');
});
