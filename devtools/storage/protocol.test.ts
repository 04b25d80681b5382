import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { fakePkgKeys, sealAs } from '../../client/testing.js';
import { manualClock } from '../standin/testing.js';
import { startStorage, type RunningStorage } from './testing.js';

/**
 * The storage stand-in over real HTTP on loopback: the Cryptify upload protocol end to end,
 * and each of its checks with the status and body Cryptify gives.
 */

const keys = fakePkgKeys();
const sha256hex = (...parts: Array<string | Uint8Array>) => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest('hex');
};

/** A real PostGuard ciphertext signed as `sender` (with a display name attribute). */
const ciphertext = (sender: string, plaintext: Uint8Array, extra: Array<{ t: string; v: string }> = []) =>
  sealAs(sender, plaintext, { extra });

const initBody = (over: Record<string, unknown> = {}) => ({
  recipient: 'bob@example.org',
  mailContent: 'see attached',
  mailLang: 'EN',
  confirm: false,
  notifyRecipients: false,
  ...over,
});

let storage: RunningStorage;
let message: Uint8Array<ArrayBuffer>;
let url: string;
const clock = manualClock(1_800_000_000);

beforeAll(async () => {
  storage = await startStorage({
    verifyingKey: keys.vk,
    chunkSize: 64 * 1024,
    clock,
    sessionTtlSeconds: 600,
    publicUrl: 'https://pg.example',
  });
  url = storage.url;
  message = await ciphertext(
    'alice@example.org',
    new Uint8Array(150_000).map((_, i) => i % 251),
    [{ t: 'pbdf.gemeente.personalData.fullname', v: 'Alice Example' }],
  );
});
afterAll(() => storage.close());
beforeEach(async () => {
  await fetch(`${url}/standin/outbox`, { method: 'DELETE' });
  await fetch(`${url}/standin/faults`, { method: 'DELETE' });
});

async function init(body: unknown = initBody(), headers: Record<string, string> = {}) {
  return fetch(`${url}/fileupload/init`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

async function begin(body: unknown = initBody()) {
  const response = await init(body);
  expect(response.status).toBe(200);
  const json = (await response.json()) as { uuid: string; recovery_token: string };
  return { uuid: json.uuid, token: response.headers.get('cryptifytoken')!, recovery: json.recovery_token };
}

function put(uuid: string, token: string | undefined, range: string | undefined, body: Uint8Array<ArrayBuffer>) {
  const headers: Record<string, string> = { 'content-type': 'application/octet-stream' };
  if (token !== undefined) headers['cryptifytoken'] = token;
  if (range !== undefined) headers['content-range'] = range;
  return fetch(`${url}/fileupload/${uuid}`, { method: 'PUT', headers, body });
}

function finalize(uuid: string, token: string | undefined, range: string | undefined) {
  const headers: Record<string, string> = {};
  if (token !== undefined) headers['cryptifytoken'] = token;
  if (range !== undefined) headers['content-range'] = range;
  return fetch(`${url}/fileupload/finalize/${uuid}`, { method: 'POST', headers });
}

/** Uploads `bytes` in chunks of `size` (exclusive end), returning the final token. */
async function uploadAll(uuid: string, token: string, bytes: Uint8Array<ArrayBuffer>, size = 64 * 1024) {
  for (let offset = 0; offset < bytes.length; offset += size) {
    const chunk = bytes.subarray(offset, Math.min(bytes.length, offset + size));
    const response = await put(uuid, token, `bytes ${offset}-${offset + chunk.length}/*`, chunk);
    expect(response.status, await response.clone().text()).toBe(200);
    const next = response.headers.get('cryptifytoken')!;
    expect(next).toBe(sha256hex(token, chunk));
    token = next;
  }
  return token;
}

const text = async (r: Response) => ({ status: r.status, body: await r.text() });

describe('init', () => {
  it('creates an empty upload: lowercase v4 UUID, 64-hex upload and recovery tokens', async () => {
    const response = await init();
    expect(response.status).toBe(200);
    const body = (await response.json()) as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(['challenge', 'max_chunk_size_bytes', 'recovery_token', 'uuid']);
    expect(body['max_chunk_size_bytes']).toBe(64 * 1024);
    expect(body['uuid']).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(body['recovery_token']).toMatch(/^[0-9a-f]{64}$/);
    expect(body['challenge']).toMatch(/^[0-9a-f]{64}$/);
    expect(response.headers.get('cryptifytoken')).toMatch(/^[0-9a-f]{64}$/);
    expect((await stat(join(storage.dataDir, body['uuid'] as string))).size).toBe(0);
  });

  it('answers 400 for bad JSON and 422 for a body of the wrong shape, as Rocket does', async () => {
    expect((await init('{"recipient":')).status).toBe(400);
    const shapes: unknown[] = [
      [],
      'just a string',
      initBody({ recipient: undefined }),
      initBody({ recipient: 7 }),
      initBody({ mailContent: undefined }),
      initBody({ mailLang: 'DE' }),
      initBody({ mailLang: 'en' }),
      initBody({ confirm: 'yes' }),
      initBody({ confirm: undefined }),
      initBody({ notifyRecipients: 'no' }),
      initBody({ notifyRecipients: null }),
    ];
    for (const body of shapes) {
      const r = await init(typeof body === 'string' ? JSON.stringify(body) : body);
      expect(r.status, JSON.stringify(body)).toBe(422);
    }
    // Unknown fields are ignored; notifyRecipients is optional.
    expect((await init({ ...initBody({ notifyRecipients: undefined }), extra: 1 })).status).toBe(200);
  });

  it('answers 400 for a recipient list that does not parse', async () => {
    for (const recipient of ['', 'bob', 'bob@example.org,', 'bob@example.org; eve@example.org']) {
      const r = await text(await init(initBody({ recipient })));
      expect(r.status, recipient).toBe(400);
      expect(r.body).toMatch(/^Could not parse e-mail address/);
    }
  });

  it('refuses an init body over 1 MiB with 413', async () => {
    const r = await init(initBody({ mailContent: 'x'.repeat(1024 * 1024) }));
    expect(r.status).toBe(413);
  });
});

describe('happy path', () => {
  it('chains tokens, finalizes, serves the exact bytes, and records the mails', async () => {
    const { uuid, token } = await begin(
      initBody({
        recipient: 'bob@example.org, Carol <carol@example.org>',
        notifyRecipients: true,
        confirm: true,
        mailLang: 'NL',
      }),
    );
    const last = await uploadAll(uuid, token, message);
    const done = await finalize(uuid, last, `bytes */${message.length}`);
    expect(await text(done)).toEqual({ status: 200, body: '' });

    const download = await fetch(`${url}/filedownload/${uuid}`);
    expect(download.status).toBe(200);
    expect(download.headers.get('content-length')).toBe(String(message.length));
    expect(download.headers.get('accept-ranges')).toBe('bytes');
    expect(new Uint8Array(await download.arrayBuffer())).toEqual(message);

    const mails = await storage.outbox();
    expect(mails.map((m) => [m.kind, m.to, m.replyTo])).toEqual([
      ['recipient', 'bob@example.org', 'alice@example.org'],
      ['recipient', 'carol@example.org', 'alice@example.org'],
      ['confirmation', 'alice@example.org', null],
    ]);
    expect(mails[0]).toMatchObject({
      uuid,
      subject: 'Alice Example heeft je bestanden gestuurd',
      lang: 'NL',
      message: 'see attached',
      bytes: message.length,
      sender: 'alice@example.org',
      senderVerified: true,
      senderAttributes: [['pbdf.gemeente.personalData.fullname', 'Alice Example']],
      link: `https://pg.example/download?uuid=${uuid}&recipient=bob%40example.org`,
      expiresAt: 1_800_000_000 + 14 * 86_400,
    });
    expect(mails[2]!.subject).toBe('Je bestanden zijn verstuurd via PostGuard');
  });

  it('sends nothing when neither notification was asked for', async () => {
    const { uuid, token } = await begin();
    const last = await uploadAll(uuid, token, message);
    expect((await finalize(uuid, last, `bytes */${message.length}`)).status).toBe(200);
    expect(await storage.outbox()).toEqual([]);
  });

  it('lets a chunk be replayed with the token it was sent with, without writing it twice', async () => {
    const { uuid, token } = await begin();
    const chunk = message.subarray(0, 1000);
    const first = await put(uuid, token, 'bytes 0-1000/*', chunk);
    const replay = await put(uuid, token, 'bytes 0-1000/*', chunk);
    expect(replay.status).toBe(200);
    expect(replay.headers.get('cryptifytoken')).toBe(first.headers.get('cryptifytoken'));
    expect((await storage.upload(uuid))?.session?.uploaded).toBe(1000);
    expect((await stat(join(storage.dataDir, uuid))).size).toBe(1000);

    const changed = chunk.slice();
    changed[5]! ^= 1;
    expect(await text(await put(uuid, token, 'bytes 0-1000/*', changed))).toEqual({
      status: 400,
      body: 'Idempotent retry: body differs from the original chunk',
    });
  });

  it('serialises concurrent sends of the same chunk: one stores it, the other is a replay', async () => {
    const { uuid, token } = await begin();
    const chunk = message.subarray(0, 60_000);
    const [a, b] = await Promise.all([
      put(uuid, token, 'bytes 0-60000/*', chunk),
      put(uuid, token, 'bytes 0-60000/*', chunk),
    ]);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(a.headers.get('cryptifytoken')).toBe(b.headers.get('cryptifytoken'));
    expect((await storage.upload(uuid))?.session?.uploaded).toBe(60_000);
  });

  it('streams a body sent with chunked transfer encoding', async () => {
    const { uuid, token } = await begin();
    const chunk = message.subarray(0, 50_000);
    const response = await fetch(`${url}/fileupload/${uuid}`, {
      method: 'PUT',
      headers: { cryptifytoken: token, 'content-range': 'bytes 0-50000/*' },
      body: new Blob([chunk]).stream(),
      duplex: 'half',
    } as RequestInit);
    expect(response.status).toBe(200);
    expect(await readFile(join(storage.dataDir, uuid))).toEqual(Buffer.from(chunk));
  });
});

describe('chunk PUT checks', () => {
  it('needs both headers and a parseable Content-Range (400), before anything else', async () => {
    const body = new Uint8Array(10);
    expect((await put('not-a-uuid', undefined, 'bytes 0-10/*', body)).status).toBe(400);
    expect((await put('not-a-uuid', 'x', undefined, body)).status).toBe(400);
    for (const range of ['bytes 0-10', 'items 0-10/*', 'bytes x-10/*', '0-10/*']) {
      expect((await put('not-a-uuid', 'x', range, body)).status, range).toBe(400);
    }
  });

  it('answers 404 JSON for an invalid and for an unknown upload id', async () => {
    const invalid = await put('not-a-uuid', 'x', 'bytes 0-10/*', new Uint8Array(10));
    expect(invalid.status).toBe(404);
    expect(await invalid.json()).toEqual({
      error: 'upload_session_not_found',
      uuid: 'not-a-uuid',
      reason: 'invalid_uuid',
    });
    const unknownId = '0b5bd3d4-1b43-4f4a-9a55-6e0f1f1d7c00';
    const unknown = await put(unknownId, 'x', 'bytes 0-10/*', new Uint8Array(10));
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({
      error: 'upload_session_not_found',
      uuid: unknownId,
      reason: 'expired_or_unknown',
    });
    // Other spellings of a UUID are valid syntax but never name a session.
    const upper = await put(unknownId.toUpperCase(), 'x', 'bytes 0-10/*', new Uint8Array(10));
    expect(((await upper.json()) as { reason: string }).reason).toBe('expired_or_unknown');
  });

  it('checks the range: span present, start < end, at most one chunk', async () => {
    const { uuid, token } = await begin();
    const cases: Array<[string, number, string]> = [
      ['bytes */10', 10, 'Could not read Content-Range start'],
      ['bytes 5-5/*', 0, 'Incorrect Content-Range header'],
      ['bytes 6-5/*', 0, 'Incorrect Content-Range header'],
      [`bytes 0-${64 * 1024 + 1}/*`, 64 * 1024 + 1, `File chunk too large; the maximum is ${64 * 1024} bytes`],
      ['bytes 0-18446744073709551615/*', 10, `File chunk too large; the maximum is ${64 * 1024} bytes`],
    ];
    for (const [range, length, expected] of cases) {
      expect(await text(await put(uuid, token, range, new Uint8Array(length))), range).toEqual({
        status: 400,
        body: expected,
      });
    }
    expect((await storage.upload(uuid))?.session?.uploaded).toBe(0);
  });

  it('refuses gaps, overlaps and a wrong token', async () => {
    const { uuid, token } = await begin();
    const next = await uploadAll(uuid, token, message.subarray(0, 100));
    const chunk = message.subarray(100, 200);
    expect(await text(await put(uuid, next, 'bytes 101-201/*', chunk))).toEqual({
      status: 400,
      body: 'Incorrect Content-Range header',
    });
    expect(await text(await put(uuid, next, 'bytes 50-150/*', chunk))).toEqual({
      status: 400,
      body: 'Incorrect Content-Range header',
    });
    expect(await text(await put(uuid, 'f'.repeat(64), 'bytes 100-200/*', chunk))).toEqual({
      status: 400,
      body: 'Cryptify Token header does not match',
    });
    // The initial token is spent: it is only good for replaying chunk 0 now.
    expect(await text(await put(uuid, token, 'bytes 100-200/*', chunk))).toEqual({
      status: 400,
      body: 'Cryptify Token header does not match',
    });
    expect((await put(uuid, next, 'bytes 100-200/*', chunk)).status).toBe(200);
  });

  it('refuses a body shorter or longer than the range, and keeps nothing of it', async () => {
    const { uuid, token } = await begin();
    const next = await uploadAll(uuid, token, message.subarray(0, 100));
    for (const length of [99, 101, 0]) {
      expect(
        await text(await put(uuid, next, 'bytes 100-200/*', message.subarray(100, 100 + length))),
        String(length),
      ).toEqual({
        status: 400,
        body: 'Data not complete',
      });
      expect((await stat(join(storage.dataDir, uuid))).size).toBe(100);
    }
    expect((await storage.upload(uuid))?.session?.uploaded).toBe(100);
  });

  it('refuses the .NET SDK inclusive range end: n bytes under `start-(start+n-1)`', async () => {
    const { uuid, token } = await begin();
    const chunk = message.subarray(0, 1000);
    expect(await text(await put(uuid, token, 'bytes 0-999/*', chunk))).toEqual({
      status: 400,
      body: 'Data not complete',
    });
    expect(await text(await put(uuid, token, 'bytes 0-0/*', chunk.subarray(0, 1)))).toEqual({
      status: 400,
      body: 'Incorrect Content-Range header',
    });
  });

  it('gives up reading a body far longer than announced and closes the connection', async () => {
    const { uuid, token } = await begin();
    const r = await put(uuid, token, 'bytes 0-10/*', new Uint8Array(3 * 1024 * 1024)).then(
      (response) => ({ status: response.status }),
      (error: unknown) => ({ error }),
    );
    // Either the 400 arrives before the client notices the close, or the client sees the close.
    if ('status' in r) expect(r.status).toBe(400);
    expect((await storage.upload(uuid))?.session?.uploaded).toBe(0);
    expect((await stat(join(storage.dataDir, uuid))).size).toBe(0);
  });
});

describe('limits', () => {
  it('refuses a chunk that would take the upload over the per-upload limit (413 JSON), without writing', async () => {
    const small = await startStorage({ verifyingKey: keys.vk, perUploadLimit: 1500, chunkSize: 1000 });
    try {
      const response = await fetch(`${small.url}/fileupload/init`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(initBody()),
      });
      const { uuid } = (await response.json()) as { uuid: string };
      let token = response.headers.get('cryptifytoken')!;
      const first = await fetch(`${small.url}/fileupload/${uuid}`, {
        method: 'PUT',
        headers: { cryptifytoken: token, 'content-range': 'bytes 0-1000/*' },
        body: message.subarray(0, 1000),
      });
      token = first.headers.get('cryptifytoken')!;
      const over = await fetch(`${small.url}/fileupload/${uuid}`, {
        method: 'PUT',
        headers: { cryptifytoken: token, 'content-range': 'bytes 1000-2000/*' },
        body: message.subarray(1000, 2000),
      });
      expect(over.status).toBe(413);
      expect(await over.json()).toEqual({
        error: 'Upload exceeds the per-upload limit of 1500 bytes',
        limit: 'per_upload',
        used_bytes: 1000,
        limit_bytes: 1500,
      });
      expect((await stat(join(small.dataDir, uuid))).size).toBe(1000);
      // Up to the limit exactly is fine.
      const fits = await fetch(`${small.url}/fileupload/${uuid}`, {
        method: 'PUT',
        headers: { cryptifytoken: token, 'content-range': 'bytes 1000-1500/*' },
        body: message.subarray(1000, 1500),
      });
      expect(fits.status).toBe(200);
    } finally {
      await small.close();
    }
  });

  it('refuses a finalize over the rolling limit (413 JSON), deleting the upload', async () => {
    const small = await startStorage({ verifyingKey: keys.vk, rollingLimit: message.length + 10, clock });
    try {
      const up = async () => {
        const response = await fetch(`${small.url}/fileupload/init`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(initBody()),
        });
        const { uuid } = (await response.json()) as { uuid: string };
        let token = response.headers.get('cryptifytoken')!;
        for (let offset = 0; offset < message.length; offset += 1_000_000) {
          const chunk = message.subarray(offset, Math.min(message.length, offset + 1_000_000));
          const r = await fetch(`${small.url}/fileupload/${uuid}`, {
            method: 'PUT',
            headers: { cryptifytoken: token, 'content-range': `bytes ${offset}-${offset + chunk.length}/*` },
            body: chunk,
          });
          token = r.headers.get('cryptifytoken')!;
        }
        const done = await fetch(`${small.url}/fileupload/finalize/${uuid}`, {
          method: 'POST',
          headers: { cryptifytoken: token, 'content-range': `bytes */${message.length}` },
        });
        return { uuid, done };
      };
      expect((await up()).done.status).toBe(200);
      const second = await up();
      expect(second.done.status).toBe(413);
      expect(await second.done.json()).toEqual({
        error: `Sender has exceeded the 14-day rolling limit of ${message.length + 10} bytes`,
        limit: 'rolling_window',
        used_bytes: message.length,
        limit_bytes: message.length + 10,
        resets_at: new Date((1_800_000_000 + 14 * 86_400) * 1000).toISOString().replace('.000Z', 'Z'),
      });
      await expect(stat(join(small.dataDir, second.uuid))).rejects.toThrow();
      expect((await fetch(`${small.url}/standin/uploads/${second.uuid}`)).status).toBe(404);
    } finally {
      await small.close();
    }
  });
});

describe('finalize checks', () => {
  it('needs both headers (400), a known upload (404 JSON), the current token (400) and the exact size (422)', async () => {
    const { uuid, token } = await begin();
    const last = await uploadAll(uuid, token, message);
    expect((await finalize(uuid, undefined, `bytes */${message.length}`)).status).toBe(400);
    expect((await finalize(uuid, last, undefined)).status).toBe(400);
    expect((await finalize(uuid, last, 'bytes nonsense')).status).toBe(400);
    const unknown = await finalize('whatever', last, `bytes */${message.length}`);
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({
      error: 'upload_session_not_found',
      uuid: 'whatever',
      reason: 'expired_or_unknown',
    });
    expect(await text(await finalize(uuid, token, `bytes */${message.length}`))).toEqual({
      status: 400,
      body: 'Cryptify Token header does not match',
    });
    for (const range of [
      `bytes */${message.length - 1}`,
      `bytes */${message.length + 1}`,
      'bytes */*',
      `bytes 0-${message.length}/*`,
    ]) {
      expect(await text(await finalize(uuid, last, range)), range).toEqual({ status: 422, body: '' });
    }
    expect(await storage.outbox()).toEqual([]);
    // Only the size matters, as in Cryptify.
    expect((await finalize(uuid, last, `bytes 0-1/${message.length}`)).status).toBe(200);
  });

  it('answers a second finalize as the first (Cryptify would mail twice; we do not): one mail, counted once', async () => {
    const { uuid, token } = await begin(initBody({ notifyRecipients: true }));
    const last = await uploadAll(uuid, token, message);
    expect((await finalize(uuid, last, `bytes */${message.length}`)).status).toBe(200);
    expect((await finalize(uuid, last, `bytes */${message.length}`)).status).toBe(200);
    expect((await storage.outbox()).map((m) => m.seq)).toHaveLength(1);
    expect((await storage.upload(uuid))?.session?.finalized).toBe(2);
  });

  it('without a verifying key takes the sender unverified and says so', async () => {
    const loose = await startStorage({});
    try {
      const response = await fetch(`${loose.url}/fileupload/init`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(initBody({ notifyRecipients: true })),
      });
      const { uuid } = (await response.json()) as { uuid: string };
      const put1 = await fetch(`${loose.url}/fileupload/${uuid}`, {
        method: 'PUT',
        headers: {
          cryptifytoken: response.headers.get('cryptifytoken')!,
          'content-range': `bytes 0-${message.length}/*`,
        },
        body: message,
      });
      const done = await fetch(`${loose.url}/fileupload/finalize/${uuid}`, {
        method: 'POST',
        headers: { cryptifytoken: put1.headers.get('cryptifytoken')!, 'content-range': `bytes */${message.length}` },
      });
      expect(done.status).toBe(200);
      expect((await loose.outbox())[0]).toMatchObject({ sender: 'alice@example.org', senderVerified: false });
    } finally {
      await loose.close();
    }
  });
});

describe('status and session lifetime', () => {
  it('needs the recovery token (401 without, 404 when wrong) and reports progress', async () => {
    const { uuid, token, recovery } = await begin();
    const status = (headers: Record<string, string>) => fetch(`${url}/fileupload/${uuid}/status`, { headers });
    expect((await status({})).status).toBe(401);
    expect((await status({ 'x-recovery-token': '   ' })).status).toBe(401);
    const wrong = await status({ 'x-recovery-token': 'f'.repeat(64) });
    expect(wrong.status).toBe(404);
    expect(await wrong.json()).toEqual({ error: 'upload_session_not_found', uuid, reason: 'expired_or_unknown' });
    expect(await (await status({ 'x-recovery-token': ` ${recovery} ` })).json()).toEqual({
      uploaded: 0,
      cryptify_token: token,
    });
    const next = await uploadAll(uuid, token, message.subarray(0, 500));
    expect(await (await status({ 'x-recovery-token': recovery })).json()).toEqual({
      uploaded: 500,
      cryptify_token: next,
      prev_token: token,
      prev_offset: 0,
    });
  });

  it('forgets an idle session (404 expired_or_unknown) but keeps and serves its file', async () => {
    const { uuid, token, recovery } = await begin();
    const next = await uploadAll(uuid, token, message.subarray(0, 700));
    clock.advance(500);
    // Status counts as activity.
    expect(
      (await fetch(`${url}/fileupload/${uuid}/status`, { headers: { 'x-recovery-token': recovery } })).status,
    ).toBe(200);
    clock.advance(500);
    const chunk = await put(uuid, next, 'bytes 700-800/*', message.subarray(700, 800));
    expect(chunk.status).toBe(200);
    clock.advance(601);
    const late = await put(uuid, chunk.headers.get('cryptifytoken')!, 'bytes 800-900/*', message.subarray(800, 900));
    expect(late.status).toBe(404);
    expect(((await late.json()) as { reason: string }).reason).toBe('expired_or_unknown');
    const file = await fetch(`${url}/filedownload/${uuid}`);
    expect(new Uint8Array(await file.arrayBuffer())).toEqual(message.subarray(0, 800));
  });
});

describe('download', () => {
  let uuid: string;
  beforeAll(async () => {
    const started = await begin();
    uuid = started.uuid;
    await uploadAll(uuid, started.token, message.subarray(0, 1000));
  });

  it('serves single ranges with 206 and an inclusive Content-Range', async () => {
    const cases: Array<[string, number, number]> = [
      ['bytes=0-9', 0, 9],
      ['bytes=990-', 990, 999],
      ['bytes=-5', 995, 999],
      ['bytes=500-5000', 500, 999],
    ];
    for (const [range, start, end] of cases) {
      const r = await fetch(`${url}/filedownload/${uuid}`, { headers: { range } });
      expect(r.status, range).toBe(206);
      expect(r.headers.get('content-range')).toBe(`bytes ${start}-${end}/1000`);
      expect(r.headers.get('content-length')).toBe(String(end - start + 1));
      expect(new Uint8Array(await r.arrayBuffer())).toEqual(message.subarray(start, end + 1));
    }
  });

  it('answers 416 with the size for ranges it cannot serve', async () => {
    for (const range of ['bytes=1000-', 'bytes=0-1,5-6', 'bytes=-0', 'lines=1-2', 'bytes=9-3']) {
      const r = await fetch(`${url}/filedownload/${uuid}`, { headers: { range } });
      expect(r.status, range).toBe(416);
      expect(r.headers.get('content-range')).toBe('bytes */1000');
    }
  });

  it('answers 404 for unknown files and names that could leave the data directory', async () => {
    for (const name of [
      '0b5bd3d4-1b43-4f4a-9a55-6e0f1f1d7c00',
      '..',
      '%2E%2E',
      'a%2Fb',
      'a%5Cb',
      'a%00b',
      'x'.repeat(129),
    ]) {
      expect((await fetch(`${url}/filedownload/${name}`)).status, name).toBe(404);
    }
  });

  it('serves an empty upload as 200 with no body, and refuses ranges on it', async () => {
    const { uuid: empty } = await begin();
    const r = await fetch(`${url}/filedownload/${empty}`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-length')).toBe('0');
    expect((await fetch(`${url}/filedownload/${empty}`, { headers: { range: 'bytes=0-' } })).status).toBe(416);
  });
});

describe('fault injection (stand-in only)', () => {
  it('fails a chunk before it is stored; the same request then succeeds', async () => {
    const { uuid, token } = await begin();
    await storage.failChunks({ times: 1, status: 503 });
    const chunk = message.subarray(0, 100);
    expect((await put(uuid, token, 'bytes 0-100/*', chunk)).status).toBe(503);
    expect((await storage.upload(uuid))?.session?.uploaded).toBe(0);
    const retry = await put(uuid, token, 'bytes 0-100/*', chunk);
    expect(retry.status).toBe(200);
    expect(retry.headers.get('cryptifytoken')).toBe(sha256hex(token, chunk));
    expect(await storage.faultsTriggered()).toBeGreaterThanOrEqual(1);
  });

  it('loses the answer after storing a chunk; the retry is answered by the replay path', async () => {
    const { uuid, token } = await begin();
    await storage.failChunks({ times: 1, reset: true, afterCommit: true });
    const chunk = message.subarray(0, 100);
    await expect(put(uuid, token, 'bytes 0-100/*', chunk)).rejects.toThrow();
    expect((await storage.upload(uuid))?.session?.uploaded).toBe(100);
    const retry = await put(uuid, token, 'bytes 0-100/*', chunk);
    expect(retry.status).toBe(200);
    expect(retry.headers.get('cryptifytoken')).toBe(sha256hex(token, chunk));
    expect((await stat(join(storage.dataDir, uuid))).size).toBe(100);
  });

  it('validates the fault body', async () => {
    const put1 = (body: unknown) =>
      fetch(`${url}/standin/faults/chunk`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    for (const bad of [
      {},
      { times: 0 },
      { times: 1, always: true },
      { times: 1, status: 200 },
      { times: 1, status: 500, reset: true },
      { times: 1, bogus: 1 },
    ]) {
      expect((await put1(bad)).status, JSON.stringify(bad)).toBe(400);
    }
    expect((await put1({ always: true })).status).toBe(204);
    expect(await (await fetch(`${url}/standin/faults`)).json()).toMatchObject({
      chunk: { remaining: 'always', response: 500 },
    });
  });
});

describe('CORS', () => {
  it('lets browsers send the protocol headers and read the token', async () => {
    const preflight = await fetch(`${url}/fileupload/x`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://app.example',
        'access-control-request-method': 'PUT',
        'access-control-request-headers': 'cryptifytoken,content-range',
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('cryptifytoken');
    const response = await init(initBody(), { origin: 'https://app.example' });
    expect(response.headers.get('access-control-expose-headers')?.toLowerCase()).toContain('cryptifytoken');
  });

  it("lets browsers send finalize's proof of possession (X-PostGuard-Proof), as Cryptify does", async () => {
    const preflight = await fetch(`${url}/fileupload/finalize/x`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://app.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'cryptifytoken,content-range,x-postguard-proof',
      },
    });
    expect(preflight.status).toBe(204);
    const allowed = (preflight.headers.get('access-control-allow-headers') ?? '')
      .split(',')
      .map((h) => h.trim().toLowerCase());
    expect(allowed).toEqual(expect.arrayContaining(['cryptifytoken', 'content-range', 'x-postguard-proof']));
    expect(preflight.headers.get('access-control-allow-methods')).toContain('POST');
  });
});
