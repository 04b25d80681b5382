/**
 * The client's upload and download through a storage service on loopback, beside pg-js's way of
 * doing the same job with @e4a/pg-wasm 0.5.10 (a row of `npm run bench`, `--only=storage`).
 *
 * Both sides send the same plaintext, bundled by the same ZIP writer (pg-js bundles its files with
 * client-zip, as our client does), to the same storage stand-in (strict, as Cryptify answers), in
 * chunks of the stand-in's 5 000 000 bytes, one chunk in flight:
 *
 *   ours     `new PostGuard(…).encrypt({ data, sign: apiKey }).upload()` (Node: the library
 *            inline, nothing kept: sealed straight into the chunk PUTs), then
 *            `open({ uuid }).decrypt({ output: 'stream' })` read to its end (the resumable download)
 *   pg-wasm  `sealStream` into the same chunked PUTs (`StorageClient`, as pg-js's upload loop),
 *            then a plain `fetch` of /filedownload/{uuid} into pg-wasm's `StreamUnsealer`
 *
 * Each side also fetches what it needs from the PKG (the fake one of client/testing.ts: public
 * keys, the signing key for the API key, a recipient's key), so a figure is the whole flow an app
 * waits for. MB/s count plaintext bytes.
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { StorageClient } from '../client/storage.js';
import { chunkingSink } from '../client/sealed.js';
import { resolveConfig } from '../client/config.js';
import { zipStream } from '../client/zip.js';
import { PostGuard } from '../client/index.js';
import { FAKE_JWT_PREFIX, startFakePkg, type FakePkg } from '../client/testing.js';
import { startStorage, type RunningStorage } from '../devtools/storage/testing.js';
import type { PgWasm } from '../test/pgwasm.js';

const BOB = 'bob@example.com';
const EMAIL = 'pbdf.sidn-pbdf.email.email';
/** No step of a run may wait longer than this: a stuck stand-in fails the bench instead of hanging it. */
const STEP_MS = 300_000;

/** One row of the bench's table (bench/run.ts `Row`). */
export interface TransferRow {
  name: string;
  unit: 'MB/s';
  ours: number;
  theirs: number;
  oursRss: number;
  theirsRss: number;
}

/** Plaintext of `total` bytes in 64 KiB pieces, made as it is read (a fresh array each: the sealer may keep them). */
export function plaintext(total: number): ReadableStream<Uint8Array> {
  let sent = 0;
  return new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        if (sent >= total) return controller.close();
        const n = Math.min(65_536, total - sent);
        controller.enqueue(new Uint8Array(n).fill(sent & 255));
        sent += n;
      },
    },
    { highWaterMark: 0 },
  );
}

/** Reads `readable` to its end; returns the byte count (and throws if it is not `expected`). */
export async function drain(readable: ReadableStream<Uint8Array>, expected: number): Promise<number> {
  let n = 0;
  const reader = readable.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.length;
  }
  if (n !== expected) throw new Error(`read ${n} bytes, expected ${expected}`);
  return n;
}

/** The PKG and the storage stand-in, both on loopback. */
export interface TransferStack {
  pkg: FakePkg;
  storage: RunningStorage;
  close(): Promise<void>;
}

export async function startTransferStack(): Promise<TransferStack> {
  const pkg = await startFakePkg();
  try {
    const storage = await startStorage({ pkgUrl: pkg.url, verifyingKey: pkg.keys.vk, strict: true });
    return {
      pkg,
      storage,
      close: async () => {
        await storage.close();
        await pkg.close();
      },
    };
  } catch (error) {
    await pkg.close();
    throw error;
  }
}

/** Our side: the client as an app on a server uses it. */
export function ourSide(stack: TransferStack) {
  const pg = new PostGuard({ pkgUrl: stack.pkg.url, cryptifyUrl: stack.storage.url, allowInsecureUrls: true });
  return {
    upload: async (bytes: number): Promise<string> => {
      const { uuid } = await pg
        .encrypt({
          data: plaintext(bytes),
          recipients: [pg.recipient.email(BOB)],
          sign: pg.sign.apiKey(stack.pkg.apiKey),
        })
        .upload({ signal: AbortSignal.timeout(STEP_MS) });
      return uuid;
    },
    download: async (uuid: string, bytes: number): Promise<void> => {
      const result = await pg.open({ uuid, signal: AbortSignal.timeout(STEP_MS) }).decrypt({
        output: 'stream',
        session: async () => `${FAKE_JWT_PREFIX}${BOB}`,
      });
      if (result.output !== 'stream') throw new Error(`expected a stream, got ${result.output}`);
      // The upload wrapped the data as one ZIP entry (data.bin): its bytes plus the ZIP's framing.
      await drain(result.readable, await zipSize(bytes));
      await result.sender;
    },
  };
}

let zipSizes = new Map<number, number>();
/** The ZIP the client makes of `bytes` of data (one entry, data.bin, from a stream). */
async function zipSize(bytes: number): Promise<number> {
  let size = zipSizes.get(bytes);
  if (size === undefined) {
    let n = 0;
    const reader = zipStream([{ name: 'data.bin', content: plaintext(bytes), lastModified: undefined }]).getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      n += value.length;
    }
    size = n;
    zipSizes = new Map([[bytes, size]]);
  }
  return size;
}

async function json<T>(url: string, init: RequestInit = {}): Promise<T> {
  const response = await fetch(url, { signal: AbortSignal.timeout(30_000), ...init });
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return (await response.json()) as T;
}

/**
 * pg-js's job with pg-wasm: the same ZIP sealed by pg-wasm's `sealStream` into chunk PUTs, then a
 * download read by pg-wasm's `StreamUnsealer`. pg-js 1.x sends no proof of possession at
 * finalize; neither does this side.
 */
export function pgWasmSide(stack: TransferStack, pgwasm: PgWasm) {
  const config = resolveConfig({ pkgUrl: stack.pkg.url, cryptifyUrl: stack.storage.url, allowInsecureUrls: true });
  const storage = new StorageClient(config);
  const auth = { authorization: `Bearer ${stack.pkg.apiKey}` };
  return {
    upload: async (bytes: number): Promise<string> => {
      const signal = AbortSignal.timeout(STEP_MS);
      const { publicKey: mpk } = await json<{ publicKey: string }>(`${stack.pkg.url}/v2/parameters`);
      const signing = await json<{ pubSignKey: unknown }>(`${stack.pkg.url}/v2/irma/sign/key`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ pubSignId: [{ t: EMAIL }] }),
      });
      const session = await storage.init(
        {
          recipients: [BOB],
          notifyRecipients: false,
          confirm: false,
          message: '',
          language: 'EN',
          apiKey: stack.pkg.apiKey,
        },
        signal,
      );
      let uploaded = 0;
      const sink = chunkingSink(session.maxChunkSize ?? config.uploadChunkSize, async (chunk) => {
        session.token = await storage.putChunk(session, uploaded, chunk, signal);
        uploaded += chunk.length;
      });
      const ts = Math.floor(Date.now() / 1000);
      await pgwasm.sealStream(
        mpk,
        { policy: { [BOB]: { ts, con: [{ t: EMAIL, v: BOB }] } }, pubSignKey: signing.pubSignKey },
        zipStream([{ name: 'data.bin', content: plaintext(bytes), lastModified: undefined }]),
        sink,
      );
      await storage.finalize(session, uploaded, signal);
      return session.uuid;
    },
    download: async (uuid: string, bytes: number): Promise<void> => {
      const signal = AbortSignal.timeout(STEP_MS);
      const { publicKey: vk } = await json<{ publicKey: string }>(`${stack.pkg.url}/v2/sign/parameters`);
      const response = await fetch(`${stack.storage.url}/filedownload/${uuid}`, { signal });
      if (!response.ok || response.body === null) throw new Error(`download: HTTP ${response.status}`);
      const unsealer = await pgwasm.StreamUnsealer.new(response.body, vk);
      const policy = unsealer.inspect_header().get(BOB) as { ts: number };
      const { key } = await json<{ key: string }>(`${stack.pkg.url}/v2/irma/key/${policy.ts}`, {
        headers: { authorization: `Bearer ${FAKE_JWT_PREFIX}${BOB}` },
      });
      const expected = await zipSize(bytes);
      let n = 0;
      await unsealer.unseal(BOB, key, new WritableStream({ write: (chunk: Uint8Array) => void (n += chunk.length) }));
      if (n !== expected) throw new Error(`pg-wasm opened ${n} bytes, expected ${expected}`);
    },
  };
}

const medianOf = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
const mbps = (bytes: number, ms: number) => bytes / 1e6 / (ms / 1000);

/** Runs `f` while sampling RSS every 5 ms; the peak growth in MiB. */
async function peakRss(f: () => Promise<unknown>): Promise<number> {
  (globalThis as { gc?: () => void }).gc?.();
  const base = process.memoryUsage.rss();
  let peak = base;
  const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 5);
  try {
    await f();
  } finally {
    clearInterval(timer);
  }
  return (Math.max(peak, process.memoryUsage.rss()) - base) / 1024 / 1024;
}

/**
 * Upload and download-and-decrypt rows, ours beside pg-wasm's. Each side warms up once, then runs
 * `runs` times (grouped by side, as bench/run.ts's stream rows), then once more with RSS sampled.
 * Every upload is removed from the stand-in's disk once downloaded.
 */
export async function storageTransferRows(pgwasm: PgWasm, bytes: number, runs: number): Promise<TransferRow[]> {
  const stack = await startTransferStack();
  try {
    const sides = { ours: ourSide(stack), theirs: pgWasmSide(stack, pgwasm) };
    const figures = {
      ours: { up: [] as number[], down: [] as number[] },
      theirs: { up: [] as number[], down: [] as number[] },
    };
    const rss = { ours: { up: 0, down: 0 }, theirs: { up: 0, down: 0 } };
    for (const which of ['ours', 'theirs'] as const) {
      const side = sides[which];
      for (let i = 0; i <= runs + 1; i++) {
        const measured = i > 0 && i <= runs;
        const sampled = i === runs + 1;
        let uuid = '';
        const upload = async () => (uuid = await side.upload(bytes));
        const download = () => side.download(uuid, bytes);
        if (sampled) {
          rss[which].up = await peakRss(upload);
          rss[which].down = await peakRss(download);
        } else {
          let t = performance.now();
          await upload();
          const up = performance.now() - t;
          t = performance.now();
          await download();
          const down = performance.now() - t;
          if (measured) {
            figures[which].up.push(up);
            figures[which].down.push(down);
          }
        }
        // The stand-in keeps finished uploads as files named by their id; a run's is not needed again.
        await rm(join(stack.storage.dataDir, uuid), { force: true });
      }
    }
    const size = `${bytes / 1024 / 1024} MiB`;
    return [
      {
        name: `upload ${size} to storage (loopback)`,
        unit: 'MB/s',
        ours: mbps(bytes, medianOf(figures.ours.up)),
        theirs: mbps(bytes, medianOf(figures.theirs.up)),
        oursRss: rss.ours.up,
        theirsRss: rss.theirs.up,
      },
      {
        name: `download + decrypt ${size} from storage`,
        unit: 'MB/s',
        ours: mbps(bytes, medianOf(figures.ours.down)),
        theirs: mbps(bytes, medianOf(figures.theirs.down)),
        oursRss: rss.ours.down,
        theirsRss: rss.theirs.down,
      },
    ];
  } finally {
    await stack.close();
  }
}
