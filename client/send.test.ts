import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStorage, type RunningStorage } from '../devtools/storage/testing.js';
import { expectSameBytes } from '../test/bytes.js';
import { readAll } from '../test/streams.js';
import { ClientError, PostGuard, type PostGuardOptions, type SessionRequest } from './index.js';
import { FAKE_JWT_PREFIX, readZip, startFakePkg, type FakePkg } from './testing.js';

/**
 * The client's sending side in Node: the three ways to sign, what is checked before the sender is
 * asked to scan anything (the storage limit against the exact size), and the inputs pg-js takes.
 * The fake PKG signs for an API key; a session's JWT is refused by it, so a test that needs keys
 * from a session passes them with `signingKeys` (the PKG flow of sessions is tested in lib/pkg and
 * the browser e2e).
 */

const CHUNK = 64 * 1024;
const BOB = 'bob@example.com';

let pkg: FakePkg;
let storage: RunningStorage;
let small: RunningStorage;

beforeAll(async () => {
  pkg = await startFakePkg();
  storage = await startStorage({ verifyingKey: pkg.keys.vk, chunkSize: CHUNK, strict: true });
  small = await startStorage({ verifyingKey: pkg.keys.vk, chunkSize: CHUNK, strict: true, perUploadLimit: 50_000 });
});
afterAll(async () => {
  await Promise.all([storage.close(), small.close()]);
  await pkg.close();
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

const bytes = (n: number, seed: number) => new Uint8Array(n).map((_, i) => (i * 13 + seed) & 255);

describe('before any scan', () => {
  it('an over-limit file is UPLOAD_TOO_LARGE before the session callback runs, and no upload begins', async () => {
    const requests: string[] = [];
    const pg = client({
      cryptifyUrl: small.url,
      fetch: (url, init) => {
        requests.push(`${init.method ?? 'GET'} ${new URL(url).pathname}`);
        return fetch(url, init);
      },
    });
    let asked = 0;
    const sign = pg.sign.session(
      async () => {
        asked++;
        return `${FAKE_JWT_PREFIX}sender@example.org`;
      },
      { senderEmail: 'sender@example.org' },
    );
    const sealed = pg.encrypt({
      files: [{ name: 'big.bin', content: bytes(60_000, 1) }],
      recipients: [pg.recipient.email(BOB)],
      sign,
    });
    const error = await sealed.upload().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ClientError);
    expect(error).toMatchObject({ code: 'UPLOAD_TOO_LARGE' });
    expect((error as Error).message).toContain('50000');
    expect(asked).toBe(0);
    expect(requests).toEqual(['GET /limits']);
  });

  it('size() is the exact length of what upload() stores, before the keys exist', async () => {
    const pg = client();
    const files = [
      { name: 'a.txt', content: bytes(10_000, 2) },
      { name: 'b.bin', content: new Blob([bytes(300_000, 3)]) },
    ];
    const viaKey = pg.encrypt({ files, recipients: [pg.recipient.email(BOB)], sign: pg.sign.apiKey(pkg.apiKey) });
    const predicted = await viaKey.size();
    const { uuid } = await viaKey.upload();
    const stored = await fetch(`${storage.url}/filedownload/${uuid}`).then((r) => r.arrayBuffer());
    expect(stored.byteLength).toBe(predicted);

    // A Yivi sender named in advance: the size is known without any session.
    const yivi = pg.encrypt({
      files,
      recipients: [pg.recipient.email(BOB)],
      sign: pg.sign.yivi({ onSession: () => undefined, senderEmail: pkg.sender }),
    });
    expect(await yivi.size()).toBe(predicted);
    // A stream of unknown length has no size before it is read.
    const streamed = pg.encrypt({
      files: [{ name: 's', content: new Blob([bytes(10, 1)]).stream() }],
      recipients: [pg.recipient.email(BOB)],
      sign: pg.sign.apiKey(pkg.apiKey),
    });
    expect(await streamed.size()).toBeUndefined();
  });
});

describe('signing', () => {
  it('sign.session: the callback is asked for the e-mail attribute (with the sender given) and its JWT goes to the PKG', async () => {
    const pg = client();
    const asked: SessionRequest[] = [];
    const sign = pg.sign.session(
      async (request) => {
        asked.push(request);
        return 'not-a-session-the-fake-pkg-knows';
      },
      { senderEmail: 'alice@example.org' },
    );
    const error = await pg
      .encrypt({ data: bytes(10, 1), recipients: [pg.recipient.email(BOB)], sign })
      .toBytes()
      .catch((e: unknown) => e);
    expect(asked).toEqual([{ con: [{ t: 'pbdf.sidn-pbdf.email.email', v: 'alice@example.org' }], sort: 'Signing' }]);
    // The fake PKG signs only for its API key: the session's JWT was sent and refused.
    expect(error).toMatchObject({ code: 'API_KEY_REJECTED' });
    expect(pkg.signKeyRequests.at(-1)?.authorization).toBe('Bearer not-a-session-the-fake-pkg-knows');
  });

  it('sign.apiKey in a browser is API_KEY_IN_BROWSER: a page would hand the key to anyone', () => {
    const g = globalThis as { window?: unknown; document?: unknown };
    g.window = globalThis;
    g.document = {};
    try {
      expect(() => client().sign.apiKey(pkg.apiKey)).toThrow(expect.objectContaining({ code: 'API_KEY_IN_BROWSER' }));
    } finally {
      delete g.window;
      delete g.document;
    }
  });

  it('sign.yivi and sign.session check their options at once', () => {
    const pg = client();
    expect(() => pg.sign.yivi({})).toThrow(expect.objectContaining({ code: 'INVALID_INPUT' }));
    expect(() => pg.sign.yivi({ onSession: () => undefined, senderEmail: 'not-an-address' })).toThrow(
      expect.objectContaining({ code: 'INVALID_INPUT' }),
    );
    expect(() => pg.sign.yivi({ onSession: () => undefined, includeSender: true })).toThrow(
      /includeSender needs senderEmail/,
    );
    expect(() => pg.sign.yivi({ onSession: () => undefined, attributes: [{ t: '' }] })).toThrow(/attributes\[0\]/);
    expect(() => pg.sign.session('nope' as never)).toThrow(expect.objectContaining({ code: 'INVALID_INPUT' }));
  });
});

describe('inputs', () => {
  it('data: toBytes() seals the bytes as they are; upload() wraps them as data.bin, as pg-js does', async () => {
    const pg = client();
    const data = bytes(20_000, 7);
    const sealed = pg.encrypt({ data, recipients: [pg.recipient.email(BOB)], sign: pg.sign.apiKey(pkg.apiKey) });
    const session = async () => `${FAKE_JWT_PREFIX}${BOB}`;
    const raw = await pg.open({ data: await sealed.toBytes() }).decrypt({ session, output: 'bytes' });
    if (raw.output !== 'bytes') throw new Error('unexpected output');
    expectSameBytes(raw.plaintext, data);

    const streamed = await readAll(sealed.stream());
    const again = await pg.open({ data: streamed }).decrypt({ session, output: 'bytes' });
    if (again.output !== 'bytes') throw new Error('unexpected output');
    expectSameBytes(again.plaintext, data);

    const { uuid } = await sealed.upload();
    const uploaded = await pg.open({ uuid }).decrypt({ session, output: 'bytes' });
    if (uploaded.output !== 'bytes') throw new Error('unexpected output');
    expect([...readZip(uploaded.plaintext).keys()]).toEqual(['data.bin']);
    expectSameBytes(readZip(uploaded.plaintext).get('data.bin')!, data);
  });

  it('takes File objects (pg-js input), and refuses files and data together', async () => {
    const pg = client();
    const file = new File([bytes(500, 4)], 'dir/report.pdf', { lastModified: 1_700_000_000_000 });
    const sealed = pg.encrypt({
      files: [file],
      recipients: [pg.recipient.email(BOB)],
      sign: pg.sign.apiKey(pkg.apiKey),
    });
    const opened = await pg
      .open({ data: await sealed.toBytes() })
      .decrypt({ session: async () => `${FAKE_JWT_PREFIX}${BOB}`, output: 'bytes' });
    if (opened.output !== 'bytes') throw new Error('unexpected output');
    expectSameBytes(readZip(opened.plaintext).get('report.pdf')!, bytes(500, 4));
    expect(() =>
      pg.encrypt({
        files: [file],
        data: bytes(1, 1),
        recipients: [pg.recipient.email(BOB)],
        sign: pg.sign.apiKey(pkg.apiKey),
      }),
    ).toThrow(/files or data, not both/);
  });

  it('without cryptifyUrl: sealing and opening work, upload and open({uuid}) are NO_STORAGE', async () => {
    const pg = new PostGuard({ pkgUrl: pkg.url, allowInsecureUrls: true });
    const sealed = pg.encrypt({
      data: bytes(10, 1),
      recipients: [pg.recipient.email(BOB)],
      sign: pg.sign.apiKey(pkg.apiKey),
    });
    expect(sealed.canUpload).toBe(false);
    await expect(sealed.upload()).rejects.toMatchObject({ code: 'NO_STORAGE' });
    expect(() => pg.open({ uuid: '00000000-0000-4000-8000-000000000000' })).toThrow(
      expect.objectContaining({ code: 'NO_STORAGE' }),
    );
    expect((await sealed.toBytes()).length).toBeGreaterThan(10);
  });
});
