import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { listZipEntries, zipEntryStream, type ZipReadable } from '../../client/zip-entries.js';
import { disclose } from '../../devtools/standin/wallet.js';
import { clearDownloads, listDownloads } from './driver.js';
import { expect, test as engineTest, until, type EnginePage } from './fixtures.js';
import { installSendReceive, type FileSpec, type SendReceivePage } from './send-receive-page.js';
import {
  CHUNK_SIZE,
  PER_UPLOAD_LIMIT,
  knob,
  startSendReceiveStack,
  type SendReceiveStack,
} from './send-receive-stack.js';

/**
 * Issue 23's flows in the demo's send and receive pages (postguard-ts/client), on every engine:
 * a Yivi-signed send → the link → the recipient saves each file, byte for byte; an upload stopped
 * half-way by a reload continues on the next load; a download cut half-way completes; one file of
 * three is saved without fetching the others; a file over the storage limit is refused before any
 * QR. The stack is `npm start`'s (scripts/dev.ts) with the storage stand-in in strict mode, as
 * Cryptify answers a browser, and the wallet is the stand-in's, played from Node.
 */

const EMAIL = 'pbdf.sidn-pbdf.email.email';
declare const sr: SendReceivePage;

const buildDir = (engine: string, index: number) =>
  fileURLToPath(new URL(`../../tmp/engines/send-receive-${engine}-${index}/`, import.meta.url));

/** Per upload in the large stack: room for a send of {@link LARGE_SEND}. */
const LARGE_LIMIT = 512 * 1024 * 1024;
/** The large send: long enough to seal that a reload can come at 30 %. */
const LARGE_SEND = 300 * 1024 * 1024;

const test = engineTest.extend<object, { sendStack: SendReceiveStack; largeStack: SendReceiveStack }>({
  sendStack: [
    async ({ engine }, use, info) => {
      const stack = await startSendReceiveStack(buildDir(engine, info.parallelIndex));
      try {
        await use(stack);
      } finally {
        await stack.close();
      }
    },
    { scope: 'worker', timeout: 180_000 },
  ],
  // Over the demo sendStack built; Cryptify's chunk size, and a limit a large send fits.
  largeStack: [
    async ({ engine, sendStack }, use, info) => {
      void sendStack;
      const stack = await startSendReceiveStack(buildDir(engine, info.parallelIndex), {
        built: true,
        perUploadLimit: LARGE_LIMIT,
        chunkSize: 5_000_000,
      });
      try {
        await use(stack);
      } finally {
        await stack.close();
      }
    },
    { scope: 'worker', timeout: 180_000 },
  ],
});

/** Distinct people per test: a key or session the page cached for one test never skips another's scan. */
const people = (tag: string) => ({ alice: `alice-${tag}@example.org`, bob: `bob-${tag}@example.com` });

async function open(tab: EnginePage, url: string): Promise<void> {
  await tab.goto(url);
  await until(() => tab.evaluate(() => document.body.dataset.ready === 'true'), 'the page to be ready', 60_000);
  await tab.evaluate(installSendReceive);
}

/** Plays the phone: discloses `email` to the session the client drew in the page. */
async function scan(tab: EnginePage, email: string): Promise<void> {
  const link = await until(() => tab.evaluate(() => sr.sessionLink()), 'a Yivi session on the page');
  expect((await disclose(link, { [EMAIL]: email })).proofStatus).toBe('VALID');
}

/** What a step waits for: an element shown, or a data-* attribute with a value. */
type Outcome = { shown: string } | { data: [selector: string, key: string, value: string] };

/** Waits for `outcome` or the page's error alert; the alert fails the test with its text. */
async function settled(tab: EnginePage, outcome: Outcome, what: string, timeoutMs = 120_000): Promise<void> {
  const which = await until(
    () =>
      tab.evaluate((o) => {
        if (sr.shown('#error')) return 'error';
        const done = 'shown' in o ? sr.shown(o.shown) : sr.data(o.data[0], o.data[1]) === o.data[2];
        return done ? 'ok' : undefined;
      }, outcome),
    what,
    timeoutMs,
  );
  if (which === 'error') throw new Error(`the page shows an error: ${await tab.evaluate(() => sr.text('#error'))}`);
}

type People = { alice: string; bob: string };

/** Fills the send page and presses Send; resolves with the exact ciphertext size the page stated once the QR shows. */
async function startSend(tab: EnginePage, stack: SendReceiveStack, files: FileSpec[], who: People): Promise<number> {
  await open(tab, `${stack.demoUrl}send.html`);
  await tab.evaluate(
    ([f, bob, alice]) => {
      sr.setFiles('#files', f);
      sr.fill('#recipients', bob);
      sr.fill('#sender-email', alice);
      sr.fill('#message', 'The files we talked about.');
      sr.click('#send-button');
    },
    [files, who.bob, who.alice] as const,
  );
  await until(() => tab.evaluate(() => sr.sessionLink()), 'the QR');
  // The exact size and the limit were on the page before the QR.
  const size = Number(await tab.evaluate(() => sr.data('#estimate', 'size')));
  const plain = files.reduce((n, f) => n + (f.zeros ?? Buffer.from(f.b64!, 'base64').length), 0);
  expect(size).toBeGreaterThan(plain);
  expect(await tab.evaluate(() => sr.data('#estimate', 'limit'))).toBe(String(PER_UPLOAD_LIMIT));
  return size;
}

/** The link the send page offers once the upload is done. */
async function sentLink(tab: EnginePage): Promise<string> {
  await settled(tab, { data: ['#result', 'outcome', 'sent'] }, 'the link');
  const link = (await tab.evaluate(() => sr.href('#receive-link')))!;
  expect(link).toMatch(/receive\.html\?uuid=[0-9a-f-]{36}&recipient=/);
  return link;
}

async function send(tab: EnginePage, stack: SendReceiveStack, files: FileSpec[], who: People): Promise<string> {
  await startSend(tab, stack, files, who);
  await scan(tab, who.alice);
  return sentLink(tab);
}

/** Opens the link as Bob: the claimed sender before any scan, then the files after his. */
async function receive(tab: EnginePage, link: string, who: People, count: number): Promise<void> {
  await open(tab, link);
  await settled(tab, { shown: '#bundle' }, 'the header');
  const sender = await tab.evaluate(() => sr.text('#sender'));
  expect(sender).toContain('Claimed sender');
  expect(sender).toContain(who.alice);
  expect(sender).not.toContain('Verified');
  expect(await tab.evaluate(() => sr.text('#recipient-list'))).toContain(who.bob);
  await tab.evaluate(() => sr.click('#open-button'));
  await scan(tab, who.bob);
  await settled(tab, { shown: '#files' }, 'the files');
  expect(Number(await tab.evaluate(() => sr.data('#files', 'count')))).toBe(count);
  expect(await tab.evaluate(() => sr.shown('#verified'))).toBe(false);
}

/** A downloaded file, once the browser finished writing it (Firefox renames a .part over it at the end). */
async function downloaded(dir: string, name: string, size: number): Promise<Buffer> {
  await until(
    async () => {
      const now = await listDownloads(dir);
      return now[name] === size && !Object.keys(now).some((n) => n.endsWith('.part') || n.endsWith('.crdownload'));
    },
    `${name} (${size} bytes) on disk`,
    60_000,
  );
  return readFile(join(dir, name));
}

/** Byte equality in one comparison (toEqual would walk megabytes element by element). */
function expectSameBytes(actual: Uint8Array, expected: Uint8Array, what: string): void {
  expect(actual.length, `${what}: length`).toBe(expected.length);
  expect(Buffer.from(actual).equals(Buffer.from(expected)), `${what}: bytes differ`).toBe(true);
}

async function saveEntry(tab: EnginePage, dir: string, name: string, bytes: Buffer): Promise<void> {
  await tab.evaluate((n) => sr.click(`[data-entry="${n}"] button.save`), name);
  await settled(tab, { data: [`[data-entry="${name}"]`, 'state', 'saved'] }, `${name} saved`);
  expectSameBytes(await downloaded(dir, name, bytes.length), bytes, name);
}

/** No sideways scrolling and every control labelled, with a screenshot in the report. */
async function check(tab: EnginePage, name: string): Promise<void> {
  const problems = await tab.evaluate(() => sr.layoutProblems());
  expect(problems.overflow, `${name}: content wider than the viewport`).toBeLessThanOrEqual(0);
  expect(problems.unlabelled, `${name}: controls without a label`).toEqual([]);
  const path = test.info().outputPath(`${name}.png`);
  await tab.screenshot(path);
  await test.info().attach(name, { path, contentType: 'image/png' });
}

const file = (name: string, bytes: Buffer): FileSpec => ({ name, b64: bytes.toString('base64') });

test('send (Yivi-signed) → link → receive: the recipient saves each file with its exact bytes', async ({
  tab,
  sendStack,
  browserOf,
  engine,
}) => {
  await clearDownloads(browserOf.downloads);
  const who = people('send');
  const report = randomBytes(300_000);
  const note = Buffer.from('Hello Bob,\nthe report is attached.\n');
  // Chromium's network panel: a chunk PUT that succeeded is never listed as cancelled.
  const cancelled = await tab.watchCancelled?.();
  await startSend(tab, sendStack, [file('report.bin', report), file('note.txt', note)], who);
  await check(tab, `${engine}-send-scan`);
  await scan(tab, who.alice);
  const link = await sentLink(tab);
  if (cancelled !== undefined) {
    expect(cancelled.list().filter((r) => r.includes('/fileupload/'))).toEqual([]);
    await cancelled.stop();
  }
  await check(tab, `${engine}-send-done`);
  await receive(tab, link, who, 2);
  await check(tab, `${engine}-receive-files`);
  await saveEntry(tab, browserOf.downloads, 'report.bin', report);
  await saveEntry(tab, browserOf.downloads, 'note.txt', note);
  await tab.evaluate(() => sr.click('[data-entry="note.txt"] button.preview'));
  await settled(tab, { data: ['#preview-area', 'entry', 'note.txt'] }, 'the preview');
  expect(await tab.evaluate(() => document.querySelector('#preview-area pre')?.textContent ?? '')).toBe(
    note.toString(),
  );
});

test('an upload stopped at 50 % by a reload continues after it, and the recipient gets the exact bytes', async ({
  tab,
  sendStack,
  browserOf,
}) => {
  await clearDownloads(browserOf.downloads);
  const who = people('resume');
  const big = randomBytes(1024 * 1024);
  const size = await startSend(tab, sendStack, [file('big.bin', big)], who);
  // The first chunk at or past the middle hangs: the upload stops there until the page goes away.
  const half = Math.ceil(size / 2 / CHUNK_SIZE) * CHUNK_SIZE;
  await knob(sendStack.storageUrl, '/faults/chunk', 'PUT', { hang: true, times: 1, fromOffset: half });
  await scan(tab, who.alice);
  await settled(tab, { data: ['#progress-slot', 'sent', String(half)] }, 'the upload at 50 %');
  expect(half / size).toBeGreaterThanOrEqual(0.5);
  // The reload, as a navigation the driver waits for (location.reload() returns before the old page is gone).
  await open(tab, `${sendStack.demoUrl}send.html`);
  expect(await tab.evaluate(() => document.body.dataset.pending)).toBe('1');
  const link = await sentLink(tab);
  expect(await tab.evaluate(() => sr.text('#resume-slot'))).toContain('Continuing an unfinished upload');
  expect(await tab.evaluate(() => sr.text('#resume-slot'))).toContain('Done.');
  // Resumed, not started again: the hung chunk was the only fault, and one upload was made.
  expect(((await knob(sendStack.storageUrl, '/faults', 'GET')) as { triggered: number }).triggered).toBeGreaterThan(0);
  await receive(tab, link, who, 1);
  await saveEntry(tab, browserOf.downloads, 'big.bin', big);
});

/** A ZIP in memory, read as the client reads a bundle. */
function zipBytes(bytes: Uint8Array): ZipReadable {
  return { size: bytes.length, read: async (offset, length) => bytes.subarray(offset, offset + length) };
}

test('a download cut at 50 % completes with the exact bytes (Save all, through the service worker)', async ({
  tab,
  sendStack,
  browserOf,
}) => {
  await clearDownloads(browserOf.downloads);
  const who = people('cut');
  const files = { 'one.bin': randomBytes(700_000), 'two.bin': randomBytes(500_000) };
  const size = await startSend(
    tab,
    sendStack,
    Object.entries(files).map(([n, b]) => file(n, b)),
    who,
  );
  await scan(tab, who.alice);
  const link = await sentLink(tab);
  await receive(tab, link, who, 2);
  const cutBefore = ((await knob(sendStack.storageUrl, '/faults', 'GET')) as { downloadsCut: number }).downloadsCut;
  await knob(sendStack.storageUrl, '/faults/download', 'POST', { cutAfterBytes: Math.floor(size / 2), times: 1 });
  await tab.evaluate(() => sr.click('#save-all'));
  await settled(tab, { data: ['#verified', 'outcome', 'saved'] }, 'the saved bundle');
  expect(((await knob(sendStack.storageUrl, '/faults', 'GET')) as { downloadsCut: number }).downloadsCut).toBe(
    cutBefore + 1,
  );
  // Only a full read verifies the sender.
  expect(await tab.evaluate(() => sr.data('#verified', 'standing'))).toBe('verified');
  expect(await tab.evaluate(() => sr.text('#verified'))).toContain(who.alice);
  const bundle = await until(
    async () => {
      const now = await listDownloads(browserOf.downloads);
      const name = Object.keys(now).find((n) => n.startsWith('postguard-files') && n.endsWith('.zip'));
      return name !== undefined && now[name]! > 1_200_000 && !Object.keys(now).some((n) => n.endsWith('.part'))
        ? name
        : undefined;
    },
    'postguard-files.zip on disk',
    60_000,
  );
  const zip = new Uint8Array(await readFile(join(browserOf.downloads, bundle)));
  const entries = await listZipEntries(zipBytes(zip));
  expect(entries.map((e) => e.name).sort()).toEqual(Object.keys(files).sort());
  for (const entry of entries) {
    const got = new Uint8Array(await new Response(zipEntryStream(zipBytes(zip), entry)).arrayBuffer());
    expectSameBytes(got, files[entry.name as keyof typeof files], entry.name);
  }
});

test('one file out of a 3-file bundle is saved alone: its exact bytes, the others not fetched', async ({
  tab,
  sendStack,
  browserOf,
}) => {
  await clearDownloads(browserOf.downloads);
  const who = people('one');
  const MiB = 1024 * 1024;
  const files = [
    file('first.bin', randomBytes(MiB)),
    file('middle.bin', randomBytes(MiB)),
    file('last.bin', randomBytes(MiB)),
  ];
  const link = await send(tab, sendStack, files, who);
  await receive(tab, link, who, 3);
  const before = sendStack.storageBytesServed();
  await saveEntry(tab, browserOf.downloads, 'middle.bin', Buffer.from(files[1]!.b64!, 'base64'));
  const served = sendStack.storageBytesServed() - before;
  test
    .info()
    .annotations.push({ type: 'storage bytes served for one 1 MiB file of 3 MiB', description: String(served) });
  // Its megabyte, plus at most the part of a segment (256 KiB) on either side it shares with its
  // neighbours, and the requests' headers: about half of the 3 MiB the whole bundle would take.
  expect(served).toBeGreaterThanOrEqual(MiB);
  expect(served).toBeLessThan(MiB + 2 * 256 * 1024 + 128 * 1024);
  expect(Object.keys(await listDownloads(browserOf.downloads))).toEqual(['middle.bin']);
});

test('a file over the storage limit is refused before any QR, and the page names the limit', async ({
  tab,
  sendStack,
}) => {
  const who = people('limit');
  await open(tab, `${sendStack.demoUrl}send.html`);
  await tab.evaluate(
    ([n, bob, alice]) => {
      sr.setFiles('#files', [{ name: 'huge.bin', zeros: n }]);
      sr.fill('#recipients', bob);
      sr.fill('#sender-email', alice);
      sr.click('#send-button');
    },
    [PER_UPLOAD_LIMIT + 1, who.bob, who.alice] as const,
  );
  await until(() => tab.evaluate(() => sr.shown('#error')), 'the refusal');
  expect(await tab.evaluate(() => sr.data('#error', 'code'))).toBe('UPLOAD_TOO_LARGE');
  expect(await tab.evaluate(() => sr.text('#error'))).toContain(`limit of ${PER_UPLOAD_LIMIT} bytes`);
  expect(await tab.evaluate(() => sr.sessions())).toBe(0);
  expect(await tab.evaluate(() => document.querySelector('.postguard-session, .postguard-session-qr') === null)).toBe(
    true,
  );
});

test('a reload at 30 % of sealing a large send: the page says what was lost, offers to start again, and keeps nothing of it', async ({
  tab,
  largeStack,
}) => {
  test.setTimeout(300_000);
  const who = people('lost');
  await open(tab, `${largeStack.demoUrl}send.html`);
  await tab.evaluate(
    ([bob, alice, size]) => {
      sr.setFiles('#files', [{ name: 'large.bin', zeros: size }]);
      sr.fill('#recipients', bob);
      sr.fill('#sender-email', alice);
      sr.fill('#message', 'The large file.');
      sr.click('#send-button');
    },
    [who.bob, who.alice, LARGE_SEND] as const,
  );
  await scan(tab, who.alice);
  // Sealing shows its progress, against the exact size.
  const sealed = await until(
    () =>
      tab.evaluate(() => {
        if (sr.shown('#error')) return -1;
        const done = Number(sr.data('#progress-slot', 'sealed') ?? 0);
        const total = Number(sr.data('#progress-slot', 'sealTotal') || 0);
        return total > 0 && done / total >= 0.3 ? done / total : undefined;
      }),
    'sealing at 30 %',
    180_000,
  );
  expect(sealed, 'the page showed an error').toBeGreaterThan(0);
  expect(sealed).toBeLessThan(1);
  // The send is recorded from the start of sealing: the control that the check below can fail.
  const during = await tab.evaluate(() => sr.kept());
  expect(during.keys.filter((k) => k.startsWith('record:'))).toHaveLength(1);

  // The reload (a navigation the driver waits for).
  await open(tab, `${largeStack.demoUrl}send.html`);
  expect(await tab.evaluate(() => document.body.dataset.lost)).toBe('1');
  expect(await tab.evaluate(() => document.body.dataset.pending)).toBe('0');
  const notice = await tab.evaluate(() => sr.text('#resume-slot .lost'));
  expect(notice).toContain('A send was lost');
  expect(notice).toContain('large.bin');
  expect(notice).toContain(who.bob);
  expect(notice).toContain('Nothing was sent');
  // Nothing of it is kept: no record, no piece, no file (of any name) in the uploads folder.
  expect(await tab.evaluate(() => sr.kept())).toEqual({ files: [], keys: [] });
  // Starting again fills the form but the files, which the person picks again.
  await tab.evaluate(() => sr.click('#resume-slot .lost button'));
  expect(await tab.evaluate(() => (document.querySelector('#recipients') as HTMLTextAreaElement).value)).toBe(who.bob);
  expect(await tab.evaluate(() => (document.querySelector('#message') as HTMLTextAreaElement).value)).toBe(
    'The large file.',
  );
  // Reported once: the next load has nothing to say.
  await open(tab, `${largeStack.demoUrl}send.html`);
  expect(await tab.evaluate(() => document.body.dataset.lost)).toBe('0');
});

test('a reload during Save all shows the save still running, and a second click writes no second copy', async ({
  tab,
  largeStack,
  browserOf,
  engine,
}) => {
  test.skip(
    engine !== 'chromium',
    'a Chromium test: its download manager keeps a service-worker download across a reload',
  );
  test.setTimeout(180_000);
  await clearDownloads(browserOf.downloads);
  const who = people('reload-save');
  // Over the service worker's hold limit (16 MiB), so the bundle is read twice: once to
  // authenticate it, then again as the download is written (the read the storage holds below).
  const SIZE = 17 * 1024 * 1024;
  await open(tab, `${largeStack.demoUrl}send.html`);
  await tab.evaluate(
    ([bob, alice, size]) => {
      sr.setFiles('#files', [{ name: 'scans.bin', zeros: size }]);
      sr.fill('#recipients', bob);
      sr.fill('#sender-email', alice);
      sr.click('#send-button');
    },
    [who.bob, who.alice, SIZE] as const,
  );
  await scan(tab, who.alice);
  const link = await sentLink(tab);
  await receive(tab, link, who, 1);

  // The second full read stops at 8 MiB and waits: the download is running when the page reloads.
  await knob(largeStack.storageUrl, '/faults/download', 'POST', {
    cutAfterBytes: 8 * 1024 * 1024,
    hold: true,
    skip: 1,
  });
  await tab.evaluate(() => sr.click('#save-all'));
  await until(
    async () => Object.keys(await listDownloads(browserOf.downloads)).some((n) => n.endsWith('.crdownload')),
    'the download in progress',
    60_000,
  );
  await open(tab, link);
  // The page asks the service worker once the header is shown.
  expect(await until(() => tab.evaluate(() => document.body.dataset.runningSave), 'the running save asked for')).toBe(
    '1',
  );
  expect(await tab.evaluate(() => sr.data('#running-save', 'state'))).toBe('running');
  expect(await tab.evaluate(() => sr.text('#running-save'))).toContain('still being saved');

  // The recipient opens the files again (a remembered key, or a scan) and presses Save all: off while the save runs.
  await tab.evaluate(() => sr.click('#open-button'));
  const next = await until(
    () => tab.evaluate(() => (sr.shown('#files') ? 'files' : sr.sessionLink() !== undefined ? 'scan' : undefined)),
    'the files or a scan',
  );
  if (next === 'scan') await scan(tab, who.bob);
  await settled(tab, { shown: '#files' }, 'the files');
  expect(await tab.evaluate(() => (document.querySelector('#save-all') as HTMLButtonElement).disabled)).toBe(true);
  await tab.evaluate(() => (document.querySelector('#save-all') as HTMLButtonElement).click());

  // Let the held read go: the service worker resumes it at the byte reached, and the page shows the outcome.
  await knob(largeStack.storageUrl, '/faults', 'DELETE');
  await settled(tab, { data: ['#running-save', 'state', 'done'] }, 'the save done', 120_000);
  expect(await tab.evaluate(() => sr.text('#running-save'))).toContain('Saved: every byte authenticated.');
  expect(await tab.evaluate(() => sr.text('#running-save'))).toContain(who.alice);
  // One sender statement: the claim shown before is gone.
  expect(await tab.evaluate(() => sr.shown('#sender'))).toBe(false);
  expect(await tab.evaluate(() => (document.querySelector('#save-all') as HTMLButtonElement).disabled)).toBe(false);
  const saved = await until(
    async () => {
      const now = await listDownloads(browserOf.downloads);
      return Object.keys(now).some((n) => n.endsWith('.crdownload')) ? undefined : now;
    },
    'the download finished',
    60_000,
  );
  // One copy: the second click wrote nothing.
  expect(Object.keys(saved)).toEqual(['postguard-files.zip']);
  expect(saved['postguard-files.zip']).toBeGreaterThan(SIZE);
});
