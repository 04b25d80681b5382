import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { copyFile, link, mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { once } from 'node:events';
import { chooseEncFile, getKey, sha256File, startDownload } from './demo.js';
import { discloseDirectly, expect, openDemo, test } from './fixtures.js';
import { ThreadMemory, type MemoryReport } from './memory.js';

/**
 * A 1 GiB file through the demo: encrypted from File.stream() in the crypto worker into a download
 * the service worker streams to disk, then decrypted by the service worker into another download
 * (read twice: authenticated completely first, then decrypted again as the download streams).
 * Every JavaScript thread's live memory stays flat (a few segments in flight), and the bytes that
 * come back hash to what went in. PG_E2E_BIG_MIB sets another size.
 */

const MiB = 1024 * 1024;
const SIZE_MIB = Number(process.env['PG_E2E_BIG_MIB'] ?? 1024);
/** A thread that held the file, or even a tenth of it, would exceed this by far. */
const FLAT_MIB = 48;

/** Writes `mib` MiB of non-repeating bytes to `path` and returns their SHA-256. */
async function writeBigFile(path: string, mib: number): Promise<string> {
  const hash = createHash('sha256');
  const out = createWriteStream(path);
  const block = Buffer.alloc(MiB);
  for (let i = 0; i < block.length; i++) block[i] = (i * 2_654_435_761) >>> 24;
  for (let n = 0; n < mib; n++) {
    const chunk = Buffer.from(block);
    chunk.writeUInt32LE(n, 0);
    chunk.writeUInt32LE(n * 7919, MiB / 2);
    hash.update(chunk);
    if (!out.write(chunk)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
  return hash.digest('hex');
}

/** Keeps the browser's download under `path` without copying a gigabyte when a hard link will do. */
async function keepAs(source: string, path: string): Promise<void> {
  await link(source, path).catch(() => copyFile(source, path));
}

test(`${SIZE_MIB} MiB encrypted and decrypted through the workers with flat memory and the same bytes`, async ({
  page,
  context,
  stack,
  browser,
}) => {
  test.setTimeout(15 * 60_000);
  const dir = await mkdtemp(join(stack.dir, 'big-'));
  const figures: Record<string, unknown> = { sizeMiB: SIZE_MIB };
  try {
    let started = Date.now();
    const plainPath = join(dir, 'archive.bin');
    const plainHash = await writeBigFile(plainPath, SIZE_MIB);
    figures['generateSeconds'] = (Date.now() - started) / 1000;

    // Encrypt: the file is read as a stream by the crypto worker; the ciphertext goes to disk via the service worker.
    await openDemo(page, stack, 'encrypt');
    await page.getByLabel('Recipient e-mail address').fill('bob@example.com');
    await page.getByRole('radio', { name: 'Files' }).check();
    await page.getByLabel('Files to encrypt').setInputFiles(plainPath);
    await page.getByLabel('Your e-mail address').fill('archive@example.org');
    let memory = await ThreadMemory.attach(browser, new URL(stack.demoUrl).origin);
    // Two workers: the crypto worker and its hashing worker (their memory is summed as 'worker').
    expect(memory.threads.map((t) => t.kind).sort()).toEqual(['page', 'service_worker', 'worker', 'worker']);
    await memory.start(250);
    const encDownload = page.waitForEvent('download', { timeout: 600_000 });
    await page.getByRole('button', { name: 'Encrypt and download' }).click();
    // The sender proves the address with Yivi (the demo takes no API key); the time counts from the signing keys.
    await discloseDirectly(page, { 'pbdf.sidn-pbdf.email.email': 'archive@example.org' });
    started = Date.now();
    const enc = await encDownload;
    const encPath = await enc.path();
    await expect(page.locator('#result')).toContainText('Encrypted archive.bin', { timeout: 600_000 });
    figures['encryptSeconds'] = (Date.now() - started) / 1000;
    const encryptMemory: MemoryReport = await memory.stop();
    figures['encryptMemoryMiB'] = encryptMemory;
    expect(await enc.failure()).toBeNull();
    const ciphertext = join(dir, 'archive.bin.enc');
    await keepAs(encPath, ciphertext);

    // Decrypt: the service worker reads the File once to authenticate all of it, then again to
    // answer the download as it decrypts.
    await openDemo(page, stack, 'decrypt');
    await chooseEncFile(page, ciphertext);
    await getKey(page, context, stack);
    memory = await ThreadMemory.attach(browser, new URL(stack.demoUrl).origin);
    // Two workers: the crypto worker and its hashing worker (their memory is summed as 'worker').
    expect(memory.threads.map((t) => t.kind).sort()).toEqual(['page', 'service_worker', 'worker', 'worker']);
    await memory.start(250);
    started = Date.now();
    const plain = await startDownload(page);
    const plainOut = await plain.path();
    await expect(page.locator('#verified')).toContainText('Decrypted and saved as archive.bin', { timeout: 600_000 });
    figures['decryptSeconds'] = (Date.now() - started) / 1000;
    const decryptMemory = await memory.stop();
    figures['decryptMemoryMiB'] = decryptMemory;
    expect(await plain.failure()).toBeNull();
    expect(plain.suggestedFilename()).toBe('archive.bin');

    started = Date.now();
    expect(await sha256File(plainOut)).toBe(plainHash);
    figures['hashSeconds'] = (Date.now() - started) / 1000;
    figures['pagePerformanceMemoryMiB'] = await page.evaluate(() =>
      Math.round(
        ((performance as unknown as { memory?: { usedJSHeapSize: number } }).memory?.usedJSHeapSize ?? 0) / 1048576,
      ),
    );

    console.log(`${SIZE_MIB} MiB through the demo: ${JSON.stringify(figures)}`);
    await test
      .info()
      .attach('figures.json', { body: JSON.stringify(figures, null, 2), contentType: 'application/json' });
    for (const report of [encryptMemory, decryptMemory]) {
      for (const [thread, mib] of Object.entries(report.growth)) expect(mib, `${thread} grew`).toBeLessThan(FLAT_MIB);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
