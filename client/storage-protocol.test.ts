import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startStorage, type RunningStorage } from '../devtools/storage/testing.js';
import { resolveConfig, type FetchLike, type PostGuardConfig } from './config.js';
import { ClientError, ClientErrorCode } from './errors.js';
import { checkLimits, chunkSizeFor } from './limits.js';
import { StorageClient, type UploadSession } from './storage.js';
import { fakePkgKeys } from './testing.js';

/**
 * The storage protocol step by step (StorageClient) against the storage stand-in on loopback, and
 * against small servers of our own for the answers the stand-in never gives (an older Cryptify's
 * 404 for /limits, malformed bodies).
 */

const MAX_CHUNK = 4096;

let storage: RunningStorage;
beforeAll(async () => {
  storage = await startStorage({
    verifyingKey: fakePkgKeys().vk,
    chunkSize: MAX_CHUNK,
    perUploadLimit: 123_456,
    rollingLimit: 1_000_000,
    rollingWindowSeconds: 7 * 86_400,
  });
});
afterAll(() => storage.close());
beforeEach(async () => {
  await fetch(`${storage.url}/standin/faults`, { method: 'DELETE' });
});

interface Sent {
  method: string;
  url: string;
  headers: Record<string, string>;
}

function client(config: Partial<PostGuardConfig> = {}) {
  const sent: Sent[] = [];
  const spy: FetchLike = (url, init) => {
    sent.push({ method: init.method ?? 'GET', url, headers: Object.fromEntries(new Headers(init.headers).entries()) });
    return fetch(url, init);
  };
  const storageClient = new StorageClient(
    resolveConfig({
      pkgUrl: 'http://127.0.0.1:9',
      storageUrl: storage.url,
      allowInsecureUrls: true,
      retry: { initialDelayMs: 1, maxDelayMs: 5 },
      fetch: spy,
      ...config,
    }),
  );
  return { storageClient, sent };
}

const INIT = {
  recipients: ['bob@example.org'],
  notifyRecipients: false,
  confirm: false,
  message: '',
  language: 'EN',
  apiKey: undefined,
} as const;

const bytes = (n: number, seed = 1) =>
  new Uint8Array(n).map((_, i) => (i * 131 + seed * 17 + (i >> 8)) & 0xff) as Uint8Array<ArrayBuffer>;

async function rejection(promise: Promise<unknown>): Promise<ClientError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ClientError);
  return error as ClientError;
}

/** A loopback server answering every request with `handler`. */
async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void) {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    close: () => {
      // A server that never answers still holds its clients' sockets.
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const rawPut = (uuid: string, token: string, offset: number, chunk: Uint8Array<ArrayBuffer>) =>
  fetch(`${storage.url}/fileupload/${uuid}`, {
    method: 'PUT',
    headers: {
      cryptifytoken: token,
      'content-range': `bytes ${offset}-${offset + chunk.length}/*`,
      'content-type': 'application/octet-stream',
    },
    body: chunk,
  });

describe('limits', () => {
  it("reads the service's limits (GET /limits, no credentials)", async () => {
    const { storageClient, sent } = client({ headers: { 'x-gateway': 'g' } });
    expect(await storageClient.limits(undefined)).toEqual({
      perUploadLimitBytes: 123_456,
      rollingLimitBytes: 1_000_000,
      windowDays: 7,
    });
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ method: 'GET', url: `${storage.url}/limits` });
    expect(sent[0]!.headers['authorization']).toBeUndefined();
    expect(sent[0]!.headers['x-gateway']).toBe('g');
  });

  it('an older service without /limits (404) means no limits known, asked once', async () => {
    let asked = 0;
    const old = await serve((_req, res) => {
      asked++;
      res.writeHead(404, { 'content-type': 'text/html' }).end('<h1>404: Not Found</h1>');
    });
    try {
      const { storageClient } = client({ storageUrl: old.url });
      expect(await storageClient.limits(undefined)).toBeUndefined();
      expect(asked).toBe(1);
    } finally {
      await old.close();
    }
  });

  it('a malformed answer is STORAGE_BAD_RESPONSE; a failing service is retried, then STORAGE_UNAVAILABLE', async () => {
    const bodies = [
      '{"per_upload_limit_bytes": "5GB", "rolling_limit_bytes": 1, "window_days": 14}',
      '{"per_upload_limit_bytes": -1, "rolling_limit_bytes": 1, "window_days": 14}',
      '{"rolling_limit_bytes": 1, "window_days": 14}',
      '[]',
      'not json',
      ' '.repeat(200_000),
    ];
    for (const body of bodies) {
      const odd = await serve((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(body));
      try {
        const e = await rejection(client({ storageUrl: odd.url }).storageClient.limits(undefined));
        expect(e.code, body.slice(0, 40)).toBe(ClientErrorCode.STORAGE_BAD_RESPONSE);
      } finally {
        await odd.close();
      }
    }
    let asked = 0;
    const down = await serve((_req, res) => {
      asked++;
      res.writeHead(503).end();
    });
    try {
      const e = await rejection(
        client({ storageUrl: down.url, retry: { maxAttempts: 3, initialDelayMs: 1 } }).storageClient.limits(undefined),
      );
      expect(e.code).toBe(ClientErrorCode.STORAGE_UNAVAILABLE);
      expect(e.status).toBe(503);
      expect(asked).toBe(3);
    } finally {
      await down.close();
    }
  });

  it('checkLimits refuses a ciphertext over either limit, naming both figures; without limits it passes', () => {
    const limits = { perUploadLimitBytes: 1000, rollingLimitBytes: 800, windowDays: 14 };
    expect(() => checkLimits(800, limits)).not.toThrow();
    expect(() => checkLimits(10 ** 12, undefined)).not.toThrow();
    const perUpload = (() => {
      try {
        checkLimits(1001, { ...limits, rollingLimitBytes: 5000 });
      } catch (e) {
        return e as ClientError;
      }
    })();
    expect(perUpload?.code).toBe(ClientErrorCode.UPLOAD_TOO_LARGE);
    expect(perUpload?.message).toMatch(/1001 bytes.*per-upload limit of 1000 bytes/);
    expect(() => checkLimits(801, limits)).toThrow(/801 bytes.*over 14 days of 800 bytes/);
  });
});

describe('init', () => {
  it('gives the session the recovery token, the challenge and the largest chunk the service takes', async () => {
    const { storageClient } = client();
    const session = await storageClient.init(INIT, undefined);
    expect(session.uuid).toMatch(/^[0-9a-f-]{36}$/);
    expect(session.token).toMatch(/^[0-9a-f]{64}$/);
    expect(session.recoveryToken).toMatch(/^[0-9a-f]{64}$/);
    expect(session.challenge).toHaveLength(32);
    expect(session.maxChunkSize).toBe(MAX_CHUNK);
    expect(chunkSizeFor(1_000_000, session)).toBe(MAX_CHUNK);
    expect(chunkSizeFor(1000, session)).toBe(1000);
    expect(chunkSizeFor(1000, { uuid: session.uuid, token: session.token })).toBe(1000);
  });

  it('an older init answer (uuid only) still starts an upload; a malformed extra field is STORAGE_BAD_RESPONSE', async () => {
    const uuid = '0a1b2c3d-0000-4000-8000-000000000000';
    const answers: Array<[Record<string, unknown>, string | undefined]> = [
      [{ uuid }, undefined],
      [{ uuid, recovery_token: 'bad token with spaces' }, ClientErrorCode.STORAGE_BAD_RESPONSE],
      [{ uuid, max_chunk_size_bytes: 0 }, ClientErrorCode.STORAGE_BAD_RESPONSE],
      [{ uuid, max_chunk_size_bytes: '5000000' }, ClientErrorCode.STORAGE_BAD_RESPONSE],
      [{ uuid: '../../etc/passwd' }, ClientErrorCode.STORAGE_BAD_RESPONSE],
    ];
    for (const [body, code] of answers) {
      const odd = await serve((_req, res) =>
        res
          .writeHead(200, { 'content-type': 'application/json', cryptifytoken: 'a'.repeat(64) })
          .end(JSON.stringify(body)),
      );
      try {
        const run = client({ storageUrl: odd.url }).storageClient.init(INIT, undefined);
        if (code === undefined) expect(await run).toEqual({ uuid, token: 'a'.repeat(64) });
        else expect((await rejection(run)).code, JSON.stringify(body)).toBe(code);
      } finally {
        await odd.close();
      }
    }
  });
});

describe('X-Cryptify-Source', () => {
  it('goes with every storage request, and is checked in the configuration', async () => {
    const { storageClient, sent } = client({ cryptifySource: 'thunderbird' });
    await storageClient.limits(undefined);
    const session = await storageClient.init(INIT, undefined);
    session.token = await storageClient.putChunk(session, 0, bytes(10), undefined);
    await storageClient.status(session.uuid, session.recoveryToken!, undefined);
    expect(sent.map((s) => s.headers['x-cryptify-source'])).toEqual([
      'thunderbird',
      'thunderbird',
      'thunderbird',
      'thunderbird',
    ]);
    expect(client().storageClient).toBeInstanceOf(StorageClient);
    for (const bad of ['', ' padded', 'line\nbreak', 'é', 'x'.repeat(257), 42]) {
      expect(() => client({ cryptifySource: bad as string }), JSON.stringify(bad)).toThrow(/^cryptifySource: /);
    }
  });
});

describe('status', () => {
  it('before and after chunks: the offset, the current token, and the last chunk (its start and token)', async () => {
    const { storageClient } = client();
    const session = await storageClient.init(INIT, undefined);
    const recovery = session.recoveryToken!;
    expect(await storageClient.status(session.uuid, recovery, undefined)).toEqual({
      uploaded: 0,
      token: session.token,
    });
    const first = session.token;
    session.token = await storageClient.putChunk(session, 0, bytes(1000), undefined);
    const second = session.token;
    session.token = await storageClient.putChunk(session, 1000, bytes(500, 2), undefined);
    expect(await storageClient.status(session.uuid, recovery, undefined)).toEqual({
      uploaded: 1500,
      token: session.token,
      prevToken: second,
      prevOffset: 1000,
    });
    expect(second).not.toBe(first);
  });

  it('a wrong recovery token and an unknown upload are both UPLOAD_EXPIRED; ids and tokens that cannot be are INVALID_INPUT, unsent', async () => {
    const { storageClient, sent } = client();
    const session = await storageClient.init(INIT, undefined);
    const wrong = await rejection(storageClient.status(session.uuid, 'f'.repeat(64), undefined));
    expect(wrong.code).toBe(ClientErrorCode.UPLOAD_EXPIRED);
    expect(wrong.uuid).toBe(session.uuid);
    const unknown = await rejection(
      storageClient.status('00000000-0000-4000-8000-00000000abcd', session.recoveryToken!, undefined),
    );
    expect(unknown.code).toBe(ClientErrorCode.UPLOAD_EXPIRED);
    const before = sent.length;
    for (const [uuid, token] of [
      ['../limits', session.recoveryToken!],
      [`${session.uuid}/../x`, session.recoveryToken!],
      [session.uuid, ''],
      [session.uuid, 'two\r\nlines'],
    ]) {
      expect((await rejection(storageClient.status(uuid!, token!, undefined))).code).toBe(
        ClientErrorCode.INVALID_INPUT,
      );
    }
    expect(sent.length).toBe(before);
  });

  it('an answer that does not add up is STORAGE_BAD_RESPONSE', async () => {
    const uuid = '0a1b2c3d-0000-4000-8000-000000000000';
    const t = 'a'.repeat(64);
    for (const body of [
      { uploaded: -1, cryptify_token: t },
      { uploaded: 10, cryptify_token: 'with space' },
      { uploaded: 10, cryptify_token: t, prev_token: t },
      { uploaded: 10, cryptify_token: t, prev_token: t, prev_offset: 10 },
      { uploaded: 10.5, cryptify_token: t },
    ]) {
      const odd = await serve((_req, res) =>
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body)),
      );
      try {
        const e = await rejection(client({ storageUrl: odd.url }).storageClient.status(uuid, t, undefined));
        expect(e.code, JSON.stringify(body)).toBe(ClientErrorCode.STORAGE_BAD_RESPONSE);
      } finally {
        await odd.close();
      }
    }
  });
});

describe('chunks', () => {
  it("a chunk of exactly the service's maximum is stored; one byte more is refused before it is sent", async () => {
    const { storageClient, sent } = client();
    const session = await storageClient.init(INIT, undefined);
    session.token = await storageClient.putChunk(session, 0, bytes(MAX_CHUNK), undefined);
    const before = sent.length;
    const e = await rejection(storageClient.putChunk(session, MAX_CHUNK, bytes(MAX_CHUNK + 1), undefined));
    expect(e.code).toBe(ClientErrorCode.INVALID_INPUT);
    expect((await rejection(storageClient.putChunk(session, MAX_CHUNK, bytes(0), undefined))).code).toBe(
      ClientErrorCode.INVALID_INPUT,
    );
    expect(sent.length).toBe(before);
    // The service agrees: one byte over its maximum is a 400.
    const over = await rawPut(session.uuid, session.token, MAX_CHUNK, bytes(MAX_CHUNK + 1));
    expect(over.status).toBe(400);
    expect((await storage.upload(session.uuid))?.session?.uploaded).toBe(MAX_CHUNK);
  });

  it("after a lost answer the retry must carry the chunk's own token: the service's new one and the one before are refused", async () => {
    const { storageClient, sent } = client({ retry: { maxAttempts: 1 } });
    const session = await storageClient.init(INIT, undefined);
    const t0 = session.token;
    session.token = await storageClient.putChunk(session, 0, bytes(1000), undefined);
    const t1 = session.token;
    // Chunk 2 is committed, and its answer lost.
    await storage.failChunks({ times: 1, reset: true, afterCommit: true });
    const lost = await rejection(storageClient.putChunk(session, 1000, bytes(700, 3), undefined));
    expect(lost.code).toBe(ClientErrorCode.STORAGE_UNAVAILABLE);
    expect(lost.uploadedBytes).toBe(1000);
    const status = await storageClient.status(session.uuid, session.recoveryToken!, undefined);
    expect(status).toMatchObject({ uploaded: 1700, prevToken: t1, prevOffset: 1000 });
    const t2 = status.token;

    // What pg-js 2.x resends from its second attempt (the token before), and the service's current token: both 400.
    for (const token of [t0, t2]) {
      const refused = await rawPut(session.uuid, token, 1000, bytes(700, 3));
      expect(refused.status, token === t0 ? 'previous chunk token' : 'current token').toBe(400);
    }
    // The same bytes with another token than the chunk's, or other bytes with its token: 400 too.
    expect((await rawPut(session.uuid, t1, 1000, bytes(700, 4))).status).toBe(400);

    // Ours: the token the chunk was sent with, on the same offset. Answered with the token after it, nothing written twice.
    expect(await storageClient.putChunk({ uuid: session.uuid, token: t1 }, 1000, bytes(700, 3), undefined)).toBe(t2);
    expect(await storage.upload(session.uuid)).toMatchObject({ session: { uploaded: 1700 }, fileBytes: 1700 });
    const puts = sent.filter((s) => s.method === 'PUT').map((s) => s.headers['cryptifytoken']);
    expect(puts).toEqual([t0, t1, t1]);
  });

  it('within one putChunk, every retry sends the same token and range, after a failure before or after the commit', async () => {
    const { storageClient, sent } = client({ retry: { maxAttempts: 4, initialDelayMs: 1, maxDelayMs: 2 } });
    const session = await storageClient.init(INIT, undefined);
    session.token = await storageClient.putChunk(session, 0, bytes(100), undefined);
    for (const [fault, offset] of [
      [{ times: 2, status: 503 }, 100],
      // A replay is answered before the after-commit fault, so it strikes once per chunk.
      [{ times: 1, reset: true, afterCommit: true }, 300],
      [{ times: 1, status: 502, afterCommit: true }, 500],
    ] as const) {
      await storage.failChunks(fault);
      const from = sent.length;
      const token = session.token;
      session.token = await storageClient.putChunk(session, offset, bytes(200, offset), undefined);
      const attempts = sent.slice(from);
      expect(attempts.length, JSON.stringify(fault)).toBe(fault.times + 1);
      for (const attempt of attempts) {
        expect(attempt.headers['cryptifytoken']).toBe(token);
        expect(attempt.headers['content-range']).toBe(`bytes ${offset}-${offset + 200}/*`);
      }
    }
    expect(await storage.upload(session.uuid)).toMatchObject({ session: { uploaded: 700 }, fileBytes: 700 });
  });

  it('a chunk the service never answers ends at the deadline (retried), or at once on abort', async () => {
    const silent = await serve(() => undefined);
    try {
      const session = { uuid: '00000000-0000-4000-8000-000000000000', token: 'a'.repeat(64) };
      const { storageClient } = client({
        storageUrl: silent.url,
        timeouts: { storageMs: 200 },
        retry: { maxAttempts: 2, initialDelayMs: 1 },
      });
      const started = Date.now();
      const late = await rejection(storageClient.putChunk(session, 0, bytes(100), undefined));
      expect(late.code).toBe(ClientErrorCode.STORAGE_UNAVAILABLE);
      expect(late.message).toMatch(/did not answer in time \(2 attempts\)/);
      expect(Date.now() - started).toBeLessThan(5000);
      const controller = new AbortController();
      setTimeout(() => controller.abort(), 50);
      const { storageClient: patient } = client({ storageUrl: silent.url, timeouts: { storageMs: 60_000 } });
      const stopped = await rejection(patient.putChunk(session, 0, bytes(100), controller.signal));
      expect(stopped.code).toBe(ClientErrorCode.ABORTED);
    } finally {
      await silent.close();
    }
  });
});

describe('finalize', () => {
  it('is refused with its typed error when the token is not the current one (a finalize is never retried)', async () => {
    const { storageClient, sent } = client();
    const session: UploadSession = await storageClient.init(INIT, undefined);
    session.token = await storageClient.putChunk(session, 0, bytes(100), undefined);
    const e = await rejection(storageClient.finalize({ ...session, token: 'b'.repeat(64) }, 100, undefined));
    expect(e.code).toBe(ClientErrorCode.STORAGE_REJECTED);
    expect(e.status).toBe(400);
    expect(sent.filter((s) => s.url.includes('/finalize/'))).toHaveLength(1);
  });
});
