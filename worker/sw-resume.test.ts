import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_SEGMENT_SIZE, sealStream, type SealOptions } from '../lib/index.js';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from '../lib/keys.js';
import { expectSameBytes } from '../test/bytes.js';
import { chunkedSource, collector } from '../test/streams.js';
import type { DecrypterOptions } from './sw-core.js';
import type { RegisterRequest } from './sw-protocol.js';
import { startSave } from './test/sw-node.js';

/**
 * A service-worker save of a URL survives a dropped connection: the decrypter (driven in Node
 * behind a stand-in ServiceWorkerGlobalScope, as in sw-core.test.ts) resumes the ciphertext with
 * `Range: bytes=N-` and the plaintext comes out whole and exact, through both of its ways to
 * answer a whole file: held and authenticated first, and read twice (the second pass pinned to
 * the first's bytes by If-Match).
 */

const TS = 1_700_000_000;
const EMAIL = 'pbdf.sidn-pbdf.email.email';
const ALICE = 'alice@example.org';

let vk: string;
let usk: string;
let plain: Uint8Array;
let ciphertext: Uint8Array;
let server: Server;
let base = '';

/** What the server saw of each request to one path. */
interface Seen {
  range: string | undefined;
  ifMatch: string | undefined;
}

/** Per path: which requests (numbered from 0) are cut, and after how many body bytes. */
const cuts = new Map<string, { cutAt: (n: number) => number | undefined; seen: Seen[] }>();

function handle(req: IncomingMessage, res: import('node:http').ServerResponse) {
  const entry = cuts.get(req.url ?? '');
  if (entry === undefined) return void res.writeHead(404).end();
  const n = entry.seen.length;
  entry.seen.push({ range: req.headers.range, ifMatch: req.headers['if-match'] });
  const etag = '"v1"';
  if (req.headers['if-match'] !== undefined && req.headers['if-match'] !== etag) return void res.writeHead(412).end();
  const match = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
  const start = match === null ? 0 : Number(match[1]);
  const body = ciphertext.subarray(start);
  // What a cross-origin page reads of Cryptify: no Content-Range, only the status and Content-Length.
  res.writeHead(match === null ? 200 : 206, { 'content-length': body.length, etag });
  const cut = entry.cutAt(n);
  if (cut === undefined) res.end(body);
  else res.write(body.subarray(0, cut), () => res.destroy());
}

beforeAll(async () => {
  const kem = generateKemKeys();
  const ibs = generateSigningKeys();
  vk = ibs.vk;
  const alice = { ts: TS, con: [{ t: EMAIL, v: ALICE }] };
  const bob = { ts: TS, con: [{ t: EMAIL, v: 'bob@example.org' }] };
  usk = extractUsk(kem.msk, alice);
  const options: SealOptions = {
    policy: { [ALICE]: alice },
    pubSignKey: { key: extractSigningKey(ibs.sk, bob), policy: bob },
  };
  plain = Uint8Array.from({ length: 4 * DEFAULT_SEGMENT_SIZE + 777 }, (_, i) => (i * 7 + (i >> 10)) & 255);
  const out = collector();
  await sealStream(kem.mpk, options, chunkedSource(plain), out.writable);
  ciphertext = out.bytes();
  server = createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

/** Registers a download with a fresh decrypter, GETs it, and reads it to its end. */
async function save(request: Partial<RegisterRequest>, options: DecrypterOptions) {
  const run = await startSave({ recipientId: ALICE, usk, vk, ...request }, options);
  const res = await run.response;
  const bytes = new Uint8Array(await res.arrayBuffer());
  await expect.poll(() => run.events.some((e) => e.type === 'done' || e.type === 'error')).toBe(true);
  run.close();
  return { res, bytes, events: run.events };
}

describe('a service-worker save of a URL', () => {
  it('held and authenticated first: a connection cut at 50 % is resumed, the plaintext exact', async () => {
    const half = Math.floor(ciphertext.length / 2);
    const entry = { cutAt: (n: number) => (n === 0 ? half : undefined), seen: [] as Seen[] };
    cuts.set('/held', entry);
    const { res, bytes, events } = await save({ source: { kind: 'url', url: `${base}/held` } }, {});
    expect([res.status, res.headers.get('x-postguard-verified')]).toEqual([200, 'complete']);
    expectSameBytes(bytes, plain);
    expect(events.at(-1)).toMatchObject({ type: 'done', bytes: plain.length });
    expect(entry.seen.map((s) => s.range)).toEqual([undefined, `bytes=${half}-`]);
  });

  it('read twice: a cut in each pass is resumed, the second pass and its resume pinned by If-Match', async () => {
    const half = Math.floor(ciphertext.length / 2);
    const entry = { cutAt: (n: number) => (n === 0 || n === 2 ? half : undefined), seen: [] as Seen[] };
    cuts.set('/twice', entry);
    const { res, bytes, events } = await save(
      { source: { kind: 'url', url: `${base}/twice` } },
      { holdLimitBytes: 100_000 },
    );
    expect([res.status, res.headers.get('content-length')]).toEqual([200, String(plain.length)]);
    expectSameBytes(bytes, plain);
    expect(events.at(-1)).toMatchObject({ type: 'done', bytes: plain.length });
    expect(entry.seen).toEqual([
      { range: undefined, ifMatch: undefined },
      { range: `bytes=${half}-`, ifMatch: undefined },
      { range: undefined, ifMatch: '"v1"' },
      { range: `bytes=${half}-`, ifMatch: '"v1"' },
    ]);
  });
});
