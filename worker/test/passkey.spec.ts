import type { CDPSession, Page } from '@playwright/test';
import { seal } from '../../lib/index.js';
import { extractSigningKey } from '../../lib/keys.js';
import { disclose } from '../../devtools/standin/wallet.js';
import { startPkg, type RunningPkg } from '../../server/testing.js';
import { dumpOriginStorage } from '../../e2e/storage-dump.js';
import { addVirtualAuthenticator } from '../../test/virtual-authenticator.js';
import { test, expect } from './fixtures.js';

/**
 * The key cache's passkey tier in Chromium with the DevTools protocol's virtual authenticators
 * (one with PRF and user verification, one without PRF), against the real PKG and stand-in wallet.
 * One page load for everything: a "page session" is a new PkgClient (its passkey key lives in the
 * client's memory, as it would in a page's). The page is served as `localhost`: WebAuthn refuses
 * an IP address as its relying party.
 */

type Pgt = import('./app/main.js').Pgt;
declare const pgt: Pgt;
declare const assertions: { count: number };

const EMAIL = 'irma-demo.sidn-pbdf.email.email';
const ALICE = 'alice@example.org';

let pkg: RunningPkg;
test.beforeAll(async () => {
  pkg = await startPkg({ allowedOrigins: ['*'] });
});
test.afterAll(async () => {
  await pkg?.close();
});

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

/** Opens `ct` for Alice; the test's wallet answers a QR if one is shown. */
async function open(page: Page, ct: string, options: { cacheOnly?: boolean } = {}) {
  await page.evaluate(([c, id, vk, o]) => pgt.startOpen(c, id, vk, o), [ct, ALICE, pkg.keys.vk, options] as const);
  const result = page.evaluate(() => pgt.finishOpen());
  const qr = await Promise.race([
    page.waitForFunction(() => pgt.qrText(), undefined, { timeout: 15_000 }).then((h) => h.jsonValue()),
    result.then(() => undefined),
  ]);
  if (typeof qr === 'string') await disclose(qr, { [EMAIL]: ALICE });
  return (await result) as { text?: string; source?: string; error?: { code?: string } };
}

test('the passkey tier: one assertion per page session, no scan for cached keys, nothing secret in storage; wrong passkey, removed authenticator, expiry and no PRF fail typed', async ({
  server,
  page,
}) => {
  const address = server.httpServer.address();
  if (typeof address !== 'object' || address === null) throw new Error('preview server has no port');
  await page.goto(`http://localhost:${address.port}/`);
  await page.waitForFunction(() => 'pgt' in window);
  await page.evaluate(async () => {
    await pgt.init();
    // Counts the passkey prompts the page asks for.
    const get = navigator.credentials.get.bind(navigator.credentials);
    (window as unknown as { assertions: { count: number } }).assertions = { count: 0 };
    navigator.credentials.get = (options) => {
      assertions.count++;
      return get(options);
    };
  });
  const starts: string[] = [];
  const jwts = new Set<string>();
  const usks = new Set<string>();
  page.on('request', (request) => {
    if (request.url().endsWith('/v2/irma/start')) starts.push(request.url());
    const bearer = /^Bearer (.+)$/.exec(request.headers()['authorization'] ?? '');
    if (request.url().includes('/v2/irma/key/') && bearer) jwts.add(bearer[1]!);
  });
  page.on('response', async (response) => {
    if (!response.url().includes('/v2/irma/key/') || response.status() !== 200) return;
    const body = (await response.json().catch(() => ({}))) as { key?: string };
    if (typeof body.key === 'string') usks.add(body.key);
  });
  const count = () => page.evaluate(() => assertions.count);
  const client = (tier: { credentialId?: string } = {}) =>
    page.evaluate(
      ([url, t]) => pgt.makePkgClient(url, true, false, { keyProtection: 'passkey', passkeyTimeoutMs: 1500, ...t }),
      [pkg.url, tier] as const,
    );

  const cdp = await page.context().newCDPSession(page);
  await cdp.send('WebAuthn.enable', { enableUI: false });
  const withPrf = await addVirtualAuthenticator(cdp, true);
  await client();
  const registered = await page.evaluate(() => pgt.registerPasskey());
  expect(registered).toMatchObject({ credentialId: expect.stringMatching(/^[\w-]{16,}$/) });

  // The first file: the passkey's one prompt, then the scan. The second: neither.
  const first = await sealForAlice('first file');
  expect(await open(page, first)).toMatchObject({ text: 'first file', source: 'session' });
  expect(starts).toHaveLength(1);
  expect(await count()).toBe(1);
  pkg.clock.advance(5);
  const second = await sealForAlice('second file');
  expect(await open(page, second)).toMatchObject({ text: 'second file', source: 'cached-jwt' });
  expect(await open(page, first)).toMatchObject({ text: 'first file', source: 'cache' });
  expect(starts).toHaveLength(1);
  expect(await count()).toBe(1);

  // At rest: sealed entries, no wrapping key of any kind, no byte of a JWT or key.
  expect(jwts.size).toBeGreaterThan(0);
  expect(usks.size).toBe(2);
  const secrets = [...jwts, ...usks].flatMap((s) => [
    s,
    Buffer.from(s.split('.').at(-1)!, s.includes('.') ? 'base64url' : 'base64').toString('latin1'),
  ]);
  const dump = await dumpOriginStorage(page);
  expect(dump).toContain('|usk|');
  expect(dump).toContain(`passkey:${(registered as { credentialId: string }).credentialId}`);
  expect(dump).not.toContain('CryptoKey');
  for (const secret of secrets)
    expect(dump.includes(secret), `a secret of ${secret.length} bytes in storage`).toBe(false);

  // A new page session: one prompt, and the cache alone opens the file.
  await client();
  expect(await open(page, first, { cacheOnly: true })).toMatchObject({ text: 'first file', source: 'cache' });
  expect(await count()).toBe(2);

  // Another passkey of the same authenticator: the entries are not its own.
  const other = (await page.evaluate(() => pgt.createPasskey())) as { credentialId: string };
  await client({ credentialId: other.credentialId });
  expect(await open(page, first, { cacheOnly: true })).toMatchObject({ error: { code: 'PASSKEY_MISMATCH' } });

  // The authenticator removed: the next page session's prompt fails, typed, and no scan starts.
  await cdp.send('WebAuthn.removeVirtualAuthenticator', { authenticatorId: withPrf });
  await client();
  expect(await open(page, second)).toMatchObject({ error: { code: 'PASSKEY_FAILED' } });
  expect(starts).toHaveLength(1);

  // Past 04:00 (the client's clock moved on): NOT_CACHED, and the entries are gone.
  await page.evaluate(() => (pgt.clockOffsetMs = 2 * 86_400_000));
  expect(await open(page, first, { cacheOnly: true })).toMatchObject({ error: { code: 'NOT_CACHED' } });
  await page
    .evaluate(() => pgt.storedKeys())
    .then((keys) => expect(keys.filter((k) => /\|(?:jwt|usk)\|/.test(k))).toEqual([]));
  await page.evaluate(() => (pgt.clockOffsetMs = 0));

  // An authenticator without PRF: PRF_UNAVAILABLE, and the passkey kept before stays the one in use.
  await addVirtualAuthenticator(cdp, false);
  expect(await page.evaluate(() => pgt.registerPasskey())).toMatchObject({ error: { code: 'PRF_UNAVAILABLE' } });
  const after = await dumpOriginStorage(page);
  expect(after).not.toContain('|usk|');
  expect(after).not.toContain('|jwt|');
  expect(after).not.toContain('CryptoKey');
});
