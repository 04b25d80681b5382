import { seal } from '../../lib/index.js';
import { extractSigningKey } from '../../lib/keys.js';
import { qrSvg } from '../../lib/pkg/qr.js';
import { disclose } from '../../devtools/standin/wallet.js';
import { startPkg, type RunningPkg } from '../../server/testing.js';
import { test, expect } from './fixtures.js';

/**
 * The PKG client in Chromium against the real PKG and stand-in Yivi server on loopback (another
 * origin than the page, so every call is a CORS request): status by the browser's EventSource, the
 * QR as SVG and canvas, IndexedDB for public keys and the opt-in JWT/key cache, abort.
 * The test plays the phone: it reads the QR text from the page and discloses with the simulated wallet.
 */

type Pgt = import('./app/main.js').Pgt;
declare const pgt: Pgt;

const EMAIL = 'irma-demo.sidn-pbdf.email.email';
const ALICE = 'alice@example.org';

let pkg: RunningPkg;
test.beforeAll(async () => {
  pkg = await startPkg({ allowedOrigins: ['*'] });
});
test.afterAll(async () => {
  await pkg?.close();
});

/** A message for Alice, sealed in Node with keys from the PKG's master keys. */
async function sealForAlice(text: string): Promise<string> {
  const ts = pkg.clock.now();
  const sender = { ts, con: [{ t: EMAIL, v: 'bob@example.org' }] };
  const ct = await seal(
    pkg.keys.mpk,
    {
      policy: { [ALICE]: { ts, con: [{ t: EMAIL, v: ALICE }] } },
      pubSignKey: { key: extractSigningKey(pkg.keys.sk, sender), policy: sender },
    },
    new TextEncoder().encode(text),
  );
  return Buffer.from(ct).toString('base64');
}

test('the recipient flow: QR, EventSource status, key, file opened; then cached, then forgotten', async ({
  app,
  page,
}) => {
  void app;
  const eventSources: string[] = [];
  page.on('request', (request) => {
    if (request.url().includes('/statusevents/')) eventSources.push(request.resourceType());
  });
  await page.evaluate(() => pgt.init());
  await page.evaluate((url) => pgt.makePkgClient(url, true), pkg.url);
  expect(await page.evaluate(() => pgt.publicKeys())).toEqual({ mpk: pkg.keys.mpk, vk: pkg.keys.vk });

  await page.evaluate(([ct, id, vk]) => pgt.startOpen(ct, id, vk), [
    await sealForAlice('first file'),
    ALICE,
    pkg.keys.vk,
  ] as const);
  await expect.poll(() => page.evaluate(() => pgt.qrText())).toMatch(/^https:\/\/open\.yivi\.app\/-\/session#/);
  const qrText = (await page.evaluate(() => pgt.qrText())) as string;
  // The page drew the modules of this very text (the SVG is ours: compare its path).
  const path = /<path fill="#000" d="([^"]+)"/.exec(qrSvg(qrText))![1];
  expect((await page.locator('#qr-svg path').getAttribute('d')) === path).toBe(true);
  expect(await page.evaluate(() => pgt.canvasSize())).toBeGreaterThan(100);
  expect(await page.evaluate(() => pgt.sameDeviceLink())).toMatch(/^https:\/\/open\.yivi\.app\/-\/session#%7B/);

  await disclose(qrText, { [EMAIL]: ALICE });
  const first = await page.evaluate(() => pgt.finishOpen());
  expect(first).toMatchObject({
    text: 'first file',
    source: 'session',
    sender: { public: { con: [{ t: EMAIL, v: 'bob@example.org' }] } },
  });
  expect(eventSources).toContain('eventsource');
  expect(await page.evaluate(() => pgt.statuses)).toContain('DONE');

  const stored = (await page.evaluate(() => pgt.storedKeys())) as string[];
  expect(stored.filter((k) => k.includes('|jwt|'))).toHaveLength(1);
  expect(stored.filter((k) => k.includes('|usk|'))).toHaveLength(1);
  expect(stored.filter((k) => k.includes('|params|'))).toHaveLength(2);

  // A second file for Alice: no second scan while the JWT lasts.
  pkg.clock.advance(5);
  await page.evaluate(([ct, id, vk]) => pgt.startOpen(ct, id, vk), [
    await sealForAlice('second file'),
    ALICE,
    pkg.keys.vk,
  ] as const);
  expect(await page.evaluate(() => pgt.finishOpen())).toMatchObject({ text: 'second file', source: 'cached-jwt' });
  expect(await page.evaluate(() => pgt.qrText())).toBeUndefined();

  // After a reload, with the PKG unreachable: the public keys come from IndexedDB.
  await page.reload();
  await page.waitForFunction(() => 'pgt' in window);
  await page.evaluate((url) => pgt.makePkgClient(url, true, true), pkg.url);
  expect(await page.evaluate(() => pgt.publicKeys())).toEqual({ mpk: pkg.keys.mpk, vk: pkg.keys.vk });

  await page.evaluate(() => pgt.forgetKeys());
  const left = (await page.evaluate(() => pgt.storedKeys())) as string[];
  expect(left.filter((k) => /\|(?:jwt|usk)\|/.test(k))).toEqual([]);
  expect(left.filter((k) => k.includes('|params|'))).toHaveLength(2);
});

test('without the opt-in nothing secret is stored; an abort cancels the session at the identity server', async ({
  app,
  page,
}) => {
  void app;
  await page.evaluate(() => pgt.init());
  await page.evaluate((url) => pgt.makePkgClient(url, false), pkg.url);
  await page.evaluate(([ct, id, vk]) => pgt.startOpen(ct, id, vk, { abortAfterSession: true }), [
    await sealForAlice('never read'),
    ALICE,
    pkg.keys.vk,
  ] as const);
  expect(await page.evaluate(() => pgt.finishOpen())).toMatchObject({ error: { code: 'ABORTED', pkg: true } });
  const token = (await page.evaluate(() => pgt.sessionToken())) as string;
  await expect.poll(async () => (await fetch(`${pkg.yivi.url}/session/${token}/status`)).json()).toBe('CANCELLED');
  expect(((await page.evaluate(() => pgt.storedKeys())) as string[]).filter((k) => /\|(?:jwt|usk)\|/.test(k))).toEqual(
    [],
  );
});
