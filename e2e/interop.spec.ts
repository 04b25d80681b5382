import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { loadPgWasm, type PgWasm } from '../test/pgwasm.js';
import { chooseEncFile, encrypt, getKey, sha256, sha256File, startDownload } from './demo.js';
import { EMAIL, expect, openDemo, test } from './fixtures.js';
import { policyFor, signingKeyFor, uskFor } from './sealing.js';

/**
 * The reference implementation, @e4a/pg-wasm 0.5.10 (in Node), on both sides of the demo: what it
 * seals the demo opens, and what the demo seals it opens, with the sender's identity intact.
 */

const BOB = 'bob@example.com';
const CAROL = 'carol@example.org';

let pgwasm: PgWasm;
test.beforeAll(async () => {
  pgwasm = await loadPgWasm();
});

/** A stream of `bytes` in chunks, as a file would be read. */
function chunked(bytes: Uint8Array, size = 65_536): ReadableStream<Uint8Array> {
  let offset = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (offset >= bytes.length) return controller.close();
      controller.enqueue(bytes.slice(offset, offset + size));
      offset += size;
    },
  });
}

function collector(): { writable: WritableStream<Uint8Array>; bytes: () => Buffer } {
  const parts: Buffer[] = [];
  // pg-wasm may reuse its buffers: copy each chunk.
  return {
    writable: new WritableStream<Uint8Array>({ write: (c) => void parts.push(Buffer.from(c)) }),
    bytes: () => Buffer.concat(parts),
  };
}

test('a file sealed by pg-wasm (streaming) opens in the demo with the same bytes and its sender', async ({
  page,
  context,
  stack,
}) => {
  const plain = randomBytes(700_000);
  const out = collector();
  await pgwasm.sealStream(
    stack.keys.mpk,
    { policy: policyFor([BOB]), pubSignKey: signingKeyFor(stack, CAROL) },
    chunked(plain),
    out.writable,
  );
  const path = join(test.info().outputPath(), 'from-pg-wasm.bin.enc');
  await writeFile(path, out.bytes());

  await openDemo(page, stack, 'decrypt');
  await chooseEncFile(page, path);
  await expect(page.locator('#sender')).toContainText(`E-mail address: ${CAROL}`);
  await getKey(page, context, stack);
  const download = await startDownload(page);
  expect(await download.failure()).toBeNull();
  expect(await sha256File(await download.path())).toBe(sha256(plain));
  await expect(page.locator('#verified')).toContainText(`E-mail address: ${CAROL}`);
});

test('a message sealed by pg-wasm in its in-memory mode opens in the demo (read whole, in the crypto worker)', async ({
  page,
  context,
  stack,
}) => {
  const text = 'sealed in memory by pg-wasm';
  const ct = await pgwasm.seal(
    stack.keys.mpk,
    { policy: policyFor([BOB]), pubSignKey: signingKeyFor(stack, CAROL) },
    new TextEncoder().encode(text),
  );
  await openDemo(page, stack, 'decrypt');
  await chooseEncFile(page, { name: 'memo.txt.enc', mimeType: 'application/octet-stream', buffer: Buffer.from(ct) });
  await getKey(page, context, stack);
  await page.getByRole('button', { name: 'Preview' }).click();
  await expect(page.locator('#preview-area pre')).toHaveText(text);
  const download = await startDownload(page);
  expect(await download.failure()).toBeNull();
  expect(await readFile(await download.path(), 'utf8')).toBe(text);
  await expect(page.locator('#verified')).toContainText('Decrypted in the browser and saved once complete.');
});

test('a file sealed by the demo opens with pg-wasm: same bytes, the public and the private sender identity', async ({
  page,
  context,
  stack,
}) => {
  const plain = randomBytes(1_000_000);
  await openDemo(page, stack, 'encrypt');
  const sealed = await encrypt(page, context, stack, {
    recipients: [{ email: BOB }],
    content: { files: [{ name: 'contract.bin', mimeType: 'application/octet-stream', buffer: plain }] },
    sender: { yivi: { email: CAROL, mobile: '+31655556666' } },
  });
  const ct = await readFile(await sealed.path());

  const unsealer = await pgwasm.StreamUnsealer.new(chunked(new Uint8Array(ct)), stack.keys.vk);
  const hidden = unsealer.inspect_header().get(BOB) as { ts: number; con: Array<{ t: string; v: string }> };
  expect(hidden.con).toEqual([{ t: EMAIL, v: '' }]);
  expect(unsealer.public_identity()).toMatchObject({ con: [{ t: EMAIL, v: CAROL }] });
  const out = collector();
  const verified = (await unsealer.unseal(
    BOB,
    uskFor(stack, { ts: hidden.ts, con: [{ t: EMAIL, v: BOB }] }),
    out.writable,
  )) as {
    public: { con: unknown[] };
    private?: { con: unknown[] };
  };
  expect(sha256(out.bytes())).toBe(sha256(plain));
  expect(verified.public.con).toEqual([{ t: EMAIL, v: CAROL }]);
  expect(verified.private?.con).toEqual([{ t: 'pbdf.sidn-pbdf.mobilenumber.mobilenumber', v: '+31655556666' }]);
});
