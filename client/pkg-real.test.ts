import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StreamUnsealer } from '../lib/index.js';
import { extractUsk } from '../lib/keys.js';
import { apiKeyHash, createApiKey, createApiKeyStore, type ApiKeyStore } from '../server/db.js';
import { createTestSchema, startTcpProxy, withPort, type TcpProxy, type TestSchema } from '../server/db/testing.js';
import { startStorage, type RunningStorage } from '../devtools/storage/testing.js';
import { startPkg, type RunningPkg } from '../server/testing.js';
import { loadPgWasm } from '../test/pgwasm.js';
import { chunkedSource, collector } from '../test/streams.js';
import { PostGuard, ClientError, ClientErrorCode, type FetchLike } from './index.js';
import { readZip } from './testing.js';

/**
 * The SDK against the real PKG (server/app.ts) with API keys in the real PostgreSQL (server/db.ts),
 * and the storage stand-in asking that PKG for its verifying key and to validate the forwarded key.
 */

const EMAIL = 'pbdf.sidn-pbdf.email.email';
const ORG_NAME = 'pbdf.pbdf.kvk.displayName';

let schema: TestSchema;
let proxy: TcpProxy;
let store: ApiKeyStore;
let pkgServer: RunningPkg;
let storage: RunningStorage;
let orgKey: string;
let revokedKey: string;
let expiredKey: string;

beforeAll(async () => {
  schema = await createTestSchema();
  orgKey = await createApiKey(schema.url, {
    email: 'info@acme.example',
    org: 'ACME BV',
    signingAttrs: { email: true, orgName: true },
  });
  revokedKey = await createApiKey(schema.url, { email: 'info@acme.example', org: 'ACME BV' });
  expiredKey = await createApiKey(schema.url, {
    email: 'info@acme.example',
    org: 'ACME BV',
    expiresAt: new Date(Date.now() - 1000),
  });
  const admin = new pg.Client({ connectionString: schema.url });
  await admin.connect();
  await admin.query('UPDATE business_api_keys SET revoked_at = now() WHERE key_hash = $1', [apiKeyHash(revokedKey)]);
  await admin.end();
  // The database is reached through a proxy the outage test can take down.
  proxy = await startTcpProxy(Number(new URL(schema.url).port || 5432), new URL(schema.url).hostname);
  store = createApiKeyStore(withPort(schema.url, proxy.port), { emailAttribute: EMAIL, connectionTimeoutMs: 1000 });
  pkgServer = await startPkg({ apiKeys: store });
  // Default tier 100 kB; a key the PKG validates lifts it.
  storage = await startStorage({
    pkgUrl: pkgServer.url,
    perUploadLimit: 100_000,
    apiKeyPerUploadLimit: 10_000_000,
    chunkSize: 64 * 1024,
  });
});

afterAll(async () => {
  await storage?.close();
  await pkgServer?.close();
  await store?.close();
  await proxy?.close();
  await schema?.drop();
});

function client() {
  const exchanges: Array<{ url: string; headers: Headers; status: number; etag: string | null }> = [];
  const spy: FetchLike = async (url, init) => {
    const response = await fetch(url, init);
    exchanges.push({
      url,
      headers: new Headers(init.headers),
      status: response.status,
      etag: response.headers.get('etag'),
    });
    return response;
  };
  const pg = new PostGuard({
    pkgUrl: pkgServer.url,
    storageUrl: storage.url,
    allowInsecureUrls: true,
    uploadChunkSize: 64 * 1024,
    fetch: spy,
  });
  return { pg, exchanges };
}

const BIG = new Uint8Array(300_000).map((_, i) => (i * 13) & 0xff);
const NOTE = new TextEncoder().encode('signed by an organisation\n');

async function rejection(promise: Promise<unknown>): Promise<ClientError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ClientError);
  return error as ClientError;
}

describe('with the real PKG', () => {
  it('signs with the organisation key, uploads above the default tier, and decrypts with both libraries', async () => {
    const { pg } = client();
    const { uuid } = await pg
      .encrypt({
        files: [
          { name: 'note.txt', content: NOTE },
          { name: 'big.bin', content: chunkedSource(BIG, 7_000) },
        ],
        recipients: [pg.recipient.email('bob@example.com')],
        sign: pg.sign.apiKey(orgKey),
      })
      .upload({ notify: { recipients: true, message: 'From ACME' } });

    const ciphertext = new Uint8Array(await (await fetch(`${storage.url}/filedownload/${uuid}`)).arrayBuffer());
    expect(ciphertext.length).toBeGreaterThan(100_000);
    interface Opener {
      public_identity(): unknown;
      inspect_header(): Map<string, unknown>;
      unseal(id: string, usk: string, writable: WritableStream<Uint8Array>): Promise<unknown>;
    }
    const open = async (StreamUnsealerImpl: {
      new: (r: ReadableStream<Uint8Array>, vk: string) => Promise<Opener>;
    }) => {
      const unsealer = await StreamUnsealerImpl.new(chunkedSource(ciphertext, 40_000), pkgServer.keys.vk);
      expect((unsealer.public_identity() as { con: unknown }).con).toEqual([
        { t: EMAIL, v: 'info@acme.example' },
        { t: ORG_NAME, v: 'ACME BV' },
      ]);
      const entry = unsealer.inspect_header().get('bob@example.com') as { ts: number };
      const out = collector();
      await unsealer.unseal(
        'bob@example.com',
        extractUsk(pkgServer.keys.msk, { ts: entry.ts, con: [{ t: EMAIL, v: 'bob@example.com' }] }),
        out.writable,
      );
      return readZip(out.bytes());
    };
    const expected = new Map([
      ['note.txt', NOTE],
      ['big.bin', BIG],
    ]);
    expect(await open(StreamUnsealer)).toEqual(expected);
    expect(await open((await loadPgWasm()).StreamUnsealer)).toEqual(expected);

    // The stand-in verified the header with the PKG's key and names the organisation as sender.
    expect(
      (await storage.outbox()).map((m) => [m.to, m.replyTo, m.senderVerified, m.senderAttributes, m.message]),
    ).toEqual([['bob@example.com', 'info@acme.example', true, [[ORG_NAME, 'ACME BV']], 'From ACME']]);
  });

  it('revalidates the master public key with the ETag the PKG sent (304 on the second seal)', async () => {
    const { pg, exchanges } = client();
    const sealed = pg.encrypt({
      files: [{ name: 'a', content: NOTE }],
      recipients: [pg.recipient.email('b@x.org')],
      sign: pg.sign.apiKey(orgKey),
    });
    await sealed.toBytes();
    await sealed.toBytes();
    const parameters = exchanges.filter((e) => e.url.endsWith('/v2/parameters'));
    expect(parameters.map((e) => e.status)).toEqual([200, 304]);
    expect(parameters[0]!.etag).toMatch(/^"[^"]+"$/);
    expect(parameters[1]!.headers.get('if-none-match')).toBe(parameters[0]!.etag);
    expect(exchanges.filter((e) => e.url.startsWith(storage.url))).toEqual([]);
  });

  it('an unknown, revoked or expired key is API_KEY_REJECTED (401) and nothing is uploaded', async () => {
    for (const key of ['PG-never-issued', revokedKey, expiredKey]) {
      const { pg, exchanges } = client();
      const e = await rejection(
        pg
          .encrypt({
            files: [{ name: 'a', content: NOTE }],
            recipients: [pg.recipient.email('b@x.org')],
            sign: pg.sign.apiKey(key),
          })
          .upload(),
      );
      expect(e.code).toBe(ClientErrorCode.API_KEY_REJECTED);
      expect(e.status).toBe(401);
      expect(exchanges.filter((x) => x.url.startsWith(storage.url))).toEqual([]);
    }
  });

  it("the PKG's database down is PKG_UNAVAILABLE (503); it works again once the database is back", async () => {
    const { pg } = client();
    const make = () =>
      pg.encrypt({
        files: [{ name: 'a', content: NOTE }],
        recipients: [pg.recipient.email('b@x.org')],
        sign: pg.sign.apiKey(orgKey),
      });
    await proxy.down();
    try {
      const e = await rejection(make().toBytes());
      expect(e.code).toBe(ClientErrorCode.PKG_UNAVAILABLE);
      expect(e.status).toBe(503);
    } finally {
      await proxy.up();
    }
    expect((await make().toBytes()).length).toBeGreaterThan(0);
  });
});
