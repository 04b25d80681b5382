import { mkdtemp, readFile, readdir, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeZip } from 'client-zip';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startStorage, type RunningStorage } from '../devtools/storage/testing.js';
import { fileKeeper } from '../sdk/file-keeper.js';
import { expectSameBytes } from '../test/bytes.js';
import { readAll } from '../test/streams.js';
import { ClientError, PostGuard, type PostGuardOptions } from './index.js';
import { FAKE_JWT_PREFIX, readZip, startFakePkg, type FakePkg } from './testing.js';

/**
 * The client's receiving side and its resumes, end to end over loopback HTTP in Node: the fake PKG
 * (which issues a recipient's key for a `fake-jwt:<address>` session), the storage stand-in in
 * Cryptify's strict mode, uploads by API key, then `open({uuid})` → inspect → decrypt in every
 * output. The browser flows (Yivi in the page, the service worker, OPFS) run in e2e/.
 */

const CHUNK = 64 * 1024;
const BOB = 'bob@example.com';
const CAROL = 'carol@example.com';

let pkg: FakePkg;
let storage: RunningStorage;

beforeAll(async () => {
  pkg = await startFakePkg();
  storage = await startStorage({ verifyingKey: pkg.keys.vk, chunkSize: CHUNK, strict: true });
});
afterAll(async () => {
  await storage.close();
  await pkg.close();
});
beforeEach(async () => {
  await fetch(`${storage.url}/standin/faults`, { method: 'DELETE' });
});

const client = (options: Partial<PostGuardOptions> = {}) =>
  new PostGuard({
    pkgUrl: pkg.url,
    cryptifyUrl: storage.url,
    allowInsecureUrls: true,
    uploadChunkSize: CHUNK,
    retry: { initialDelayMs: 1, maxDelayMs: 5 },
    ...options,
  });

/** The fake PKG's session for `address`: what a Yivi disclosure of that address would give. */
const sessionFor = (address: string) => async () => `${FAKE_JWT_PREFIX}${address}`;

const bytes = (n: number, seed: number) => new Uint8Array(n).map((_, i) => (i * 31 + seed) & 255);
const files = [
  { name: 'a.txt', content: bytes(1000, 1) },
  { name: 'b.bin', content: bytes(700_000, 2) },
  { name: 'c.pdf', content: new Blob([bytes(300_000, 3)]) },
];

async function uploadBundle(pg = client()): Promise<string> {
  const { uuid } = await pg
    .encrypt({
      files,
      recipients: [pg.recipient.email(BOB), pg.recipient.email(CAROL)],
      sign: pg.sign.apiKey(pkg.apiKey),
    })
    .upload();
  return uuid;
}

describe('open({uuid}): inspect and decrypt', () => {
  let uuid: string;
  beforeAll(async () => {
    uuid = await uploadBundle();
  });

  it('inspect() reads the header only: the recipients and the sender, worded as a claim', async () => {
    const seen: string[] = [];
    const pg = client({
      fetch: (url, init) => {
        seen.push(`${init.method ?? 'GET'} ${new URL(url).pathname}`);
        return fetch(url, init);
      },
    });
    const info = await pg.open({ uuid }).inspect();
    expect(info.recipients.sort()).toEqual([BOB, CAROL]);
    expect(info.sender.standing).toBe('claimed');
    expect(JSON.stringify(info.sender)).toContain(pkg.sender);
    expect(seen.filter((s) => s.includes('/filedownload/'))).toHaveLength(1);
  });

  it("'bytes' and 'stream' give the exact bundle, the sender verified only after the last segment", async () => {
    const pg = client();
    const opened = pg.open({ uuid });
    const whole = await opened.decrypt({ recipient: BOB, session: sessionFor(BOB), output: 'bytes' });
    if (whole.output !== 'bytes') throw new Error('unexpected output');
    const zip = readZip(whole.plaintext);
    expectSameBytes(zip.get('b.bin')!, files[1]!.content as Uint8Array);
    expect(whole.sender.standing).toBe('verified');

    const streamed = await opened.decrypt({ recipient: CAROL, session: sessionFor(CAROL), output: 'stream' });
    if (streamed.output !== 'stream') throw new Error('unexpected output');
    expectSameBytes(await readAll(streamed.readable), whole.plaintext);
    expect((await streamed.sender).standing).toBe('verified');
  });

  it("'entries' lists the bundle and reads one file without the others", async () => {
    let served = 0;
    const pg = client({
      fetch: async (url, init) => {
        const response = await fetch(url, init);
        if (url.includes('/filedownload/')) served += Number(response.headers.get('content-length') ?? 0);
        return response;
      },
    });
    const result = await pg.open({ uuid }).decrypt({ recipient: BOB, session: sessionFor(BOB), output: 'entries' });
    if (result.output !== 'entries') throw new Error('unexpected output');
    expect(result.entries.map((e) => [e.name, e.size])).toEqual([
      ['a.txt', 1000],
      ['b.bin', 700_000],
      ['c.pdf', 300_000],
    ]);
    expect(result.sender.standing).toBe('claimed');
    served = 0;
    expectSameBytes(await readAll(result.entries[2]!.stream()), bytes(300_000, 3));
    // c.pdf and the segments around it, not b.bin's 700 000 bytes.
    expect(served).toBeLessThan(700_000);
  });

  it('a recipient the file does not name, or none among several, is RECIPIENT_UNKNOWN before any session', async () => {
    let sessions = 0;
    const session = async () => {
      sessions++;
      return `${FAKE_JWT_PREFIX}${BOB}`;
    };
    const opened = client().open({ uuid });
    await expect(opened.decrypt({ recipient: 'eve@example.com', session })).rejects.toMatchObject({
      code: 'RECIPIENT_UNKNOWN',
    });
    await expect(opened.decrypt({ session })).rejects.toMatchObject({ code: 'RECIPIENT_UNKNOWN' });
    expect(sessions).toBe(0);
  });

  it("a key for another identity is DECRYPTION_FAILED, the library's code kept as the cause", async () => {
    const error = await client()
      .open({ uuid })
      .decrypt({ recipient: BOB, session: sessionFor(CAROL), output: 'bytes' })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ClientError);
    expect(error).toMatchObject({ code: 'DECRYPTION_FAILED' });
    expect((error as ClientError).cause).toHaveProperty('code');
  });

  it('a download cut twice on the way completes with the exact bytes (Range from the byte reached)', async () => {
    const pg = client();
    const reference = await pg.open({ uuid }).decrypt({ recipient: BOB, session: sessionFor(BOB), output: 'bytes' });
    const ranges: string[] = [];
    const watched = client({
      fetch: (url, init) => {
        if (url.includes('/filedownload/')) ranges.push(new Headers(init.headers).get('range') ?? 'whole');
        return fetch(url, init);
      },
    });
    const opened = watched.open({ uuid });
    await opened.inspect();
    await fetch(`${storage.url}/standin/faults/download`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ cutAfterBytes: 400_000, times: 2 }),
    });
    const again = await opened.decrypt({ recipient: BOB, session: sessionFor(BOB), output: 'bytes' });
    // The header's read (inspect), the body cut at 400 000 bytes, resumed there and cut again 400 000 bytes on.
    expect(ranges).toEqual(['whole', 'whole', 'bytes=400000-', 'bytes=800000-']);
    if (reference.output !== 'bytes' || again.output !== 'bytes') throw new Error('unexpected output');
    expectSameBytes(again.plaintext, reference.plaintext);
  });

  it('a file the storage service does not have is DOWNLOAD_FAILED', async () => {
    await expect(client().open({ uuid: '00000000-0000-4000-8000-000000000000' }).inspect()).rejects.toMatchObject({
      code: 'DOWNLOAD_FAILED',
    });
  });
});

describe("'entries' lists what a saved bundle would hold", () => {
  it('an entry flagged as a folder that carries data is listed, not hidden; an empty folder is not', async () => {
    const zip = new Uint8Array(
      await new Response(
        makeZip([
          { name: 'visible.txt', input: bytes(100, 1) },
          { name: 'hidden.exe', input: bytes(200, 2) },
          { name: 'empty', input: new Uint8Array(0) },
        ]),
      ).arrayBuffer(),
    );
    // Flag the last two as folders (MS-DOS directory attribute) in the central directory.
    const dv = new DataView(zip.buffer);
    let flagged = 0;
    for (let at = 0; at + 46 <= zip.length; at++) {
      if (dv.getUint32(at, true) !== 0x02014b50) continue;
      const name = new TextDecoder().decode(zip.subarray(at + 46, at + 46 + dv.getUint16(at + 28, true)));
      if (name !== 'visible.txt') {
        dv.setUint32(at + 38, 0x10, true);
        flagged++;
      }
    }
    expect(flagged).toBe(2);
    const pg = client();
    const sealed = await pg
      .encrypt({ data: zip, recipients: [pg.recipient.email(BOB)], sign: pg.sign.apiKey(pkg.apiKey) })
      .toBytes();
    const result = await pg.open({ data: sealed }).decrypt({ session: sessionFor(BOB), output: 'entries' });
    expect(result.entries.map((e) => [e.path, e.size])).toEqual([
      ['visible.txt', 100],
      ['hidden.exe', 200],
    ]);
    expectSameBytes(new Uint8Array(await (await result.entries[1]!.blob()).arrayBuffer()), bytes(200, 2));
  });
});

describe('open({data}) and open({blob})', () => {
  it('open what toBytes() sealed, from memory and from a Blob', async () => {
    const pg = client();
    const sealed = await pg
      .encrypt({ data: bytes(5000, 9), recipients: [pg.recipient.email(BOB)], sign: pg.sign.apiKey(pkg.apiKey) })
      .toBytes();
    for (const input of [{ data: sealed }, { blob: new Blob([sealed as Uint8Array<ArrayBuffer>]) }]) {
      const result = await pg.open(input).decrypt({ session: sessionFor(BOB), output: 'bytes' });
      if (result.output !== 'bytes') throw new Error('unexpected output');
      expectSameBytes(result.plaintext, bytes(5000, 9));
    }
  });
});

describe('resume integrity: kept bytes that are not the sealed ones are refused before any request', () => {
  /** An upload stopped at 50 % into a folder keeper; the folder's files. */
  async function stopped(dir: string) {
    const stop = new AbortController();
    const pg = client({ keeper: fileKeeper(dir) });
    const error = await pg
      .encrypt({ files, recipients: [pg.recipient.email(BOB)], sign: pg.sign.apiKey(pkg.apiKey) })
      .upload({
        signal: stop.signal,
        onProgress: (uploaded, total) => {
          if (total !== undefined && uploaded >= total / 2) stop.abort();
        },
      })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'ABORTED' });
    const names = await readdir(dir);
    const bytes = join(
      dir,
      names.find((n) => n.endsWith('.pgenc'))!,
    );
    const record = join(
      dir,
      names.find((n) => n.endsWith('.json'))!,
    );
    return { bytes, record };
  }

  it.each([
    [
      'a byte changed after the service offset',
      async ({ bytes }: { bytes: string }) => {
        const kept = await readFile(bytes);
        kept[kept.length - 100]! ^= 1;
        await writeFile(bytes, kept);
      },
      'refused',
    ],
    [
      "truncated, with the record's size edited to match",
      async ({ bytes, record }: { bytes: string; record: string }) => {
        const size = (await readFile(bytes)).length - 5000;
        await truncate(bytes, size);
        const json = JSON.parse(await readFile(record, 'utf8')) as { size: number };
        await writeFile(record, JSON.stringify({ ...json, size }));
      },
      'unlisted',
    ],
  ] as const)('%s: refused or not listed, no request at all, and the upload is dropped', async (_, tamper, outcome) => {
    const dir = await mkdtemp(join(tmpdir(), 'pg-keeper-'));
    try {
      await tamper(await stopped(dir));
      const requests: string[] = [];
      const pg = client({
        keeper: fileKeeper(dir),
        fetch: (url, init) => {
          requests.push(`${init.method ?? 'GET'} ${new URL(url).pathname}`);
          return fetch(url, init);
        },
      });
      const [pending] = await pg.resumeUploads();
      if (outcome === 'refused') {
        expect(pending).toBeDefined();
        await expect(pending!.resume()).rejects.toMatchObject({ name: 'ClientError', code: 'KEPT_BYTES_CHANGED' });
      } else {
        // The record's recovery token is sealed bound to its size and digests: an edited record
        // does not open, so the upload is not even listed.
        expect(pending).toBeUndefined();
      }
      expect(requests).toEqual([]);
      expect(await pg.resumeUploads()).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('resumeUploads: an upload stopped half-way continues with the very same bytes', () => {
  it('abort at 50 %, a new client with the same keeper resumes from the storage service offset', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pg-keeper-'));
    try {
      const keeper = fileKeeper(dir);
      const stop = new AbortController();
      const first = client({ keeper });
      const sealed = first.encrypt({
        files,
        recipients: [first.recipient.email(BOB)],
        sign: first.sign.apiKey(pkg.apiKey),
      });
      const error = await sealed
        .upload({
          signal: stop.signal,
          onProgress: (uploaded, total) => {
            if (total !== undefined && uploaded >= total / 2) stop.abort();
          },
        })
        .catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'ABORTED' });

      const second = client({ keeper: fileKeeper(dir) });
      const pending = await second.resumeUploads();
      expect(pending).toHaveLength(1);
      expect(pending[0]!.label).toBe('a.txt, b.bin, c.pdf');
      const progress: number[] = [];
      const { uuid } = await pending[0]!.resume({ onProgress: (n) => progress.push(n) });
      expect(progress[0]).toBeGreaterThan(0);
      expect(await second.resumeUploads()).toEqual([]);

      const result = await second.open({ uuid }).decrypt({ session: sessionFor(BOB), output: 'bytes' });
      if (result.output !== 'bytes') throw new Error('unexpected output');
      expectSameBytes(readZip(result.plaintext).get('b.bin')!, files[1]!.content as Uint8Array);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('a kept upload sends its chunks while it seals', () => {
  it('the first chunks are confirmed before sealing goes on, the send is marked sealing until then, and nothing is kept after', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pg-keeper-'));
    try {
      const keeper = fileKeeper(dir);
      const pg = client({ keeper });
      const content = bytes(1_000_000, 5);
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      // A file whose second half is read only once the storage service confirmed a chunk: an
      // upload that waited for the whole sealing (as kept uploads once did) never finishes.
      class GatedFile extends Blob {
        override stream(): ReadableStream<Uint8Array<ArrayBuffer>> {
          let step = 0;
          return new ReadableStream<Uint8Array<ArrayBuffer>>({
            async pull(controller) {
              if (step === 0) controller.enqueue(content.slice(0, 500_000));
              else if (step === 1) {
                await gate;
                controller.enqueue(content.slice(500_000));
              } else controller.close();
              step += 1;
            },
          });
        }
      }
      const sealedSeen: number[] = [];
      let markedWhileSealing: boolean[] | undefined;
      const { uuid } = await pg
        .encrypt({
          files: [{ name: 'gated.bin', content: new GatedFile([content]) }],
          recipients: [pg.recipient.email(BOB)],
          sign: pg.sign.apiKey(pkg.apiKey),
        })
        .upload({
          onSealProgress: (sealed) => sealedSeen.push(sealed),
          onProgress: (uploaded) => {
            if (uploaded === 0 || markedWhileSealing !== undefined) return;
            markedWhileSealing = [];
            void keeper.list({ sealing: true }).then((records) => {
              markedWhileSealing = records.map((r) => r.sealing === true);
              release();
            });
          },
          signal: AbortSignal.timeout(60_000),
        });
      expect(markedWhileSealing).toEqual([true]);
      expect(sealedSeen.at(-1)).toBeGreaterThan(1_000_000);
      expect(await keeper.list()).toEqual([]);
      expect(await keeper.list({ sealing: true })).toEqual([]);
      const result = await pg.open({ uuid }).decrypt({ session: sessionFor(BOB), output: 'bytes' });
      if (result.output !== 'bytes') throw new Error('unexpected output');
      expectSameBytes(readZip(result.plaintext).get('gated.bin')!, content);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('an upload the storage service fails while sealing goes on stays resumable: sealing finishes into the keeper, the rest is sent later', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pg-keeper-'));
    try {
      await fetch(`${storage.url}/standin/faults/chunk`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ always: true, status: 503, fromOffset: 2 * CHUNK }),
      });
      const keeper = fileKeeper(dir);
      const first = client({ keeper });
      const content = bytes(1_000_000, 6);
      let sealedWhenFailed: number | undefined;
      let sealedLast = 0;
      const error = await first
        .encrypt({
          files: [{ name: 'later.bin', content }],
          recipients: [first.recipient.email(BOB)],
          sign: first.sign.apiKey(pkg.apiKey),
        })
        .upload({
          onSealProgress: (sealed) => (sealedLast = sealed),
          onProgress: (uploaded) => {
            if (uploaded === 2 * CHUNK) sealedWhenFailed = sealedLast;
          },
          signal: AbortSignal.timeout(60_000),
        })
        .catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'STORAGE_UNAVAILABLE', uploadedBytes: 2 * CHUNK });
      expect(sealedWhenFailed).toBeDefined();
      await fetch(`${storage.url}/standin/faults`, { method: 'DELETE' });

      const second = client({ keeper: fileKeeper(dir) });
      const pending = await second.resumeUploads();
      expect(pending.map((p) => p.size)).toEqual([sealedLast]);
      const { uuid } = await pending[0]!.resume();
      const result = await second.open({ uuid }).decrypt({ session: sessionFor(BOB), output: 'bytes' });
      if (result.output !== 'bytes') throw new Error('unexpected output');
      expectSameBytes(readZip(result.plaintext).get('later.bin')!, content);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
