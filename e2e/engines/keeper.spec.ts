import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';
import { build } from 'vite';
import { expect, test as base, until, type EnginePage } from './fixtures.js';

/**
 * browserKeeper (client/keeper-browser.ts) on every engine: the keeper contract (the same body
 * Vitest runs against the memory and file keepers), uploads that survive a reload and a write cut
 * off by one, and a 64 MiB write that the page's memory does not hold. The page is
 * keeper-page.ts, bundled by Vite and served from loopback (a secure context, as OPFS requires).
 */

type Api = import('./keeper-page.js').KeeperTestApi;
declare const keeperTest: Api;

const PAGE = fileURLToPath(new URL('./keeper-page.ts', import.meta.url));

async function bundle(): Promise<string> {
  const result = await build({
    configFile: false,
    logLevel: 'warn',
    build: { write: false, minify: false, target: 'es2022', lib: { entry: PAGE, formats: ['es'], fileName: 'page' } },
  });
  for (const out of Array.isArray(result) ? result : [result])
    if ('output' in out) for (const o of out.output) if (o.type === 'chunk' && o.isEntry) return o.code;
  throw new Error('vite produced no page');
}

const test = base.extend<object, { keeperUrl: string }>({
  keeperUrl: [
    async ({}, use) => {
      const code = await bundle();
      const server = createServer((req, res) => {
        const script = req.url === '/page.js';
        res.writeHead(200, { 'content-type': script ? 'text/javascript' : 'text/html', 'cache-control': 'no-store' });
        res.end(script ? code : '<!doctype html><title>keeper</title><script type="module" src="/page.js"></script>');
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const address = server.address();
      if (typeof address !== 'object' || address === null) throw new Error('no port');
      await use(`http://127.0.0.1:${address.port}/`);
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
    { scope: 'worker', timeout: 60_000 },
  ],
});

async function open(tab: EnginePage, url: string): Promise<void> {
  await tab.goto(url);
  await until(() => tab.evaluate(() => 'keeperTest' in globalThis), 'the keeper page');
}

const MIB = 1024 * 1024;

test('browserKeeper picks a persistent place, and keeps the keeper contract there (OPFS: from its writer worker and through createWritable) and in the IndexedDB fallback', async ({
  tab,
  keeperUrl,
  engine,
}) => {
  await open(tab, keeperUrl);
  await tab.evaluate(() => keeperTest.wipe());
  const probe = await tab.evaluate(() => keeperTest.probe());
  test.info().annotations.push({ type: `${engine} storage`, description: JSON.stringify(probe) });
  console.log(`${engine}: ${JSON.stringify(probe)}`);
  expect(probe.persistent).toBe(true);
  expect(probe.backend).toBe(probe.createWritable ? 'opfs' : 'indexeddb');
  const picked = await tab.evaluate(() => keeperTest.contract());
  expect(picked).toMatchObject({ backend: probe.backend });
  expect(picked.steps).toHaveLength(10);
  if (probe.backend === 'opfs') {
    const writable = await tab.evaluate(() => keeperTest.contract(undefined, true));
    expect(writable).toMatchObject({ backend: 'opfs' });
    expect(writable.steps).toHaveLength(10);
  }
  if (probe.backend !== 'indexeddb') {
    const fallback = await tab.evaluate(() => keeperTest.contract('indexeddb'));
    expect(fallback).toMatchObject({ backend: 'indexeddb' });
    expect(fallback.steps).toHaveLength(10);
  }
});

for (const bytesIn of [undefined, 'indexeddb'] as const) {
  test(`an upload survives a reload, and one cut off mid-write is not listed (${bytesIn ?? 'default'})`, async ({
    tab,
    keeperUrl,
    engine,
  }) => {
    await open(tab, keeperUrl);
    await tab.evaluate(() => keeperTest.wipe());
    if (bytesIn === 'indexeddb')
      test.skip((await tab.evaluate(() => keeperTest.probe())).backend === 'indexeddb', 'the default test covers it');
    await tab.evaluate(([b]) => keeperTest.write('kept', 5, 100, b ?? undefined), [bytesIn ?? null] as const);
    await tab.evaluate(([b]) => keeperTest.write('cut', 5, 200, b ?? undefined, false), [bytesIn ?? null] as const);
    if (bytesIn === undefined) {
      // Where a worker may have a sync access handle, the writer worker wrote them: the bytes
      // being written are in a .part file, under their name only once closed.
      const { names, syncInWorkers } = await tab.evaluate(() => keeperTest.folder());
      const { backend } = await tab.evaluate(() => keeperTest.probe());
      console.log(`${engine}: ${backend}, sync handles in workers: ${syncInWorkers}, ${JSON.stringify(names)}`);
      if (backend === 'opfs')
        expect(names).toEqual(syncInWorkers ? ['cut.pgenc.part', 'kept.pgenc'] : ['cut.pgenc', 'kept.pgenc']);
      if (engine === 'chromium') expect(syncInWorkers).toBe(true);
    }
    await open(tab, keeperUrl);
    const kept = await tab.evaluate(([b]) => keeperTest.check('kept', 5, 100, b ?? undefined), [
      bytesIn ?? null,
    ] as const);
    expect(kept).toMatchObject({
      listed: [{ id: 'kept', size: 5 * MIB, label: 'kept' }],
      size: 5 * MIB,
      firstDifference: null,
    });
    const cut = await tab.evaluate(([b]) => keeperTest.check('cut', 5, 200, b ?? undefined), [
      bytesIn ?? null,
    ] as const);
    expect(cut).toMatchObject({ listed: [{ id: 'kept' }], size: null });
  });
}

test('keys at rest, the device tier: a USK, a JWT and a recovery token are in no byte of IndexedDB or OPFS, open again after a reload, and forgetting the keys leaves none', async ({
  tab,
  keeperUrl,
}) => {
  await open(tab, keeperUrl);
  await tab.evaluate(() => keeperTest.wipe());
  const r = await tab.evaluate(() => keeperTest.secretsAtRest());
  expect(r.leaked).toEqual([]);
  expect(r.sealedEntries).toEqual(['|usk|', '|jwt|']);
  expect(r.deviceKeys).toBe(2); // the key cache's and the keeper's, non-extractable
  expect(r.reopened).toEqual(r.secrets);
  expect(r.afterForget).toEqual({ entries: [], cacheKey: false });
});

test('64 MiB written and read back exactly; the page does not hold it (heap measured in Chromium)', async ({
  tab,
  keeperUrl,
  engine,
}) => {
  await open(tab, keeperUrl);
  await tab.evaluate(() => keeperTest.wipe());
  const written = await tab.evaluate(() => keeperTest.write('big', 64, 300, undefined, true, true));
  const checked = await tab.evaluate(() => keeperTest.check('big', 64, 300));
  console.log(`${engine}: 64 MiB into ${written.backend} in ${written.ms} ms, heap ${JSON.stringify(written)}`);
  expect(checked).toMatchObject({ size: 64 * MIB, firstDifference: null, listed: [{ id: 'big' }] });
  if (engine === 'chromium') {
    expect(written.heapBefore).toBeGreaterThan(0);
    expect(written.heapPeak - written.heapBefore!).toBeLessThan(16 * MIB);
    // The control: the same write into memory does show in the heap, so the measure can fail (about
    // +63 MiB for the 64 MiB held, with the precise heap sizes driver.ts asks Chromium for): twice
    // the bound above. It counts from the lowest point of the write, not from before it: the
    // read-back above leaves ~70 MiB of garbage, and a collection during the control's write
    // removes it, which once made the peak less than 32 MiB above the start though 64 MiB were held.
    const control = await tab.evaluate(() => keeperTest.write('control', 64, 300, 'memory', true, true));
    console.log(`chromium: the same into memory: heap ${JSON.stringify(control)}`);
    expect(control.heapPeak - control.heapLow).toBeGreaterThan(32 * MIB);
  }
  await tab.evaluate(() => keeperTest.wipe());
});
