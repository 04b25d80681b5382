import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { Browser, CDPSession } from '@playwright/test';
import { DEFAULT_SEGMENT_SIZE } from '../../lib/index.js';
import { SEGMENT_OVERHEAD } from '../../lib/segments.js';
import { splitFrame } from '../../lib/frame.js';
import { test, expect, type Keys } from './fixtures.js';
import { expectSeekResult, makeVideo, sealForStream } from './video.js';

/**
 * The decrypting service worker in Chromium: a ciphertext generated on the fly (sealed in the
 * crypto worker) streams into the service worker (both hops relayed, port-stream.ts) and comes back
 * as plaintext from a URL, with flat memory in every thread; a cancelled download stops the seal; real downloads via <a download>; tampered and truncated
 * ciphertexts make the body fail and the download be marked failed.
 */

type Pgt = import('./app/main.js').Pgt;
declare const pgt: Pgt;

const sha = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');
const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');
const unb64 = (text: string) => new Uint8Array(Buffer.from(text, 'base64'));
const MiB = 1024 * 1024;

/**
 * Live JS heap plus ArrayBuffer backing stores, per target (page, crypto worker, service worker),
 * each sample taken right after a forced garbage collection, so it counts what is held, not what
 * is waiting to be collected.
 */
async function heapMonitor(browser: Browser) {
  const cdp: CDPSession = await browser.newBrowserCDPSession();
  let nextId = 0;
  const pending = new Map<number, (result: any) => void>();
  cdp.on('Target.receivedMessageFromTarget', (event: { message: string }) => {
    const message = JSON.parse(event.message) as { id?: number; result?: unknown };
    if (message.id !== undefined) pending.get(message.id)?.(message.result);
  });
  const call = async (sessionId: string, method: string): Promise<any> => {
    const id = ++nextId;
    const answer = new Promise((resolve) => pending.set(id, resolve));
    await cdp.send('Target.sendMessageToTarget', { sessionId, message: JSON.stringify({ id, method }) });
    return answer;
  };
  const { targetInfos } = await cdp.send('Target.getTargets');
  const targets: Array<{ type: string; sessionId: string }> = [];
  for (const t of targetInfos as Array<{ type: string; targetId: string; url: string }>) {
    if (!['page', 'worker', 'service_worker'].includes(t.type) || t.url.startsWith('chrome')) continue;
    const { sessionId } = await cdp.send('Target.attachToTarget', { targetId: t.targetId, flatten: false });
    targets.push({ type: t.type, sessionId });
  }
  const sample = async (): Promise<Record<string, number>> => {
    const out: Record<string, number> = {};
    for (const { type, sessionId } of targets) {
      await call(sessionId, 'HeapProfiler.collectGarbage');
      const usage = (await call(sessionId, 'Runtime.getHeapUsage')) as {
        usedSize: number;
        backingStorageSize?: number;
      };
      // Summed per type: the crypto worker and its hashing worker are both 'worker'.
      out[type] = (out[type] ?? 0) + usage.usedSize + (usage.backingStorageSize ?? 0);
    }
    return out;
  };
  return { targets: targets.map((t) => t.type), sample, close: () => cdp.detach() };
}

/** Framing length and the whole-segment size, for cutting a ciphertext at a segment boundary. */
function framingOf(ct: Uint8Array): number {
  return splitFrame(ct).framingBytes;
}

test.beforeEach(async ({ app, page }) => {
  void app;
  await page.evaluate(() => pgt.init());
  expect(await page.evaluate(() => pgt.registerServiceWorker())).toBe(true);
});

test('64 MiB generated on the fly stream through the service worker: same bytes, flat memory', async ({
  page,
  browser,
  keys,
}) => {
  const size = Number(process.env.PG_SW_TEST_MIB ?? 64) * MiB;
  const monitor = await heapMonitor(browser);
  expect(monitor.targets.sort()).toEqual(['page', 'service_worker', 'worker', 'worker']);
  const baseline = await monitor.sample();
  const peaks = { ...baseline };
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const now = await monitor.sample();
      for (const [k, v] of Object.entries(now)) peaks[k] = Math.max(peaks[k] ?? 0, v);
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
  })();
  const started = Date.now();
  const r = await page.evaluate(([k, n]) => pgt.swStream(k.mpk, k.options, k.id, k.usk, k.vk, n), [
    keys,
    size,
  ] as const);
  const seconds = (Date.now() - started) / 1000;
  sampling = false;
  await sampler;
  await monitor.close();
  const growth = Object.fromEntries(Object.entries(peaks).map(([k, v]) => [k, +((v - baseline[k]!) / MiB).toFixed(1)]));
  console.log(
    `${size / MiB} MiB through the service worker in ${seconds.toFixed(1)} s; peak live memory growth (MiB): ${JSON.stringify(growth)}`,
  );
  expect(r).toMatchObject({ ok: true, bytes: size, status: 200, contentLength: null, sender: { public: keys.sender } });
  // Holding the file anywhere would add its size; streaming holds a few segments per thread, and the
  // service worker its hold limit (16 MiB authenticated before the response starts).
  for (const [target, mib] of Object.entries(growth))
    expect(mib, target).toBeLessThan(target === 'service_worker' ? 16 + 16 : 16);
});

test('a cancelled download stops the sealing behind it: the cancel crosses every relay back to the source', async ({
  page,
  keys,
}) => {
  const size = 256 * MiB;
  const r = await page.evaluate(([k, n]) => pgt.swCancel(k.mpk, k.options, k.id, k.usk, k.vk, n), [
    keys,
    size,
  ] as const);
  expect(r.sealError).toMatchObject({ code: 'SINK_FAILED', postguard: true });
  expect(r.done).toMatchObject({ code: 'CANCELLED', postguard: true });
  expect(r.sourceCancel).toMatchObject({ code: 'SINK_FAILED', postguard: true });
  // Read ahead: the service worker's hold limit (16 MiB verified before the response), a window and
  // a batch per relay and the segments in flight in each worker; not the 256 MiB.
  expect(r.read).toBeLessThan((16 + 16) * MiB);
});

test('a Blob source: Content-Length, file name, and a real download with the same bytes', async ({ page, keys }) => {
  const size = 2 * MiB + 333;
  const made = await page.evaluate(([k, n]) => pgt.makeBlob('plain', k.mpk, k.options, n), [keys, size] as const);
  const probe = await page.evaluate(
    ([k]) => pgt.swPrepare('plain', k.id, k.usk, k.vk, 'naïve report.pdf', { offload: true }),
    [keys] as const,
  );
  const fetched = await page.evaluate((url) => pgt.swFetch(url), probe.url);
  expect(fetched).toMatchObject({ status: 200, sha: made.sha, bytes: size });
  expect(fetched.headers['content-length']).toBe(String(size));
  // Asked to, the page's crypto worker decrypted, the service worker moved plaintext (sw-offload.ts).
  expect(fetched.headers['x-postguard-decrypted-by']).toBe('page-worker');
  expect(fetched.headers['content-disposition']).toBe(
    `attachment; filename="na_ve report.pdf"; filename*=UTF-8''na%C3%AFve%20report.pdf`,
  );
  expect(await page.evaluate((id) => pgt.swOutcome(id), probe.id)).toEqual({
    sender: { public: keys.sender, contentSigner: 'public', bound: true },
  });
  // Single use.
  expect(await page.evaluate((url) => pgt.swFetch(url), probe.url)).toMatchObject({
    status: 404,
    headers: { 'x-postguard-error': 'UNKNOWN_DOWNLOAD' },
  });

  const prepared = await page.evaluate(([k]) => pgt.swPrepare('plain', k.id, k.usk, k.vk, 'report.pdf'), [
    keys,
  ] as const);
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    page.evaluate((url) => pgt.trigger(url), prepared.url),
  ]);
  expect(download.suggestedFilename()).toBe('report.pdf');
  expect(await download.failure()).toBeNull();
  expect(sha(await readFile(await download.path()))).toBe(made.sha);
});

test('the page that registered a download closes mid-file: the service worker takes over, same bytes', async ({
  page,
  keys,
  app,
}) => {
  const size = 24 * MiB + 777;
  const made = await page.evaluate(([k, n]) => pgt.makeBlob('big', k.mpk, k.options, n), [keys, size] as const);
  const prepared = await page.evaluate(
    ([k]) => pgt.swPrepare('big', k.id, k.usk, k.vk, 'big.bin', { verifyFirst: false, offload: true }),
    [keys] as const,
  );
  // Another tab of the app reads the download; the page that registered it (and its crypto worker) goes.
  const reader = await page.context().newPage();
  await reader.goto(app);
  await reader.waitForFunction(() => 'pgt' in window && navigator.serviceWorker.controller !== null);
  const started = await reader.evaluate(([url, n]) => pgt.swFetchStart(url, n), [prepared.url, 2 * MiB] as const);
  expect(started.status).toBe(200);
  await page.close();
  const rest = await reader.evaluate(() => pgt.swFetchRest());
  expect(rest).toMatchObject({ sha: made.sha, bytes: size, headers: { 'x-postguard-decrypted-by': 'page-worker' } });
  await reader.close();
});

async function sealedInPage(page: import('@playwright/test').Page, keys: Keys, size: number): Promise<Uint8Array> {
  const sealed = await page.evaluate(([k, n]) => pgt.seal(k.mpk, k.options, n, 'stream'), [keys, size] as const);
  return unb64(sealed.ct);
}

// The fourth field: streamed at once, the failure still comes before any byte (a Blob's size that no
// sealer writes is refused when the file is opened), or only after the headers.
for (const [name, code, edit, streamedFails] of [
  [
    'a flipped bit in a middle segment',
    'TAMPERED',
    (ct: Uint8Array) => ((ct[framingOf(ct) + DEFAULT_SEGMENT_SIZE + SEGMENT_OVERHEAD + 1000]! ^= 1), ct),
    'after the headers',
  ],
  [
    'a flipped bit in the final segment',
    'TAMPERED',
    (ct: Uint8Array) => ((ct[ct.length - 20]! ^= 1), ct),
    'after the headers',
  ],
  [
    'the final segment cut off (a clean segment boundary)',
    'TRUNCATED',
    (ct: Uint8Array) => ct.slice(0, framingOf(ct) + 3 * (DEFAULT_SEGMENT_SIZE + SEGMENT_OVERHEAD)),
    'before any byte',
  ],
  // A Blob has no other length to compare with: a final segment one byte short is indistinguishable from a changed one.
  ['the last byte cut off', 'TAMPERED', (ct: Uint8Array) => ct.slice(0, ct.length - 1), 'after the headers'],
] as const) {
  test(`${name}: refused with ${code} before any byte, no download; streamed, it fails ${streamedFails}`, async ({
    page,
    keys,
  }) => {
    const ct = edit(await sealedInPage(page, keys, 3 * DEFAULT_SEGMENT_SIZE + 5000));
    await page.evaluate(([n, c]) => pgt.storeBlob(n, c), ['bad', b64(ct)] as const);

    const probe = await page.evaluate(([k]) => pgt.swPrepare('bad', k.id, k.usk, k.vk, 'bad.bin'), [keys] as const);
    const fetched = await page.evaluate((url) => pgt.swFetch(url), probe.url);
    expect([fetched.status, fetched.headers['x-postguard-error']]).toEqual([422, code]);
    const outcome = await page.evaluate((id) => pgt.swOutcome(id), probe.id);
    expect(outcome?.error).toMatchObject({ code, postguard: true });

    // Decrypted by the page's crypto worker (offload), the same outcomes: refused before any byte, or a body that errors.
    for (const verifyFirst of [true, false]) {
      const off = await page.evaluate(
        ([k, v]) => pgt.swPrepare('bad', k.id, k.usk, k.vk, 'bad.bin', { verifyFirst: v, offload: true }),
        [keys, verifyFirst] as const,
      );
      const got = await page.evaluate((url) => pgt.swFetch(url), off.url);
      if (verifyFirst || streamedFails === 'before any byte')
        expect([got.status, got.headers['x-postguard-error']]).toEqual([422, code]);
      else {
        expect([got.status, got.headers['x-postguard-decrypted-by']]).toEqual([200, 'page-worker']);
        expect(got.readError).toBeDefined();
      }
      expect((await page.evaluate((id) => pgt.swOutcome(id), off.id))?.error?.code).toBe(code);
    }

    // As a download: the browser gets an error page in the hidden frame, never a file.
    let downloads = 0;
    page.on('download', () => downloads++);
    const prepared = await page.evaluate(([k]) => pgt.swPrepare('bad', k.id, k.usk, k.vk, 'bad.bin'), [keys] as const);
    await page.evaluate((url) => pgt.trigger(url), prepared.url);
    expect((await page.evaluate((id) => pgt.swOutcome(id), prepared.id))?.error?.code).toBe(code);
    await page.waitForTimeout(500);
    expect(downloads).toBe(0);

    // Streamed at once (verifyFirst: false), the failure comes after the headers: the body errors.
    const streamed = await page.evaluate(
      ([k]) => pgt.swPrepare('bad', k.id, k.usk, k.vk, 'bad.bin', { verifyFirst: false }),
      [keys] as const,
    );
    if (streamedFails === 'before any byte') {
      await page.evaluate((url) => pgt.trigger(url), streamed.url);
      expect((await page.evaluate((id) => pgt.swOutcome(id), streamed.id))?.error?.code).toBe(code);
      await page.waitForTimeout(500);
      expect(downloads).toBe(0);
      return;
    }
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.evaluate((url) => pgt.trigger(url), streamed.url),
    ]);
    expect(await download.failure()).not.toBeNull();
    expect((await page.evaluate((id) => pgt.swOutcome(id), streamed.id))?.error?.code).toBe(code);
  });
}

test('a wrong key or recipient is an HTTP error before any byte, with the code', async ({ page, keys }) => {
  const ct = await sealedInPage(page, keys, 100_000);
  await page.evaluate(([n, c]) => pgt.storeBlob(n, c), ['ok', b64(ct)] as const);
  const wrongKey = await page.evaluate(
    ([k]) =>
      pgt.swPrepare(
        'ok',
        k.id,
        k.usk.replace(/^./, (c: string) => (c === 'A' ? 'B' : 'A')),
        k.vk,
        'x',
      ),
    [keys] as const,
  );
  const res = await page.evaluate((url) => pgt.swFetch(url), wrongKey.url);
  expect(res.status).toBeGreaterThanOrEqual(400);
  expect(res.headers['x-postguard-error']).toMatch(/^(WRONG_KEY|INVALID_KEY)$/);
  expect((await page.evaluate((id) => pgt.swOutcome(id), wrongKey.id))?.error?.code).toBe(
    res.headers['x-postguard-error'],
  );
  const stranger = await page.evaluate(([k]) => pgt.swPrepare('ok', 'mallory@example.org', k.usk, k.vk, 'x'), [
    keys,
  ] as const);
  expect(await page.evaluate((url) => pgt.swFetch(url), stranger.url)).toMatchObject({
    status: 403,
    headers: { 'x-postguard-error': 'UNKNOWN_RECIPIENT' },
  });
});

test('a seekable download plays in a <video> that seeks: ranges decrypted from their segments, a Range fetch gets the exact 206', async ({
  page,
  keys,
}) => {
  const clip = await makeVideo();
  const ct = await sealForStream(keys.mpk, keys.options, clip);
  await page.evaluate(([n, c]) => pgt.storeBlob(n, c), ['clip', b64(ct)] as const);
  const probeAt = Math.floor(clip.length * 0.6);
  const r = await page.evaluate(([k, at]) => pgt.swVideoSeek('clip', k.id, k.usk, k.vk, 7, at), [
    keys,
    probeAt,
  ] as const);
  console.log(
    `video of ${clip.length} bytes: ${r.ranges.length} ranges served: ${r.ranges.map((x) => `${x.start}-${x.end}`).join(', ')}`,
  );
  expectSeekResult(r, clip, probeAt, keys.sender);
  expect(r.ranges.length).toBeGreaterThanOrEqual(2);
  expect(r.ranges.some((x) => x.start > 0)).toBe(true);
});
