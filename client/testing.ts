import { crc32, inflateRawSync } from 'node:zlib';
import Fastify, { type FastifyInstance } from 'fastify';
import { sealStream } from '../lib/index.js';
import { extractSigningKey, extractUsk, generateKemKeys, generateSigningKeys } from '../lib/keys.js';
import { DEFAULT_EMAIL_ATTRIBUTE } from './config.js';

/**
 * For tests of code that uses the SDK without a full PKG: a loopback server that speaks the two
 * PKG routes the SDK calls (GET /v2/parameters with ETag revalidation, POST /v2/irma/sign/key
 * with an API key) plus the two the storage service calls (GET /v2/sign/parameters and
 * GET /v2/api-key/validate), with fresh master keys. It checks the API key
 * against one fixed value; the real PKG (server/app.ts) looks keys up in PostgreSQL.
 */

export interface FakePkg {
  url: string;
  /** Master keys (base64), so tests can extract user keys and verify. */
  keys: { mpk: string; msk: string; vk: string; sk: string };
  /** The API key the fake accepts, and the identity it signs for. */
  apiKey: string;
  sender: string;
  /** Requests seen, by route: parameters (200s and 304s separately) and sign/key. */
  counts: { parameters200: number; parameters304: number; signKey: number };
  /** Bodies and Authorization headers of the sign/key requests seen. */
  signKeyRequests: Array<{ authorization: string | undefined; body: unknown }>;
  /** The ETag /v2/parameters sends. */
  etag: string;
  app: FastifyInstance;
  close(): Promise<void>;
}

/** The tenant id the fake's /v2/api-key/validate answers for its API key. */
export const FAKE_TENANT = '00000000-0000-4000-8000-000000000001';

let cachedKeys: FakePkg['keys'] | undefined;

/** The fake PKG's session JWTs: this prefix and the e-mail address the session proved. */
export const FAKE_JWT_PREFIX = 'fake-jwt:';

/** One set of master keys per process (generating them costs about 0.2 s). */
export function fakePkgKeys(): FakePkg['keys'] {
  if (cachedKeys === undefined) {
    const kem = generateKemKeys();
    const ibs = generateSigningKeys();
    cachedKeys = { mpk: kem.mpk, msk: kem.msk, vk: ibs.vk, sk: ibs.sk };
  }
  return cachedKeys;
}

export async function startFakePkg(
  options: {
    apiKey?: string;
    sender?: string;
    emailAttribute?: string;
    extraSenderAttributes?: Array<{ t: string; v: string }>;
  } = {},
): Promise<FakePkg> {
  const keys = fakePkgKeys();
  const apiKey = options.apiKey ?? 'PG-test-key';
  const sender = options.sender ?? 'sender@example.org';
  const emailAttribute = options.emailAttribute ?? DEFAULT_EMAIL_ATTRIBUTE;
  const etag = '"fake-mpk-1"';
  const counts = { parameters200: 0, parameters304: 0, signKey: 0 };
  const signKeyRequests: FakePkg['signKeyRequests'] = [];
  const app = Fastify();

  app.get('/v2/parameters', async (request, reply) => {
    if (request.headers['if-none-match'] === etag) {
      counts.parameters304++;
      return reply.code(304).send();
    }
    counts.parameters200++;
    return reply
      .header('etag', etag)
      .header('cache-control', 'public, no-cache')
      .send({ formatVersion: 0, publicKey: keys.mpk });
  });
  app.get('/v2/sign/parameters', async () => ({ formatVersion: 0, publicKey: keys.vk }));
  app.get('/v2/api-key/validate', async (request, reply) => {
    if (request.headers.authorization !== `Bearer ${apiKey}`)
      return reply.code(401).send({ error: true, message: 'API key is invalid' });
    return { tenant_id: FAKE_TENANT, organisation_name: null };
  });
  app.post('/v2/irma/sign/key', async (request, reply) => {
    counts.signKey++;
    signKeyRequests.push({ authorization: request.headers.authorization, body: request.body });
    if (request.headers.authorization !== `Bearer ${apiKey}`) {
      return reply.code(401).send({ error: true, message: 'API key is invalid' });
    }
    const policy = {
      ts: Math.floor(Date.now() / 1000),
      con: [{ t: emailAttribute, v: sender }, ...(options.extraSenderAttributes ?? [])],
    };
    return { status: 'DONE', proofStatus: 'VALID', pubSignKey: { key: extractSigningKey(keys.sk, policy), policy } };
  });

  // A recipient's key: the fake's session JWTs are `fake-jwt:<address>` (FAKE_JWT), proving that address.
  app.get<{ Params: { ts: string } }>('/v2/irma/key/:ts', async (request, reply) => {
    const bearer = request.headers.authorization ?? '';
    const proved = bearer.startsWith(`Bearer ${FAKE_JWT_PREFIX}`)
      ? bearer.slice(`Bearer ${FAKE_JWT_PREFIX}`.length)
      : '';
    if (proved === '') return reply.code(401).send({ error: true, message: 'no session' });
    const policy = { ts: Number(request.params.ts), con: [{ t: emailAttribute, v: proved }] };
    return { status: 'DONE', proofStatus: 'VALID', key: extractUsk(keys.msk, policy) };
  });

  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.address();
  if (typeof address !== 'object' || address === null) throw new Error('fake PKG did not bind a TCP port');
  return {
    url: `http://127.0.0.1:${address.port}`,
    keys,
    apiKey,
    sender,
    counts,
    signKeyRequests,
    etag,
    app,
    close: () => app.close(),
  };
}

/**
 * A streaming-mode ciphertext for `recipient`, signed as `sender` (plus `extra` public attributes)
 * under the process's fake master keys.
 */
export async function sealAs(
  sender: string,
  plaintext: Uint8Array,
  options: { recipient?: string; extra?: Array<{ t: string; v: string }>; emailAttribute?: string } = {},
): Promise<Uint8Array<ArrayBuffer>> {
  const keys = fakePkgKeys();
  const email = options.emailAttribute ?? DEFAULT_EMAIL_ATTRIBUTE;
  const recipient = options.recipient ?? 'bob@example.org';
  const ts = Math.floor(Date.now() / 1000);
  const signer = { ts, con: [{ t: email, v: sender }, ...(options.extra ?? [])] };
  const parts: Uint8Array[] = [];
  await sealStream(
    keys.mpk,
    {
      policy: { [recipient]: { ts, con: [{ t: email, v: recipient }] } },
      pubSignKey: { key: extractSigningKey(keys.sk, signer), policy: signer },
    },
    new ReadableStream({
      start(controller) {
        controller.enqueue(plaintext);
        controller.close();
      },
    }),
    new WritableStream({ write: (chunk) => void parts.push(chunk.slice()) }),
  );
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.length;
  }
  return out;
}

/**
 * A small ZIP reader for tests (central directory, stored and deflated entries, ZIP64 fields,
 * CRC-32 checked): entry name → bytes. Written for checking what the SDK produced; it trusts its
 * input no further than its bounds checks.
 */
export function readZip(zip: Uint8Array): Map<string, Uint8Array> {
  const view = new DataView(zip.buffer, zip.byteOffset, zip.byteLength);
  const u16 = (o: number) => view.getUint16(o, true);
  const u32 = (o: number) => view.getUint32(o, true);
  const u64 = (o: number) => Number(view.getBigUint64(o, true));
  let eocd = -1;
  for (let o = zip.length - 22; o >= Math.max(0, zip.length - 22 - 0xffff); o--) {
    if (u32(o) === 0x06054b50) {
      eocd = o;
      break;
    }
  }
  if (eocd < 0) throw new Error('zip: no end of central directory');
  let count = u16(eocd + 10);
  let cdOffset = u32(eocd + 16);
  if (count === 0xffff || cdOffset === 0xffffffff) {
    const locator = eocd - 20;
    if (u32(locator) !== 0x07064b50) throw new Error('zip: no ZIP64 locator');
    const z64 = u64(locator + 8);
    if (u32(z64) !== 0x06064b50) throw new Error('zip: no ZIP64 end record');
    count = u64(z64 + 32);
    cdOffset = u64(z64 + 48);
  }
  const entries = new Map<string, Uint8Array>();
  let p = cdOffset;
  for (let i = 0; i < count; i++) {
    if (u32(p) !== 0x02014b50) throw new Error(`zip: bad central directory entry ${i}`);
    const method = u16(p + 10);
    const crc = u32(p + 16);
    let compressed = u32(p + 20);
    let size = u32(p + 24);
    const nameLength = u16(p + 28);
    const extraLength = u16(p + 30);
    const commentLength = u16(p + 32);
    let local = u32(p + 42);
    const name = new TextDecoder('utf-8', { fatal: true }).decode(zip.subarray(p + 46, p + 46 + nameLength));
    for (let e = p + 46 + nameLength; e < p + 46 + nameLength + extraLength;) {
      const id = u16(e);
      const length = u16(e + 2);
      if (id === 0x0001) {
        let f = e + 4;
        if (size === 0xffffffff) ((size = u64(f)), (f += 8));
        if (compressed === 0xffffffff) ((compressed = u64(f)), (f += 8));
        if (local === 0xffffffff) local = u64(f);
      }
      e += 4 + length;
    }
    if (u32(local) !== 0x04034b50) throw new Error(`zip: bad local header for ${name}`);
    const start = local + 30 + u16(local + 26) + u16(local + 28);
    if (start + compressed > zip.length) throw new Error(`zip: ${name} runs past the end`);
    const raw = zip.subarray(start, start + compressed);
    const data = method === 0 ? raw.slice() : method === 8 ? new Uint8Array(inflateRawSync(raw)) : undefined;
    if (data === undefined) throw new Error(`zip: ${name} uses method ${method}`);
    if (data.length !== size) throw new Error(`zip: ${name} is ${data.length} bytes, the directory says ${size}`);
    if (crc32(data) >>> 0 !== crc) throw new Error(`zip: CRC mismatch in ${name}`);
    entries.set(name, data);
    p += 46 + nameLength + extraLength + commentLength;
  }
  return entries;
}

/** `size` pseudo-random bytes (xorshift32), generated as they are pulled, 64 KiB at a time. */
export function pseudoRandomStream(size: number, seed = 0x9e3779b9): ReadableStream<Uint8Array> {
  let produced = 0;
  let x = seed | 0 || 1;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (produced >= size) return controller.close();
      const n = Math.min(65_536, size - produced);
      const block = new Uint8Array(n);
      const words = new Uint32Array(block.buffer, 0, n >>> 2);
      for (let i = 0; i < words.length; i++) {
        x ^= x << 13;
        x ^= x >>> 17;
        x ^= x << 5;
        words[i] = x >>> 0;
      }
      produced += n;
      controller.enqueue(block);
    },
  });
}
