import { request } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { expectSameBytes } from '../../test/bytes.js';
import { startStorage, uploadWhole, type RunningStorage } from './testing.js';

/**
 * The stand-in's fault knobs over real sockets: a download cut after exactly N body bytes by a TCP
 * reset (what a browser test of download resume needs), and a chunk PUT that hangs from a chosen
 * offset (an upload stopped part-way, as a reloaded page leaves it) without blocking the upload's
 * status, and that lets go when the client leaves, the fault is cleared or the server closes.
 */

let storage: RunningStorage;
let file: Uint8Array<ArrayBuffer>;
let uuid: string;

beforeAll(async () => {
  storage = await startStorage({ chunkSize: 1 << 20 });
  file = new Uint8Array(300_000).map((_, i) => (i * 7) % 253);
  ({ uuid } = await uploadWhole(storage.url, file));
});
afterAll(() => storage.close());
afterEach(() => storage.clearFaults());

interface Received {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Uint8Array;
  /** Whether the body arrived whole (Content-Length bytes, then a clean end). */
  complete: boolean;
  /** The socket's own error, if any: `read ECONNRESET` is a TCP reset. */
  socketError: string | undefined;
}

/** One request on a fresh connection with node:http, recording what arrived before the connection ended. */
function download(method = 'GET', headers: Record<string, string> = {}): Promise<Received> {
  return new Promise((resolve, reject) => {
    const req = request(`${storage.url}/filedownload/${uuid}`, { method, headers, agent: false }, (res) => {
      const pieces: Buffer[] = [];
      res.on('data', (piece: Buffer) => pieces.push(piece));
      res.on('error', () => undefined);
      res.on('close', () =>
        resolve({
          status: res.statusCode!,
          headers: res.headers,
          body: new Uint8Array(Buffer.concat(pieces)),
          complete: res.complete,
          socketError,
        }),
      );
    });
    let socketError: string | undefined;
    let answered = false;
    req.on('response', () => (answered = true));
    req.on('socket', (socket) => socket.on('error', (e) => (socketError = e.message)));
    // After the answer began, the request reports the same socket error: it is recorded above.
    req.on('error', (e) => {
      if (!answered) reject(e);
    });
    req.setTimeout(30_000, () => req.destroy(new Error('no answer')));
    req.end();
  });
}

const faults = async () => (await fetch(`${storage.url}/standin/faults`)).json();

describe('POST /standin/faults/download', () => {
  it('resets the next download after exactly cutAfterBytes body bytes; the one after is whole', async () => {
    await storage.cutDownloads({ cutAfterBytes: 100_000 });
    expect(await faults()).toMatchObject({ download: { remaining: 1, cutAfterBytes: 100_000 } });
    const cut = await download();
    expect(cut.status).toBe(200);
    expect(cut.headers['content-length']).toBe('300000');
    expect(cut.complete).toBe(false);
    expect(cut.socketError).toBe('read ECONNRESET');
    expect(cut.body.length).toBe(100_000);
    expectSameBytes(cut.body, file.subarray(0, 100_000));

    const whole = await download();
    expect(whole.complete).toBe(true);
    expect(whole.socketError).toBeUndefined();
    expectSameBytes(whole.body, file);
    expect(await storage.downloadsCut()).toBe(1);
    expect(await faults()).toMatchObject({ download: null });
  });

  it('hold: after `skip` whole downloads, the next stops after cutAfterBytes and waits there until the fault is cleared', async () => {
    await storage.cutDownloads({ cutAfterBytes: 50_000, hold: true, skip: 1 });
    expect((await download()).complete).toBe(true);
    let ended = false;
    const held = download().finally(() => (ended = true));
    // Nothing more comes while held: the connection stays open.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(ended).toBe(false);
    await storage.clearFaults();
    const cut = await held;
    expect(cut.complete).toBe(false);
    expectSameBytes(cut.body, file.subarray(0, 50_000));
    expect((await download()).complete).toBe(true);
  });

  it('cuts ranged (206) downloads too, `times` of them, with the CORS headers of a real answer', async () => {
    await storage.cutDownloads({ cutAfterBytes: 1000, times: 2 });
    for (let i = 0; i < 2; i++) {
      const cut = await download('GET', { range: 'bytes=5000-', origin: 'https://app.example' });
      expect(cut.status).toBe(206);
      expect(cut.headers['content-range']).toBe('bytes 5000-299999/300000');
      expect(cut.headers['access-control-allow-origin']).toBe('https://app.example');
      expect(cut.socketError).toBe('read ECONNRESET');
      expectSameBytes(cut.body, file.subarray(5000, 6000));
    }
    const whole = await download('GET', { range: 'bytes=5000-' });
    expect(whole.complete).toBe(true);
    expectSameBytes(whole.body, file.subarray(5000));
  });

  it('cuts after a single byte, and sends a body no longer than the cut whole', async () => {
    await storage.cutDownloads({ cutAfterBytes: 1 });
    const one = await download();
    expect(one.status).toBe(200);
    expectSameBytes(one.body, file.subarray(0, 1));
    expect(one.socketError).toBe('read ECONNRESET');

    await storage.cutDownloads({ cutAfterBytes: 1000 });
    const short = await download('GET', { range: 'bytes=-1000' });
    expect(short.complete).toBe(true);
    expectSameBytes(short.body, file.subarray(299_000));
    // That download used the cut up.
    expect((await download()).complete).toBe(true);
  });

  it('is not used up by a HEAD, a 416 or a 404', async () => {
    await storage.cutDownloads({ cutAfterBytes: 10 });
    expect((await download('HEAD')).status).toBe(200);
    expect((await download('GET', { range: 'bytes=999999-' })).status).toBe(416);
    expect((await fetch(`${storage.url}/filedownload/nothing-here`)).status).toBe(404);
    const cut = await download();
    expect(cut.body.length).toBe(10);
    expect(cut.socketError).toBe('read ECONNRESET');
  });

  it('refuses a body without cutAfterBytes or with unknown fields (400), arming nothing', async () => {
    for (const body of [
      {},
      { cutAfterBytes: 0 },
      { cutAfterBytes: 1.5 },
      { cutAfterBytes: '5' },
      { cutAfterBytes: 5, times: 0 },
      { cutAfterBytes: 5, after: 1 },
    ]) {
      const response = await fetch(`${storage.url}/standin/faults/download`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(response.status, JSON.stringify(body)).toBe(400);
    }
    expect(await faults()).toMatchObject({ download: null });
  });
});

describe('a hanging chunk fault', () => {
  /** Inits an upload; `put` sends the chunk at `start` with the current token, aborted by `signal`. */
  async function begin() {
    const init = await fetch(`${storage.url}/fileupload/init`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ recipient: 'bob@example.org', mailContent: '', mailLang: 'EN', confirm: false }),
    });
    const { uuid: id, recovery_token: recovery } = (await init.json()) as { uuid: string; recovery_token: string };
    let token = init.headers.get('cryptifytoken')!;
    const put = async (start: number, signal?: AbortSignal) => {
      const response = await fetch(`${storage.url}/fileupload/${id}`, {
        method: 'PUT',
        headers: { cryptifytoken: token, 'content-range': `bytes ${start}-${start + 1000}/*` },
        body: file.subarray(start, start + 1000),
        signal: signal ?? AbortSignal.timeout(30_000),
      });
      if (response.status === 200) token = response.headers.get('cryptifytoken')!;
      return response.status;
    };
    return { id, recovery, put };
  }

  const pending = <T>(promise: Promise<T>, ms: number) =>
    Promise.race([promise.then(() => 'settled'), new Promise((resolve) => setTimeout(resolve, ms, 'pending'))]);

  it('holds chunks from fromOffset on, leaving the upload part-way with its status answered, until the client leaves', async () => {
    const { id, recovery, put } = await begin();
    await storage.failChunks({ always: true, hang: true, fromOffset: 2000 });
    expect(await put(0)).toBe(200);
    expect(await put(1000)).toBe(200);
    const gaveUp = new AbortController();
    const hung = put(2000, gaveUp.signal);
    expect(await pending(hung, 300)).toBe('pending');

    // What a test sees of an upload stopped at two thirds, while the chunk is held.
    expect(await storage.upload(id)).toEqual({ session: { uploaded: 2000, finalized: 0 }, fileBytes: 2000 });
    const status = await fetch(`${storage.url}/fileupload/${id}/status`, {
      headers: { 'x-recovery-token': recovery },
      signal: AbortSignal.timeout(5000),
    });
    expect(await status.json()).toMatchObject({ uploaded: 2000, prev_offset: 1000 });

    gaveUp.abort();
    await expect(hung).rejects.toThrow();
    expect(await storage.faultsTriggered()).toBeGreaterThanOrEqual(1);
    await storage.clearFaults();
    expect(await put(2000)).toBe(200);
    expect(await storage.upload(id)).toMatchObject({ session: { uploaded: 3000 } });
  });

  it('lets a held chunk go (connection dropped) when the faults are cleared', async () => {
    const { put } = await begin();
    await storage.failChunks({ times: 1, hang: true });
    const hung = put(0);
    expect(await pending(hung, 300)).toBe('pending');
    await storage.clearFaults();
    await expect(hung).rejects.toThrow();
    expect(await put(0)).toBe(200);
  });

  it('does not keep the server from closing', async () => {
    const own = await startStorage();
    const init = await fetch(`${own.url}/fileupload/init`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ recipient: 'bob@example.org', mailContent: '', mailLang: 'EN', confirm: false }),
    });
    const { uuid: id } = (await init.json()) as { uuid: string };
    await own.failChunks({ times: 1, hang: true });
    const hung = fetch(`${own.url}/fileupload/${id}`, {
      method: 'PUT',
      headers: { cryptifytoken: init.headers.get('cryptifytoken')!, 'content-range': 'bytes 0-10/*' },
      body: new Uint8Array(10),
    });
    expect(await pending(hung, 300)).toBe('pending');
    expect(await pending(own.close(), 5000)).toBe('settled');
    await expect(hung).rejects.toThrow();
  });

  it('refuses hang with afterCommit, or with status or reset (400)', async () => {
    for (const body of [
      { times: 1, hang: true, afterCommit: true },
      { times: 1, hang: true, status: 503 },
      { times: 1, hang: true, reset: true },
      { times: 1, fromOffset: -1 },
    ]) {
      const response = await fetch(`${storage.url}/standin/faults/chunk`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(response.status, JSON.stringify(body)).toBe(400);
    }
    expect(await faults()).toMatchObject({ chunk: null });
  });
});
