import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { join } from 'node:path';
import { makeZip } from 'client-zip';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { StreamUnsealer } from '../lib/index.js';
import { extractUsk } from '../lib/keys.js';
import { startStorage, type RunningStorage } from '../devtools/storage/testing.js';
import { pseudoRandomStream as generated, startFakePkg, type FakePkg } from './testing.js';

/**
 * Bounded memory: 128 MiB through upload() (default 5 MB chunks, Cryptify's size) while the
 * uploading process's RSS is sampled; the growth must stay far below the file size. The download
 * is checked by streaming it through the unsealer into a hash, so the test holds no copy either.
 */

const SIZE = 128 * 1024 * 1024;
const EMAIL = 'pbdf.sidn-pbdf.email.email';
const MODIFIED = new Date('2026-01-02T03:04:05Z');

let pkg: FakePkg;
let storage: RunningStorage;
beforeAll(async () => {
  pkg = await startFakePkg();
  storage = await startStorage({ verifyingKey: pkg.keys.vk });
});
afterAll(async () => {
  await storage.close();
  await pkg.close();
});

async function sha256Of(readable: ReadableStream<Uint8Array>): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of readable as unknown as AsyncIterable<Uint8Array>) hash.update(chunk);
  return hash.digest('hex');
}

const hashingSink = () => {
  const hash = createHash('sha256');
  let bytes = 0;
  return {
    writable: new WritableStream<Uint8Array>({
      write(chunk) {
        hash.update(chunk);
        bytes += chunk.length;
      },
    }),
    result: () => ({ sha256: hash.digest('hex'), bytes }),
  };
};

/**
 * The upload runs in a child process (so the storage stand-in's own buffers are not counted), with
 * --expose-gc: the sampler collects garbage before each reading, so what is measured is memory the
 * SDK holds, not garbage V8 has not got round to (without that, the reading mostly says when V8
 * last collected).
 */
const CHILD = `
const { PostGuard } = await import(${JSON.stringify(new URL('./index.ts', import.meta.url).pathname)});
const { pseudoRandomStream: generated } = await import(${JSON.stringify(new URL('./testing.ts', import.meta.url).pathname)});
const [pkgUrl, storageUrl, apiKey, size, modified] = process.argv.slice(1);
const pg = new PostGuard({ pkgUrl, storageUrl, allowInsecureUrls: true });
const send = (n) => pg.encrypt({
  files: [{ name: 'big.bin', content: generated(n), lastModified: new Date(modified) }],
  recipients: [pg.recipient.email('bob@example.com')],
  sign: pg.sign.apiKey(apiKey),
}).upload();
await send(6_000_000);
// Baseline: the lowest collected reading over a short idle spell (buffers of the warm-up run are let go lazily).
let baseline = Infinity;
for (let i = 0; i < 10; i++) {
  globalThis.gc();
  baseline = Math.min(baseline, process.memoryUsage().rss);
  await new Promise((resolve) => setTimeout(resolve, 20));
}
let peak = baseline;
const sampler = setInterval(() => { globalThis.gc(); peak = Math.max(peak, process.memoryUsage().rss); }, 20);
const { uuid } = await send(Number(size));
clearInterval(sampler);
process.stdout.write(JSON.stringify({ uuid, baseline, growth: peak - baseline }));
`;

function runChild(): Promise<{ uuid: string; baseline: number; growth: number }> {
  const child = spawn(
    process.execPath,
    [
      '--expose-gc',
      '--import',
      'tsx',
      '--input-type=module',
      '-e',
      CHILD,
      pkg.url,
      storage.url,
      pkg.apiKey,
      String(SIZE),
      MODIFIED.toISOString(),
    ],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise((resolve, reject) =>
    child.on('exit', (code) =>
      code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`child exited ${code}: ${err}`)),
    ),
  );
}

it('uploads 128 MiB holding far less than the file size', async () => {
  const { uuid, baseline, growth } = await runChild();
  // What it holds is one chunk (the chunk buffer; each PUT sends it as it is) plus the segments in
  // flight, whatever the file size: 13–21 MiB here on a quiet machine. RSS also counts pages the
  // allocator has not handed back, which a loaded machine leaves more of: CI at load read 27.5 MiB
  // once. A quarter of the file still fails an upload that holds any share of it that grows with
  // the file (while fetch copied each body, this read 20–28 MiB quiet).
  console.info(
    `128 MiB upload: RSS baseline ${(baseline / 2 ** 20).toFixed(1)} MiB, peak growth ${(growth / 2 ** 20).toFixed(1)} MiB`,
  );
  expect(growth).toBeLessThan(SIZE / 4);

  // The stored ciphertext opens to exactly the ZIP the inputs make.
  const expected = await sha256Of(makeZip([{ name: 'big.bin', input: generated(SIZE), lastModified: MODIFIED }]));
  const download = await fetch(`${storage.url}/filedownload/${uuid}`);
  const unsealer = await StreamUnsealer.new(download.body!, pkg.keys.vk);
  const entry = unsealer.inspect_header().get('bob@example.com')!;
  const sink = hashingSink();
  await unsealer.unseal(
    'bob@example.com',
    extractUsk(pkg.keys.msk, { ts: entry.ts, con: [{ t: EMAIL, v: 'bob@example.com' }] }),
    sink.writable,
  );
  const { sha256, bytes } = sink.result();
  expect(bytes).toBeGreaterThan(SIZE);
  expect(sha256).toBe(expected);
});

/**
 * The same measure for uploadCiphertext: 128 MiB from a ByteSource that makes its bytes on each read
 * (so the source holds nothing), in the default 5 MB chunks. The bytes are not PostGuard, so the
 * service refuses the finalize (422) once every chunk is stored; the stored file is then compared
 * with the source by hash.
 */
const CIPHERTEXT_CHILD = `
const { resolveConfig } = await import(${JSON.stringify(new URL('./config.ts', import.meta.url).pathname)});
const { StorageClient } = await import(${JSON.stringify(new URL('./storage.ts', import.meta.url).pathname)});
const { uploadCiphertext } = await import(${JSON.stringify(new URL('./upload.ts', import.meta.url).pathname)});
const [storageUrl, size] = process.argv.slice(1);
const storage = new StorageClient(resolveConfig({ pkgUrl: 'http://127.0.0.1:9', storageUrl, allowInsecureUrls: true }));
const byteAt = (i) => (Math.imul(i, 2654435761) >>> 24) & 0xff;
const source = (n) => ({
  size: n,
  read: async (offset, length) => {
    const out = new Uint8Array(length);
    for (let i = 0; i < length; i++) out[i] = byteAt(offset + i);
    return out;
  },
});
const send = async (n) => {
  const session = await storage.init({ recipients: ['bob@example.com'], notifyRecipients: false, confirm: false, message: '', language: 'EN', apiKey: undefined });
  try {
    await uploadCiphertext({ storage, session, source: source(n), chunkSize: Math.min(5_000_000, session.maxChunkSize ?? 5_000_000) });
  } catch (e) {
    if (e.status !== 422 || e.uploadedBytes !== n) throw e;
  }
  return session.uuid;
};
await send(6_000_000);
let baseline = Infinity;
for (let i = 0; i < 10; i++) {
  globalThis.gc();
  baseline = Math.min(baseline, process.memoryUsage().rss);
  await new Promise((resolve) => setTimeout(resolve, 20));
}
let peak = baseline;
const sampler = setInterval(() => { globalThis.gc(); peak = Math.max(peak, process.memoryUsage().rss); }, 20);
const uuid = await send(Number(size));
clearInterval(sampler);
process.stdout.write(JSON.stringify({ uuid, baseline, growth: peak - baseline }));
`;

it('uploadCiphertext sends 128 MiB holding about two chunks', async () => {
  const child = spawn(
    process.execPath,
    ['--expose-gc', '--import', 'tsx', '--input-type=module', '-e', CIPHERTEXT_CHILD, storage.url, String(SIZE)],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const { uuid, baseline, growth } = await new Promise<{ uuid: string; baseline: number; growth: number }>(
    (resolve, reject) =>
      child.on('exit', (code) =>
        code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`child exited ${code}: ${err}`)),
      ),
  );
  console.info(
    `128 MiB uploadCiphertext: RSS baseline ${(baseline / 2 ** 20).toFixed(1)} MiB, peak growth ${(growth / 2 ** 20).toFixed(1)} MiB`,
  );
  // The chunk being sent and the one read ahead are 10 MB; twice that leaves room for a loaded machine.
  expect(growth).toBeLessThan(20_000_000);
  const stored = createHash('sha256');
  for await (const piece of createReadStream(join(storage.dataDir, uuid))) stored.update(piece as Buffer);
  const expected = createHash('sha256');
  for (let offset = 0; offset < SIZE; offset += 1 << 20) {
    const piece = new Uint8Array(1 << 20);
    for (let i = 0; i < piece.length; i++) piece[i] = (Math.imul(offset + i, 2654435761) >>> 24) & 0xff;
    expected.update(piece);
  }
  expect(stored.digest('hex')).toBe(expected.digest('hex'));
});
