import { readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { ByteSource } from '../lib/net/sources.js';
import { startStorage, type RunningStorage } from '../devtools/storage/testing.js';
import { expectSameBytes } from '../test/bytes.js';
import { resolveConfig, type FetchLike, type PostGuardConfig } from './config.js';
import { ClientError, ClientErrorCode } from './errors.js';
import { chunkSizeFor } from './limits.js';
import { StorageClient, type UploadSession } from './storage.js';
import { fakePkgKeys, sealAs } from './testing.js';
import { resumeSession, uploadCiphertext, type UploadCiphertextOptions } from './upload.js';

/**
 * uploadCiphertext and resumeSession against the storage stand-in on loopback: real ciphertexts
 * (the stand-in reads the sender at finalize), real faults (before and after a chunk's commit,
 * hanging chunks), and the stored file read from the stand-in's data directory and compared byte
 * for byte with the source.
 */

const MAX_CHUNK = 4096;

let storage: RunningStorage;
/** Ciphertexts of a few sizes, sealed once. */
let files: Uint8Array<ArrayBuffer>[];
/** A ciphertext whose size is 2 · EXACT_CHUNK or 3 · EXACT_CHUNK. */
let exact: { bytes: Uint8Array<ArrayBuffer>; chunk: number };

const pattern = (n: number, seed: number) => new Uint8Array(n).map((_, i) => (i * 31 + seed * 7 + (i >> 9)) & 0xff);

beforeAll(async () => {
  storage = await startStorage({ verifyingKey: fakePkgKeys().vk, chunkSize: MAX_CHUNK });
  files = [];
  for (const [i, n] of [0, 1, 700, 3000, 9000].entries()) files.push(await sealAs('alice@example.org', pattern(n, i)));
  for (let n = 4000; exact === undefined; n++) {
    const bytes = await sealAs('alice@example.org', pattern(n, 9));
    const parts = [2, 3].find((k) => bytes.length % k === 0 && bytes.length / k <= MAX_CHUNK);
    if (parts !== undefined) exact = { bytes, chunk: bytes.length / parts };
  }
});
afterAll(() => storage.close());
beforeEach(async () => {
  await fetch(`${storage.url}/standin/faults`, { method: 'DELETE' });
});

interface Put {
  offset: number;
  length: number;
  token: string;
}

/** A storage client whose requests are recorded, then sent for real. */
function client(
  config: Partial<PostGuardConfig> = {},
  redirect?: (url: string, init: RequestInit) => string | undefined,
) {
  const puts: Put[] = [];
  const urls: string[] = [];
  const spy: FetchLike = (url, init) => {
    urls.push(`${init.method ?? 'GET'} ${url}`);
    const headers = new Headers(init.headers);
    if (init.method === 'PUT') {
      const [, start, end] = /^bytes (\d+)-(\d+)\/\*$/.exec(headers.get('content-range')!)!;
      puts.push({ offset: Number(start), length: Number(end) - Number(start), token: headers.get('cryptifytoken')! });
    }
    return fetch(redirect?.(url, init) ?? url, init);
  };
  const storageClient = new StorageClient(
    resolveConfig({
      pkgUrl: 'http://127.0.0.1:9',
      storageUrl: storage.url,
      allowInsecureUrls: true,
      retry: { maxAttempts: 3, initialDelayMs: 1, maxDelayMs: 5 },
      fetch: spy,
      ...config,
    }),
  );
  return { storageClient, puts, urls };
}

const INIT = {
  recipients: ['bob@example.org'],
  notifyRecipients: false,
  confirm: false,
  message: '',
  language: 'EN',
  apiKey: undefined,
} as const;

/** A source over bytes in memory that counts its reads; `fail` may replace a read's outcome. */
function memorySource(bytes: Uint8Array, fail?: (offset: number) => Promise<Uint8Array> | undefined) {
  const reads: number[] = [];
  const source: ByteSource = {
    size: bytes.length,
    read: (offset, length) => {
      reads.push(offset);
      return fail?.(offset) ?? Promise.resolve(bytes.slice(offset, offset + length));
    },
  };
  return { source, reads };
}

const stored = (uuid: string) => readFile(join(storage.dataDir, uuid));

type Fault = Parameters<RunningStorage['failChunks']>[0];

/**
 * Arms `fault` for the chunk at `offset`: at once for offset 0, else from onCommitted when the
 * upload gets there (it is awaited before the next chunk is sent). Once only, across clients.
 */
function faultAt(fault: Fault, offset: number) {
  let armed = false;
  const arm = async (uploaded: number) => {
    if (armed || uploaded !== offset) return;
    armed = true;
    await storage.failChunks(fault);
  };
  return { before: () => arm(0), onCommitted: ({ uploaded }: { uploaded: number }) => arm(uploaded) };
}

/** A loopback server that takes requests and never answers them. */
async function silentServer() {
  const server = createServer(() => undefined);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function rejection(promise: Promise<unknown>): Promise<ClientError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ClientError);
  return error as ClientError;
}

/** Uploads `bytes` whole through a fresh session; what was sent, reported and stored. */
async function uploadAll(
  bytes: Uint8Array<ArrayBuffer>,
  configured: number,
  extra: Partial<UploadCiphertextOptions> = {},
) {
  const { storageClient, puts } = client();
  const session = await storageClient.init(INIT, undefined);
  const progress: Array<[number, number]> = [];
  const committed: Array<{ uploaded: number; token: string }> = [];
  await uploadCiphertext({
    storage: storageClient,
    session,
    source: memorySource(bytes).source,
    chunkSize: chunkSizeFor(configured, session),
    onProgress: (n, total) => progress.push([n, total]),
    onCommitted: (state) => void committed.push(state),
    ...extra,
  });
  return { session, puts, progress, committed };
}

describe('uploadCiphertext', () => {
  it("sends every byte once in chunks of the service's maximum (below the configured size), then finalizes", async () => {
    const bytes = files[4]!;
    const { session, puts, progress, committed } = await uploadAll(bytes, 1_000_000);
    expect(puts.map((p) => p.length)).toEqual(
      Array.from({ length: Math.ceil(bytes.length / MAX_CHUNK) }, (_, i) =>
        Math.min(MAX_CHUNK, bytes.length - i * MAX_CHUNK),
      ),
    );
    expect(puts.map((p) => p.offset)).toEqual(puts.map((_, i) => i * MAX_CHUNK));
    // Progress: from the start to the total, never backwards; the journal sees every commit and its token.
    expect(progress[0]).toEqual([0, bytes.length]);
    expect(progress.at(-1)).toEqual([bytes.length, bytes.length]);
    expect(progress.every(([n], i) => i === 0 || n > progress[i - 1]![0])).toBe(true);
    expect(committed.map((c) => c.uploaded)).toEqual(progress.slice(1).map(([n]) => n));
    expect(committed.at(-1)!.token).toBe(session.token);
    expect(puts.slice(1).map((p) => p.token)).toEqual(committed.slice(0, -1).map((c) => c.token));
    expectSameBytes(new Uint8Array(await stored(session.uuid)), bytes, 'the stored file');
    expect(await storage.upload(session.uuid)).toMatchObject({ session: { uploaded: bytes.length, finalized: 1 } });
  });

  it('a configured chunk size below the maximum is used as it is', async () => {
    const { puts } = await uploadAll(files[3]!, 1000);
    expect(puts.slice(0, -1).every((p) => p.length === 1000)).toBe(true);
    expect(puts.at(-1)!.length).toBe(files[3]!.length - (puts.length - 1) * 1000);
  });

  it('a ciphertext that is an exact multiple of the chunk size ends on a full chunk, never an empty one', async () => {
    const { session, puts } = await uploadAll(exact.bytes, exact.chunk);
    expect(puts.map((p) => p.length)).toEqual(Array(exact.bytes.length / exact.chunk).fill(exact.chunk));
    expectSameBytes(new Uint8Array(await stored(session.uuid)), exact.bytes, 'the stored file');
  });

  it('reads one chunk ahead while a chunk is sent, no more', async () => {
    const { storageClient, puts } = client();
    const session = await storageClient.init(INIT, undefined);
    const { source, reads } = memorySource(files[4]!);
    const readsAtPut: number[] = [];
    await uploadCiphertext({
      storage: storageClient,
      session,
      source,
      chunkSize: 1000,
      onCommitted: () => void readsAtPut.push(reads.length - puts.length),
    });
    // After each commit: the chunk just sent is done, and at most the next one has been read.
    expect(readsAtPut.every((ahead) => ahead <= 1)).toBe(true);
    expect(readsAtPut.slice(0, -1).every((ahead) => ahead === 1)).toBe(true);
    expect(reads).toEqual(puts.map((p) => p.offset));
  });

  it('retries a chunk that failed before its commit and one whose answer was lost, each with its own token', async () => {
    for (const fault of [
      { times: 2, status: 503 },
      { times: 1, reset: true, afterCommit: true },
    ]) {
      const bytes = files[4]!;
      const { session, puts } = await uploadAll(bytes, MAX_CHUNK, {
        onCommitted: faultAt(fault, 2 * MAX_CHUNK).onCommitted,
      });
      const atFault = puts.filter((p) => p.offset === 2 * MAX_CHUNK);
      expect(atFault.length, JSON.stringify(fault)).toBe(fault.times + 1);
      expect(new Set(atFault.map((p) => p.token)).size).toBe(1);
      expectSameBytes(new Uint8Array(await stored(session.uuid)), bytes, 'the stored file');
      expect((await storage.upload(session.uuid))?.session?.finalized).toBe(1);
    }
  });

  it('413 is UPLOAD_TOO_LARGE with how far it got; nothing is finalized', async () => {
    const small = await startStorage({ verifyingKey: fakePkgKeys().vk, chunkSize: MAX_CHUNK, perUploadLimit: 6000 });
    try {
      const { storageClient, urls } = client({ storageUrl: small.url });
      const session = await storageClient.init(INIT, undefined);
      const e = await rejection(
        uploadCiphertext({
          storage: storageClient,
          session,
          source: memorySource(files[4]!).source,
          chunkSize: MAX_CHUNK,
        }),
      );
      expect(e.code).toBe(ClientErrorCode.UPLOAD_TOO_LARGE);
      expect(files[4]!.length).toBeGreaterThan(2 * MAX_CHUNK);
      expect(e).toMatchObject({ status: 413, uuid: session.uuid, uploadedBytes: MAX_CHUNK });
      expect(urls.some((u) => u.includes('/finalize/'))).toBe(false);
    } finally {
      await small.close();
    }
  });

  it('an abort between chunks is ABORTED with how far it got; no more chunks, no finalize', async () => {
    const { storageClient, urls } = client();
    const session = await storageClient.init(INIT, undefined);
    const controller = new AbortController();
    const e = await rejection(
      uploadCiphertext({
        storage: storageClient,
        session,
        source: memorySource(files[4]!).source,
        chunkSize: 1000,
        signal: controller.signal,
        onCommitted: ({ uploaded }) => {
          if (uploaded === 2000) controller.abort();
        },
      }),
    );
    expect(e).toMatchObject({ code: ClientErrorCode.ABORTED, uuid: session.uuid, uploadedBytes: 2000 });
    expect(urls.filter((u) => u.startsWith('PUT'))).toHaveLength(2);
    expect(await storage.upload(session.uuid)).toMatchObject({ session: { uploaded: 2000, finalized: 0 } });
  });

  it('an abort while a chunk goes unanswered ends the upload at once', async () => {
    const silent = await silentServer();
    try {
      // From the second chunk on, the PUTs go to a server that never answers.
      const { storageClient } = client({ timeouts: { storageMs: 60_000 } }, (url, init) =>
        init.method === 'PUT' && !new Headers(init.headers).get('content-range')!.startsWith('bytes 0-')
          ? url.replace(storage.url, silent.url)
          : undefined,
      );
      const session = await storageClient.init(INIT, undefined);
      const controller = new AbortController();
      const run = uploadCiphertext({
        storage: storageClient,
        session,
        source: memorySource(files[4]!).source,
        chunkSize: 1000,
        signal: controller.signal,
        onCommitted: () => void setTimeout(() => controller.abort(), 100),
      });
      const started = Date.now();
      const e = await rejection(run);
      expect(e).toMatchObject({ code: ClientErrorCode.ABORTED, uuid: session.uuid, uploadedBytes: 1000 });
      expect(Date.now() - started).toBeLessThan(5000);
    } finally {
      await silent.close();
    }
  });

  it('a source that fails, gives other bytes, or stalls is INPUT_FAILED; nothing is finalized', async () => {
    const bytes = files[4]!;
    const sources: Array<[string, (offset: number) => Promise<Uint8Array> | undefined]> = [
      ['throws', (o) => (o === 2000 ? Promise.reject(new Error('disk on fire')) : undefined)],
      ['short', (o) => (o === 2000 ? Promise.resolve(bytes.slice(o, o + 10)) : undefined)],
      ['not bytes', (o) => (o === 2000 ? Promise.resolve('text' as unknown as Uint8Array) : undefined)],
      ['stalls', (o) => (o === 2000 ? new Promise<Uint8Array>(() => undefined) : undefined)],
    ];
    for (const [what, fail] of sources) {
      const { storageClient, urls } = client();
      const session = await storageClient.init(INIT, undefined);
      const e = await rejection(
        uploadCiphertext({
          storage: storageClient,
          session,
          source: memorySource(bytes, fail).source,
          chunkSize: 1000,
          stallMs: 200,
        }),
      );
      expect(e.code, what).toBe(ClientErrorCode.INPUT_FAILED);
      expect(e).toMatchObject({ uuid: session.uuid, uploadedBytes: 2000 });
      if (what === 'throws') expect(e.message).toMatch(/disk on fire/);
      expect(urls.some((u) => u.includes('/finalize/'))).toBe(false);
    }
  });

  it('options that cannot work are INVALID_INPUT, before any request', async () => {
    const { storageClient, urls } = client();
    const session: UploadSession = {
      uuid: '00000000-0000-4000-8000-000000000000',
      token: 'a'.repeat(64),
      maxChunkSize: 100,
    };
    const source = memorySource(files[2]!).source;
    const base = { storage: storageClient, session, source, chunkSize: 100 };
    for (const [what, options] of [
      ['chunk over the maximum', { ...base, chunkSize: 101 }],
      ['zero chunk', { ...base, chunkSize: 0 }],
      ['from past the end', { ...base, from: source.size + 1 }],
      ['negative from', { ...base, from: -1 }],
      ['empty source', { ...base, source: memorySource(new Uint8Array(0)).source }],
      ['no read', { ...base, source: { size: 3 } }],
      ['odd uuid', { ...base, session: { ...session, uuid: '../limits' } }],
      ['odd token', { ...base, session: { ...session, token: 'a\r\nb' } }],
      ['progress not a function', { ...base, onProgress: 5 }],
      ['no storage client', { ...base, storage: {} }],
      ['stall', { ...base, stallMs: -1 }],
    ] as const) {
      const e = await rejection(uploadCiphertext(options as unknown as UploadCiphertextOptions));
      expect(e.code, what).toBe(ClientErrorCode.INVALID_INPUT);
    }
    expect(urls).toEqual([]);
  });
});

describe('resumeSession', () => {
  /** Starts an upload of `bytes` and stops it (an abort: the page is gone) once `stopAt` bytes are committed. */
  async function crashAt(bytes: Uint8Array<ArrayBuffer>, chunkSize: number, stopAt: number) {
    const { storageClient } = client();
    const session = await storageClient.init(INIT, undefined);
    const journal = { uuid: session.uuid, recoveryToken: session.recoveryToken!, uploaded: 0 };
    const controller = new AbortController();
    const e = await rejection(
      uploadCiphertext({
        storage: storageClient,
        session,
        source: memorySource(bytes).source,
        chunkSize,
        signal: controller.signal,
        onCommitted: ({ uploaded }) => {
          journal.uploaded = uploaded;
          if (uploaded >= stopAt) controller.abort();
        },
      }),
    );
    expect(e.code).toBe(ClientErrorCode.ABORTED);
    return journal;
  }

  it('continues a dropped upload from the service’s offset with a new client; the stored file is the source', async () => {
    const bytes = files[4]!;
    const journal = await crashAt(bytes, 1000, bytes.length / 2);
    const { storageClient, puts } = client();
    const { session, uploaded } = await resumeSession(storageClient, journal.uuid, journal.recoveryToken, undefined, {
      source: memorySource(bytes).source,
      maxChunkSize: MAX_CHUNK,
    });
    expect(uploaded).toBe(journal.uploaded);
    expect(session).toMatchObject({
      uuid: journal.uuid,
      recoveryToken: journal.recoveryToken,
      maxChunkSize: MAX_CHUNK,
    });
    const progress: number[] = [];
    await uploadCiphertext({
      storage: storageClient,
      session,
      source: memorySource(bytes).source,
      from: uploaded,
      chunkSize: chunkSizeFor(1_000_000, session),
      onProgress: (n) => progress.push(n),
    });
    // The check of the last chunk (1000 bytes before the offset), then only what the service lacked.
    expect(puts[0]).toMatchObject({ offset: uploaded - 1000, length: 1000 });
    expect(puts.slice(1).map((p) => p.offset)).toEqual(puts.slice(1).map((_, i) => uploaded + i * MAX_CHUNK));
    expect(progress[0]).toBe(uploaded);
    expect(progress.at(-1)).toBe(bytes.length);
    expectSameBytes(new Uint8Array(await stored(journal.uuid)), bytes, 'the stored file');
    expect((await storage.upload(journal.uuid))?.session?.finalized).toBe(1);
  });

  it('when the last chunk was committed and its answer lost, the service is a chunk ahead of the journal: resume from there', async () => {
    const bytes = files[4]!;
    const { storageClient } = client({ retry: { maxAttempts: 1 } });
    const session = await storageClient.init(INIT, undefined);
    let journal = 0;
    const lost = faultAt({ times: 1, reset: true, afterCommit: true }, 2000);
    const e = await rejection(
      uploadCiphertext({
        storage: storageClient,
        session,
        source: memorySource(bytes).source,
        chunkSize: 1000,
        onCommitted: async (state) => {
          journal = state.uploaded;
          await lost.onCommitted(state);
        },
      }),
    );
    expect(e).toMatchObject({ code: ClientErrorCode.STORAGE_UNAVAILABLE, uploadedBytes: 2000 });
    expect(journal).toBe(2000);

    // Another sealing's bytes (or a journal pointing at the wrong file): refused before anything is appended.
    const other = new Uint8Array(bytes);
    other[2500] = other[2500]! ^ 1;
    const wrong = await rejection(
      resumeSession(client().storageClient, session.uuid, session.recoveryToken!, undefined, {
        source: memorySource(other).source,
      }),
    );
    expect(wrong).toMatchObject({ code: ClientErrorCode.INVALID_INPUT, uuid: session.uuid, uploadedBytes: 3000 });
    const short = await rejection(
      resumeSession(client().storageClient, session.uuid, session.recoveryToken!, undefined, {
        source: memorySource(bytes.slice(0, 2999)).source,
      }),
    );
    expect(short.code).toBe(ClientErrorCode.INVALID_INPUT);
    expect(await storage.upload(session.uuid)).toMatchObject({ session: { uploaded: 3000 }, fileBytes: 3000 });

    const again = client();
    const resumed = await resumeSession(again.storageClient, session.uuid, session.recoveryToken!, undefined, {
      source: memorySource(bytes).source,
    });
    expect(resumed.uploaded).toBe(3000);
    await uploadCiphertext({
      storage: again.storageClient,
      session: resumed.session,
      source: memorySource(bytes).source,
      from: resumed.uploaded,
      chunkSize: 1000,
    });
    // The lost chunk is checked by its replay (its own token, its offset) and not stored again.
    expect(again.puts[0]).toMatchObject({ offset: 2000, length: 1000 });
    expect(again.puts[1]!.offset).toBe(3000);
    expectSameBytes(new Uint8Array(await stored(session.uuid)), bytes, 'the stored file');
    expect((await storage.upload(session.uuid))?.session?.finalized).toBe(1);
  });

  it('before any chunk: resumes from 0 with the init token; nothing to check', async () => {
    const { storageClient, puts } = client();
    const session = await storageClient.init(INIT, undefined);
    const resumed = await resumeSession(storageClient, session.uuid, session.recoveryToken!, undefined, {
      source: memorySource(files[2]!).source,
    });
    expect(resumed).toEqual({
      session: { uuid: session.uuid, token: session.token, recoveryToken: session.recoveryToken },
      uploaded: 0,
    });
    expect(puts).toEqual([]);
  });

  it('a wrong recovery token or a forgotten upload is UPLOAD_EXPIRED', async () => {
    const { storageClient } = client();
    const session = await storageClient.init(INIT, undefined);
    for (const [uuid, token] of [
      [session.uuid, 'e'.repeat(64)],
      ['00000000-0000-4000-8000-00000000beef', session.recoveryToken!],
    ]) {
      const e = await rejection(resumeSession(storageClient, uuid!, token!));
      expect(e).toMatchObject({ code: ClientErrorCode.UPLOAD_EXPIRED, status: 404, uuid });
    }
  });
});

describe('property: any size, chunk size, fault and crash point', () => {
  it('stores exactly the source and finalizes once', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 4 }),
        fc.integer({ min: 1, max: 20 }),
        fc.constantFrom('none', 'before', 'after'),
        fc.nat(),
        fc.option(fc.nat(), { nil: undefined }),
        async (which, parts, fault, faultChunk, crashAfter) => {
          await fetch(`${storage.url}/standin/faults`, { method: 'DELETE' });
          const bytes = files[which]!;
          const chunkSize = Math.min(MAX_CHUNK, Math.max(1, Math.ceil(bytes.length / parts)));
          const chunks = Math.ceil(bytes.length / chunkSize);
          const armed =
            fault === 'none'
              ? undefined
              : faultAt(
                  fault === 'before' ? { times: 1, status: 500 } : { times: 1, reset: true, afterCommit: true },
                  (faultChunk % chunks) * chunkSize,
                );
          await armed?.before();

          const first = client();
          const session = await first.storageClient.init(INIT, undefined);
          const controller = new AbortController();
          const stopAt = crashAfter === undefined ? Infinity : ((crashAfter % chunks) + 1) * chunkSize;
          const run = uploadCiphertext({
            storage: first.storageClient,
            session,
            source: memorySource(bytes).source,
            chunkSize,
            signal: controller.signal,
            onCommitted: async (state) => {
              await armed?.onCommitted(state);
              if (state.uploaded >= stopAt && state.uploaded < bytes.length) controller.abort();
            },
          });
          if (stopAt < bytes.length) {
            expect((await rejection(run)).code).toBe(ClientErrorCode.ABORTED);
            const second = client();
            const { session: resumed, uploaded } = await resumeSession(
              second.storageClient,
              session.uuid,
              session.recoveryToken!,
              undefined,
              { source: memorySource(bytes).source },
            );
            await uploadCiphertext({
              storage: second.storageClient,
              session: resumed,
              source: memorySource(bytes).source,
              from: uploaded,
              chunkSize,
              ...(armed === undefined ? {} : { onCommitted: armed.onCommitted }),
            });
          } else {
            await run;
          }
          expect(first.puts.every((p) => p.length > 0 && p.length <= chunkSize)).toBe(true);
          expectSameBytes(new Uint8Array(await stored(session.uuid)), bytes, 'the stored file');
          expect((await storage.upload(session.uuid))?.session).toEqual({ uploaded: bytes.length, finalized: 1 });
        },
      ),
      { numRuns: 25 },
    );
  });
});
