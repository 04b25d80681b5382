import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { fakePkgKeys, sealAs } from '../../client/testing.js';
import { buildStorage, storageDataDir } from './app.js';
import type { StorageOptions } from './settings.js';

/**
 * What Cryptify's current release does that the older protocol did not, through inject(): GET
 * /limits, init's max_chunk_size_bytes and the chunk cap, and, in strict mode, CORS that exposes
 * only the token and a rolling-window 413 that keeps the sender's usage to itself.
 */

const keys = fakePkgKeys();
const ORIGIN = 'https://app.example';
/** Cryptify's allowed request headers. */
const REQUEST_HEADERS = [
  'authorization',
  'content-type',
  'content-range',
  'cryptifytoken',
  'range',
  'x-cryptify-source',
  'x-postguard-proof',
  'x-recovery-token',
  'x-postguard-client-version',
];

const apps: FastifyInstance[] = [];
async function storage(options: StorageOptions = {}): Promise<FastifyInstance> {
  const app = buildStorage(options);
  apps.push(app);
  await app.ready();
  return app;
}
afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

let message: Uint8Array<ArrayBuffer>;
beforeAll(async () => {
  message = await sealAs('alice@example.org', new Uint8Array(3000).fill(5));
});

const initBody = JSON.stringify({
  recipient: 'bob@example.org',
  mailContent: '',
  mailLang: 'EN',
  confirm: false,
  notifyRecipients: false,
});

async function init(app: FastifyInstance, headers: Record<string, string> = {}) {
  const response = await app.inject({
    method: 'POST',
    url: '/fileupload/init',
    headers: { 'content-type': 'application/json', ...headers },
    payload: initBody,
  });
  expect(response.statusCode).toBe(200);
  return {
    response,
    body: response.json<Record<string, unknown>>(),
    token: response.headers['cryptifytoken'] as string,
  };
}

const put = (app: FastifyInstance, uuid: string, token: string, start: number, bytes: Uint8Array) =>
  app.inject({
    method: 'PUT',
    url: `/fileupload/${uuid}`,
    headers: {
      'content-type': 'application/octet-stream',
      cryptifytoken: token,
      'content-range': `bytes ${start}-${start + bytes.length}/*`,
    },
    payload: Buffer.from(bytes),
  });

/** Uploads and finalizes `message` in one chunk; the finalize response. */
async function send(app: FastifyInstance) {
  const { body, token } = await init(app);
  const uuid = body['uuid'] as string;
  const chunk = await put(app, uuid, token, 0, message);
  expect(chunk.statusCode).toBe(200);
  return app.inject({
    method: 'POST',
    url: `/fileupload/finalize/${uuid}`,
    headers: { cryptifytoken: chunk.headers['cryptifytoken'] as string, 'content-range': `bytes */${message.length}` },
  });
}

const list = (header: unknown) =>
  String(header ?? '')
    .split(',')
    .map((h) => h.trim().toLowerCase())
    .filter((h) => h !== '');

describe.each([false, true])('strict: %s', (strict) => {
  it("serves GET /limits unauthenticated: the default tier's caps and the window in whole days", async () => {
    expect((await (await storage({ strict })).inject('/limits')).json()).toEqual({
      per_upload_limit_bytes: 5_000_000_000,
      rolling_limit_bytes: 5_000_000_000,
      window_days: 14,
    });
    const app = await storage({
      strict,
      perUploadLimit: 1234,
      rollingLimit: 5678,
      apiKeyPerUploadLimit: 9_999_999,
      rollingWindowSeconds: 7 * 86_400 + 3600,
    });
    const response = await app.inject({ url: '/limits', headers: { authorization: 'Bearer PG-anything' } });
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toMatch(/^application\/json/);
    expect(response.json()).toEqual({ per_upload_limit_bytes: 1234, rolling_limit_bytes: 5678, window_days: 7 });
  });

  it('answers init with uuid, recovery_token, challenge and max_chunk_size_bytes', async () => {
    expect((await init(await storage({ strict }))).body['max_chunk_size_bytes']).toBe(5_000_000);
    const { body } = await init(await storage({ strict, chunkSize: 1000 }));
    expect(Object.keys(body).sort()).toEqual(['challenge', 'max_chunk_size_bytes', 'recovery_token', 'uuid']);
    expect(body['max_chunk_size_bytes']).toBe(1000);
  });

  it('takes a chunk of max_chunk_size_bytes and refuses one byte more with 400, storing nothing of it', async () => {
    const app = await storage({ strict, chunkSize: 1000 });
    const { body, token } = await init(app);
    const uuid = body['uuid'] as string;
    const over = await put(app, uuid, token, 0, message.subarray(0, 1001));
    expect(over.statusCode).toBe(400);
    expect(over.body).toBe('File chunk too large; the maximum is 1000 bytes');
    expect((await readFile(join(storageDataDir(app), uuid))).length).toBe(0);
    const max = await put(app, uuid, token, 0, message.subarray(0, 1000));
    expect(max.statusCode).toBe(200);
    expect((await readFile(join(storageDataDir(app), uuid))).length).toBe(1000);
  });

  it('lets browsers send all of Cryptify’s request headers', async () => {
    const app = await storage({ strict });
    const preflight = await app.inject({
      method: 'OPTIONS',
      url: '/fileupload/x',
      headers: {
        origin: ORIGIN,
        'access-control-request-method': 'PUT',
        'access-control-request-headers': REQUEST_HEADERS.join(','),
      },
    });
    expect(preflight.statusCode).toBe(204);
    expect(list(preflight.headers['access-control-allow-headers']).sort()).toEqual([...REQUEST_HEADERS].sort());
    expect(list(preflight.headers['access-control-allow-methods'])).toEqual(['get', 'post', 'put', 'delete']);
  });
});

describe('CORS exposed headers', () => {
  /** The exposed headers of an init and of a ranged download, from a cross-origin page. */
  async function exposed(strict: boolean) {
    const app = await storage({ strict });
    const { response, body, token } = await init(app, { origin: ORIGIN });
    const uuid = body['uuid'] as string;
    expect((await put(app, uuid, token, 0, message.subarray(0, 100))).statusCode).toBe(200);
    const ranged = await app.inject({ url: `/filedownload/${uuid}`, headers: { origin: ORIGIN, range: 'bytes=10-' } });
    expect(ranged.statusCode).toBe(206);
    expect(ranged.headers['content-range']).toBe('bytes 10-99/100');
    expect(ranged.headers['access-control-allow-origin']).toBe(ORIGIN);
    return [response.headers['access-control-expose-headers'], ranged.headers['access-control-expose-headers']];
  }

  it('are only cryptifytoken in strict mode, so a cross-origin page cannot read Content-Range', async () => {
    expect(await exposed(true)).toEqual(['cryptifytoken', 'cryptifytoken']);
  });

  it('include the range headers outside strict mode (a development convenience)', async () => {
    const all = 'cryptifytoken, content-range, accept-ranges';
    expect(await exposed(false)).toEqual([all, all]);
  });
});

describe('a rolling-window 413', () => {
  /** Room for one upload of `message`, not two. */
  const over = () => ({ verifyingKey: keys.vk, rollingLimit: message.length + 10 });

  it('in strict mode says which limit and how large, not how much the sender used or when it resets', async () => {
    const app = await storage({ ...over(), strict: true });
    const first = await send(app);
    expect(first.statusCode).toBe(200);
    const second = await send(app);
    expect(second.statusCode).toBe(413);
    expect(second.headers['content-type']).toMatch(/^application\/json/);
    expect(second.json()).toEqual({
      error: `Sender has exceeded the 14-day rolling limit of ${message.length + 10} bytes`,
      limit: 'rolling_window',
      limit_bytes: message.length + 10,
    });
  });

  it('outside strict mode still carries used_bytes and resets_at', async () => {
    const app = await storage(over());
    expect((await send(app)).statusCode).toBe(200);
    const second = await send(app);
    expect(second.statusCode).toBe(413);
    expect(Object.keys(second.json<object>()).sort()).toEqual([
      'error',
      'limit',
      'limit_bytes',
      'resets_at',
      'used_bytes',
    ]);
    expect(second.json<{ used_bytes: number }>().used_bytes).toBe(message.length);
  });
});
