import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { seal } from '../../lib/index.js';
import { DEFAULT_SEGMENT_SIZE } from '../../lib/index.js';
import { extractSigningKey } from '../../lib/keys.js';
import { SEGMENT_OVERHEAD } from '../../lib/segments.js';
import { disclose } from '../../devtools/standin/wallet.js';
import { startPkg, type RunningPkg } from '../../server/testing.js';
import { makeKeys } from '../../worker/test/fixtures.js';
import { expectSeekResult, makeVideo, sealForStream } from '../../worker/test/video.js';
import { splitFrame } from '../../lib/frame.js';
import { embeddedWasmBytesModule } from '../../lib/build/wasm-bytes.js';
import * as emitted from '../../lib/crypto/wasm-bytes.js';
import { serveStatic } from '../consumer/static-server.js';
import { listDownloads, settledDownloads } from './driver.js';
import { expect, test, until, type EnginePage } from './fixtures.js';

/**
 * The browser runtime on every engine (the worker test app, worker/test/app): the crypto worker,
 * the decrypting service worker (downloads to disk, previews, damaged and cut files), and the PKG
 * client's recipient flow with the stand-in wallet and the key cache. One body per test; the
 * driver (driver.ts) is the only engine-specific code.
 */

type Pgt = import('../../worker/test/app/main.js').Pgt;
declare const pgt: Pgt;

const sha = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');
const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');
const unb64 = (text: string) => new Uint8Array(Buffer.from(text, 'base64'));
const keys = makeKeys();
const WIRE_SEGMENT = DEFAULT_SEGMENT_SIZE + SEGMENT_OVERHEAD;

function framingOf(ct: Uint8Array): number {
  return splitFrame(ct).framingBytes;
}

async function openApp(tab: EnginePage, url: string, serviceWorker = true): Promise<void> {
  await tab.goto(url);
  await until(() => tab.evaluate(() => 'pgt' in window), 'the test app');
  expect(await tab.evaluate(() => pgt.init())).toBe('wasm');
  if (serviceWorker) expect(await tab.evaluate(() => pgt.registerServiceWorker())).toBe(true);
}

test('the crypto worker: seal and unseal in memory and as relayed streams; errors keep their codes', async ({
  tab,
  runtimeApp,
  engine,
}) => {
  await openApp(tab, runtimeApp, false);
  // Chromium and WebKit hash the streams below on the crypto worker's nested worker; Firefox
  // inline (worker/crypto.worker.ts says why).
  expect(await tab.evaluate(() => pgt.hashesOnOwnThread())).toBe(engine !== 'firefox');
  const memory = await tab.evaluate(([k, size]) => pgt.memoryRoundTrip(k.mpk, k.options, k.id, k.usk, k.vk, size), [
    keys,
    1_000_000,
  ] as const);
  expect(memory).toMatchObject({ equal: true, sender: { public: keys.sender } });
  const size = 8 * 1024 * 1024 + 12_345;
  const streamed = await tab.evaluate(([k, n]) => pgt.streamRoundTrip(k.mpk, k.options, k.id, k.usk, k.vk, n), [
    keys,
    size,
  ] as const);
  expect(streamed).toMatchObject({ equal: true, bytes: size, state: 'closed', sender: { public: keys.sender } });
  const errors = await tab.evaluate((k) => pgt.errors(k.mpk, k.options, k.vk, k.id, k.usk), keys);
  expect(errors.garbage).toMatchObject({ code: 'NOT_POSTGUARD', className: 'FormatError', postguard: true });
  expect(errors.unknownRecipient).toMatchObject({ code: 'UNKNOWN_RECIPIENT', className: 'InputError' });
  expect(errors.sourceFailed).toMatchObject({ code: 'SOURCE_FAILED', postguard: true });
  expect(errors.sourceFailedSink).toMatchObject({
    state: 'aborted',
    reason: { code: 'SOURCE_FAILED', postguard: true },
  });
});

test('a file through the service worker: fetched with its Content-Length, and saved by the browser under its name with the same bytes', async ({
  tab,
  runtimeApp,
  browserOf,
}) => {
  await openApp(tab, runtimeApp);
  // Past the 16 MiB hold limit: verified in a first pass over the Blob, then sent in a second.
  for (const size of [2 * 1024 * 1024 + 333, 20 * 1024 * 1024 + 5]) {
    const made = await tab.evaluate(([k, n]) => pgt.makeBlob('plain', k.mpk, k.options, n), [keys, size] as const);
    // The fetch decrypted by the page's crypto worker (offload), the saved download below by the service worker.
    const probe = await tab.evaluate(
      ([k]) => pgt.swPrepare('plain', k.id, k.usk, k.vk, 'probe.bin', { offload: true }),
      [keys] as const,
    );
    const fetched = await tab.evaluate((url) => pgt.swFetch(url), probe.url);
    expect(fetched).toMatchObject({ status: 200, sha: made.sha, bytes: size });
    expect(fetched.headers).toMatchObject({
      'content-length': String(size),
      'x-postguard-verified': 'complete',
      'x-postguard-decrypted-by': 'page-worker',
    });
    expect(await tab.evaluate((id) => pgt.swOutcome(id), probe.id)).toEqual({
      sender: { public: keys.sender, contentSigner: 'public', bound: true },
    });
    // The offload loaded its chunk into the crypto worker: still one server there, each call answered once.
    expect(await tab.evaluate(() => pgt.answersPerCall())).toBe(1);

    const name = `report-${size}.pdf`;
    const prepared = await tab.evaluate(([k, f]) => pgt.swPrepare('plain', k.id, k.usk, k.vk, f), [
      keys,
      name,
    ] as const);
    await tab.evaluate((url) => pgt.trigger(url), prepared.url);
    expect(await tab.evaluate((id) => pgt.swOutcome(id), prepared.id)).toEqual({
      sender: { public: keys.sender, contentSigner: 'public', bound: true },
    });
    await until(async () => (await listDownloads(browserOf.downloads))[name] === size, `${name} on disk`, 60_000);
    expect(sha(await readFile(join(browserOf.downloads, name)))).toBe(made.sha);
  }
});

for (const [name, code, edit] of [
  [
    'a flipped bit in a middle segment',
    'TAMPERED',
    (ct: Uint8Array) => ((ct[framingOf(ct) + WIRE_SEGMENT + 1000]! ^= 1), ct),
  ],
  ['a flipped bit in the final segment', 'TAMPERED', (ct: Uint8Array) => ((ct[ct.length - 20]! ^= 1), ct)],
  [
    'the final segment cut off at a segment boundary',
    'TRUNCATED',
    (ct: Uint8Array) => ct.slice(0, framingOf(ct) + 3 * WIRE_SEGMENT),
  ],
] as const) {
  test(`${name}: ${code} before any byte; nothing on disk, a good file of that name untouched`, async ({
    tab,
    runtimeApp,
    browserOf,
  }) => {
    await openApp(tab, runtimeApp);
    const sealed = await tab.evaluate(([k, n]) => pgt.seal(k.mpk, k.options, n, 'stream'), [
      keys,
      3 * DEFAULT_SEGMENT_SIZE + 5000,
    ] as const);
    const ct = edit(unb64(sealed.ct));
    await tab.evaluate(([n, c]) => pgt.storeBlob(n, c), ['bad', b64(ct)] as const);

    const probe = await tab.evaluate(([k]) => pgt.swPrepare('bad', k.id, k.usk, k.vk, 'probe.bin'), [keys] as const);
    const fetched = await tab.evaluate((url) => pgt.swFetch(url), probe.url);
    expect([fetched.status, fetched.headers['x-postguard-error']]).toEqual([422, code]);
    expect((await tab.evaluate((id) => pgt.swOutcome(id), probe.id))?.error).toMatchObject({ code, postguard: true });

    const file = `statement-${code.toLowerCase()}-${name.length}.pdf`;
    await writeFile(join(browserOf.downloads, file), 'an earlier, good file');
    const before = await listDownloads(browserOf.downloads);
    const prepared = await tab.evaluate(([k, f]) => pgt.swPrepare('bad', k.id, k.usk, k.vk, f), [keys, file] as const);
    await tab.evaluate((url) => pgt.trigger(url), prepared.url);
    expect((await tab.evaluate((id) => pgt.swOutcome(id), prepared.id))?.error).toMatchObject({ code });
    const after = await settledDownloads(browserOf.downloads);
    expect(after).toEqual(before);

    // For the record (worker/README.md): what this engine keeps when a streamed body fails.
    const streamedName = `streamed-${file}`;
    await writeFile(join(browserOf.downloads, streamedName), 'an earlier, good file');
    const streamed = await tab.evaluate(
      ([k, f]) => pgt.swPrepare('bad', k.id, k.usk, k.vk, f, { verifyFirst: false }),
      [keys, streamedName] as const,
    );
    await tab.evaluate((url) => pgt.trigger(url), streamed.url);
    expect((await tab.evaluate((id) => pgt.swOutcome(id), streamed.id))?.error).toMatchObject({ code });
    const left = Object.fromEntries(
      Object.entries(await settledDownloads(browserOf.downloads)).filter(([n]) => !(n in after) && n !== streamedName),
    );
    const original = (await listDownloads(browserOf.downloads))[streamedName];
    console.log(
      `${browserOf.engine}: streamed ${code} download left ${JSON.stringify(left)}; the earlier ${streamedName} is now ${original} bytes`,
    );
    test.info().annotations.push({
      type: 'streamed failure leaves',
      description: `${JSON.stringify(left)}; earlier file ${original} bytes`,
    });
  });
}

test('a relayed stream cut short of its announced size is TRUNCATED wherever it is cut, never TAMPERED', async ({
  tab,
  runtimeApp,
}) => {
  await openApp(tab, runtimeApp);
  const sealed = await tab.evaluate(([k, n]) => pgt.seal(k.mpk, k.options, n, 'stream'), [
    keys,
    3 * DEFAULT_SEGMENT_SIZE + 5000,
  ] as const);
  const length = unb64(sealed.ct).length;
  for (const cutAt of [length - 1, length - 5000, framingOf(unb64(sealed.ct)) + WIRE_SEGMENT + 7]) {
    const r = await tab.evaluate(([c, at, n, k]) => pgt.swRelay(c, at, n, k.id, k.usk, k.vk), [
      sealed.ct,
      cutAt,
      length,
      keys,
    ] as const);
    expect([r.status, r.headers['x-postguard-error']], `cut at ${cutAt}`).toEqual([422, 'TRUNCATED']);
    const { error } = r.outcome as { error?: { code?: string; message: string } };
    expect(error).toMatchObject({ code: 'TRUNCATED', postguard: true });
    expect(error?.message).toContain(`of its ${length} bytes`);
  }
  const whole = await tab.evaluate(([c, n, k]) => pgt.swRelay(c, n, n, k.id, k.usk, k.vk), [
    sealed.ct,
    length,
    keys,
  ] as const);
  expect(whole).toMatchObject({ status: 200, sha: sealed.sha, outcome: { sender: { public: keys.sender } } });
});

test('a slow reader of a paced download: the worker stays within its window of what the page read', async ({
  tab,
  runtimeApp,
}) => {
  await openApp(tab, runtimeApp);
  const size = 24 * 1024 * 1024;
  // Read at 30 MB/s, slower than any engine decrypts here. (Unpaced, Firefox and WebKit buffer the
  // difference: e2e/engines/slow-reader.ts measures it.)
  const r = await tab.evaluate(([k, n]) => pgt.swSlowRead(k.mpk, k.options, k.id, k.usk, k.vk, n, 30e6, true), [
    keys,
    size,
  ] as const);
  expect(r).toMatchObject({ ok: true, bytes: size });
  // The 4 MiB window, the segment in hand and the acknowledgement interval.
  expect(r.maxAhead).toBeLessThan(5 * 1024 * 1024);
  expect(r.aheadAtDone).toBeLessThan(5 * 1024 * 1024);
});

test('a preview through the service worker: an image decodes in an <img>', async ({ tab, runtimeApp }) => {
  await openApp(tab, runtimeApp);
  const r = await tab.evaluate((k) => pgt.swPreviewImage(k.mpk, k.options, k.id, k.usk, k.vk), keys);
  expect(r).toMatchObject({ width: 123, height: 45, sender: { public: keys.sender } });
});

test('a seekable download in a <video>: it loads, seeks to 7 s and shows a frame; a Range fetch gets the exact 206', async ({
  tab,
  runtimeApp,
  engine,
}) => {
  const clip = await makeVideo();
  await openApp(tab, runtimeApp);
  await tab.evaluate(([n, c]) => pgt.storeBlob(n, c), [
    'clip',
    b64(await sealForStream(keys.mpk, keys.options, clip)),
  ] as const);
  const probeAt = Math.floor(clip.length * 0.6);
  const r = await tab.evaluate(([k, at]) => pgt.swVideoSeek('clip', k.id, k.usk, k.vk, 7, at), [
    keys,
    probeAt,
  ] as const);
  console.log(
    `${engine}: video of ${clip.length} bytes, ranges served: ${r.ranges.map((x) => `${x.start}-${x.end}`).join(', ')}`,
  );
  expectSeekResult(r, clip, probeAt, keys.sender);
  // The element's own requests were ranges. Whether it asks for more past the start (the index at the
  // end, the seek) is the engine's choice: Chromium and Firefox have each read a clip this small
  // whole from their first request and sought in their cache (both seen in CI), so only the probe
  // above pins the 206 path exactly.
  expect(r.ranges.some((x) => x.start !== probeAt)).toBe(true);
});

test.describe('with the PKG and the stand-in wallet', () => {
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
    return b64(ct);
  }

  test('the recipient flow: QR shown, the wallet discloses, the file opens; the key cache spares a scan; forget drops it', async ({
    tab,
    runtimeApp,
  }) => {
    await openApp(tab, runtimeApp, false);
    await tab.evaluate((url) => pgt.makePkgClient(url, true), pkg.url);
    await tab.evaluate(() => pgt.forgetKeys());
    expect(await tab.evaluate(() => pgt.publicKeys())).toEqual({ mpk: pkg.keys.mpk, vk: pkg.keys.vk });

    await tab.evaluate(([ct, id, vk]) => pgt.startOpen(ct, id, vk), [
      await sealForAlice('first file'),
      ALICE,
      pkg.keys.vk,
    ] as const);
    const qrText = await until(() => tab.evaluate(() => pgt.qrText()), 'the QR code');
    expect(qrText).toMatch(/^https:\/\/open\.yivi\.app\/-\/session#/);
    expect(await tab.evaluate(() => pgt.canvasSize())).toBeGreaterThan(100);
    expect(await tab.evaluate(() => document.querySelectorAll('#qr-svg path').length)).toBe(1);
    // The test plays the phone: the stand-in wallet reads the QR text and discloses.
    await disclose(qrText, { [EMAIL]: ALICE });
    const first = await tab.evaluate(() => pgt.finishOpen());
    expect(first).toMatchObject({
      text: 'first file',
      source: 'session',
      sender: { public: { con: [{ t: EMAIL, v: 'bob@example.org' }] } },
    });
    expect(await tab.evaluate(() => pgt.statuses)).toContain('DONE');
    const stored = await tab.evaluate(() => pgt.storedKeys());
    expect(stored.filter((k) => k.includes('|jwt|'))).toHaveLength(1);
    expect(stored.filter((k) => k.includes('|usk|'))).toHaveLength(1);

    // A second file: no scan while the session's JWT lasts; after a reload, the same key from IndexedDB.
    pkg.clock.advance(5);
    await tab.evaluate(([ct, id, vk]) => pgt.startOpen(ct, id, vk), [
      await sealForAlice('second file'),
      ALICE,
      pkg.keys.vk,
    ] as const);
    expect(await tab.evaluate(() => pgt.finishOpen())).toMatchObject({ text: 'second file', source: 'cached-jwt' });
    await openApp(tab, runtimeApp, false);
    await tab.evaluate((url) => pgt.makePkgClient(url, true, true), pkg.url);
    expect(await tab.evaluate(() => pgt.publicKeys())).toEqual({ mpk: pkg.keys.mpk, vk: pkg.keys.vk });

    await tab.evaluate(() => pgt.forgetKeys());
    const left = await tab.evaluate(() => pgt.storedKeys());
    expect(left.filter((k) => /\|(?:jwt|usk)\|/.test(k))).toEqual([]);
    expect(left.filter((k) => k.includes('|params|'))).toHaveLength(2);
  });
});

test('the WebAssembly as the package embeds it inflates and compiles in a page, a worker and a service worker', async ({
  tab,
}) => {
  // Where it did not, the library would fall back to @noble without a word (slower, same bytes), so
  // the other specs would not notice: the embedded module (lib/build/wasm-bytes.ts), run as it is
  // in each of the three realms, must hand out the modules' exact sizes and compile them.
  const dir = mkdtempSync(join(tmpdir(), 'pg-embedded-wasm-'));
  const probe = `${(await embeddedWasmBytesModule()).replaceAll('export const', 'const')}
async function probe() {
  const sizes = {};
  for (const [name, bytes] of [['keccak', keccakWasmBytes], ['ristretto', ristrettoWasmBytes], ['bls', blsWasmBytes]]) {
    try {
      const module = await bytes();
      await WebAssembly.instantiate(module, {});
      sizes[name] = module.length;
    } catch (error) {
      sizes[name] = String(error);
    }
  }
  return sizes;
}`;
  writeFileSync(join(dir, 'worker.js'), `${probe}\nvoid probe().then((sizes) => postMessage(sizes));`);
  writeFileSync(
    join(dir, 'sw.js'),
    `${probe}\nself.addEventListener('message', (event) => void probe().then((sizes) => event.source.postMessage(sizes)));`,
  );
  writeFileSync(join(dir, 'index.html'), `<!doctype html><script>${probe}</script>`);
  const site = await serveStatic(dir);
  try {
    await tab.goto(`${site.url}/index.html`);
    const got = await tab.evaluate(async () => {
      const run = (globalThis as unknown as { probe: () => Promise<unknown> }).probe;
      const page = await run();
      const worker = await new Promise((resolve) => (new Worker('worker.js').onmessage = (e) => resolve(e.data)));
      await navigator.serviceWorker.register('sw.js');
      const { active } = await navigator.serviceWorker.ready;
      const sw = await new Promise((resolve) => {
        navigator.serviceWorker.onmessage = (e) => resolve(e.data);
        active!.postMessage('probe');
      });
      return { page, worker, sw };
    });
    const sizes = {
      keccak: (await emitted.keccakWasmBytes()).length,
      ristretto: (await emitted.ristrettoWasmBytes()).length,
      bls: (await emitted.blsWasmBytes()).length,
    };
    expect(got).toEqual({ page: sizes, worker: sizes, sw: sizes });
  } finally {
    await site.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
