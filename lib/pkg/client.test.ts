import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Unsealer, seal } from '../index.js';
import { generatePkgKeys } from '../keys.js';
import { keyIdOf } from '../../server/keyset.js';
import { startPkg, type RunningPkg } from '../../server/testing.js';
import { disclose } from '../../devtools/standin/wallet.js';
import { PkgClient, type PkgClientOptions, type SigningKeys } from './client.js';
import type { IdentitySession } from './session.js';
import { memoryStore, type KeyValueStore } from './store.js';

/**
 * The PKG client against the real PKG (server/app.ts) and stand-in on loopback: public keys with
 * ETag revalidation, the sender and recipient flows end to end with the library's seal / unseal,
 * and the opt-in JWT / key cache.
 */

const EMAIL = 'irma-demo.sidn-pbdf.email.email';
const ALICE = 'alice@example.org';
const BOB = 'bob@example.org';

let pkg: RunningPkg;

beforeAll(async () => {
  pkg = await startPkg();
});

afterAll(async () => {
  await pkg?.close();
});

interface Exchange {
  url: string;
  status: number;
  headers: Headers;
}

/** A client whose requests are recorded (URL, status, request headers). */
function recorded(options: Partial<PkgClientOptions> = {}) {
  const exchanges: Exchange[] = [];
  const client = new PkgClient({
    url: pkg.url,
    store: memoryStore(),
    pollIntervalMs: 50,
    ...options,
    fetch: async (input, init) => {
      const response = await (options.fetch ?? fetch)(input, init);
      exchanges.push({ url: String(input), status: response.status, headers: new Headers(init?.headers) });
      return response;
    },
  });
  return { client, exchanges };
}

describe('public keys', () => {
  it("are the PKG's keys", async () => {
    const { client } = recorded();
    expect(await client.masterPublicKey()).toBe(pkg.keys.mpk);
    expect(await client.verificationKey()).toBe(pkg.keys.vk);
  });

  it("give the PKG's key set as candidates, kept across a 304, and refuse a malformed one", async () => {
    const store = memoryStore();
    const { client } = recorded({ store });
    expect(await client.verificationKeys()).toEqual([
      { id: keyIdOf(pkg.keys.vk), key: pkg.keys.vk, status: 'primary' },
    ]);
    // Revalidated (304): the set is the stored one.
    const again = recorded({ store, parametersMaxAgeMs: 0 });
    expect(await again.client.verificationKeys()).toEqual(await client.verificationKeys());
    expect(again.exchanges[0]!.status).toBe(304);
    // A PKG without a set (pg-pkg): its one key, as verificationKey gives it.
    const answer = (body: object) => async () =>
      new Response(JSON.stringify(body), { headers: { 'content-type': 'application/json' } });
    const plain = recorded({ fetch: answer({ formatVersion: 0, publicKey: pkg.keys.vk }) });
    expect(await plain.client.verificationKeys()).toBe(pkg.keys.vk);
    const entry = {
      id: keyIdOf(pkg.keys.vk),
      publicKey: pkg.keys.vk,
      status: 'primary',
      notBefore: null,
      notAfter: null,
    };
    for (const keys of [
      [],
      [{ ...entry, id: 'XYZ' }],
      [{ ...entry, status: 'active' }],
      [{ ...entry, publicKey: 'AA==' }],
      'all',
    ]) {
      const bad = recorded({ fetch: answer({ formatVersion: 0, publicKey: pkg.keys.vk, keys }) });
      await expect(bad.client.verificationKeys(), JSON.stringify(keys)).rejects.toMatchObject({ code: 'BAD_RESPONSE' });
    }
  });

  it('are asked once while fresh, once for concurrent callers', async () => {
    const { client, exchanges } = recorded();
    await Promise.all(Array.from({ length: 5 }, () => client.masterPublicKey()));
    await client.masterPublicKey();
    expect(exchanges.filter((e) => e.url.endsWith('/v2/parameters'))).toHaveLength(1);
  });

  it('are revalidated with the stored ETag: 304, no body, same key', async () => {
    const store = memoryStore();
    const first = recorded({ store });
    await first.client.masterPublicKey();
    expect(first.exchanges[0]!.status).toBe(200);
    // A new page (new client) with the same storage, past the freshness window.
    const second = recorded({ store, parametersMaxAgeMs: 0 });
    expect(await second.client.masterPublicKey()).toBe(pkg.keys.mpk);
    expect(second.exchanges[0]!.status).toBe(304);
    expect(second.exchanges[0]!.headers.get('if-none-match')).toMatch(/^".+"$/);
    // Still past the window: every call revalidates.
    await second.client.masterPublicKey();
    expect(second.exchanges.map((e) => e.status)).toEqual([304, 304]);
  });

  it('a rotated key replaces the cached one (the old ETag no longer matches)', async () => {
    const store = memoryStore();
    await recorded({ store }).client.masterPublicKey();
    const rotated = await startPkg({ keys: generatePkgKeys(), yivi: pkg.yivi });
    try {
      // Same storage namespace (the PKG URL), new keys behind it.
      const via = (input: RequestInfo | URL, init?: RequestInit) =>
        fetch(String(input).replace(pkg.url, rotated.url), init);
      const { client, exchanges } = recorded({ store, parametersMaxAgeMs: 0, fetch: via });
      expect(await client.masterPublicKey()).toBe(rotated.keys.mpk);
      expect(exchanges[0]!.status).toBe(200);
      expect(await recorded({ store, parametersMaxAgeMs: 0, fetch: via }).client.masterPublicKey()).toBe(
        rotated.keys.mpk,
      );
    } finally {
      await rotated.close();
    }
  });

  it('with the PKG down: the cached key if there is one, else PKG_UNAVAILABLE', async () => {
    const store = memoryStore();
    await recorded({ store }).client.verificationKey();
    const down = async () => Promise.reject(new TypeError('connect ECONNREFUSED'));
    expect(await recorded({ store, parametersMaxAgeMs: 0, fetch: down }).client.verificationKey()).toBe(pkg.keys.vk);
    await expect(recorded({ fetch: down }).client.verificationKey()).rejects.toMatchObject({ code: 'PKG_UNAVAILABLE' });
  });

  it('a PKG whose CORS policy refuses If-None-Match still gives the key (asked again without it)', async () => {
    const store = memoryStore();
    await recorded({ store }).client.masterPublicKey();
    const picky = async (input: RequestInfo | URL, init?: RequestInit) =>
      new Headers(init?.headers).has('if-none-match')
        ? Promise.reject(new TypeError('preflight refused'))
        : fetch(input, init);
    const { client, exchanges } = recorded({ store, parametersMaxAgeMs: 0, fetch: picky });
    expect(await client.masterPublicKey()).toBe(pkg.keys.mpk);
    expect(exchanges.map((e) => e.status)).toEqual([200]);
  });

  it('a broken store degrades to no cache, not to failure', async () => {
    const broken: KeyValueStore = {
      get: () => Promise.reject(new Error('quota')),
      set: () => Promise.reject(new Error('quota')),
      delete: () => Promise.reject(new Error('quota')),
      keys: () => Promise.reject(new Error('quota')),
    };
    expect(await recorded({ store: broken }).client.masterPublicKey()).toBe(pkg.keys.mpk);
  });
});

/** Sender: a session disclosing Bob's e-mail, then signing keys for it. */
async function bobsSigningKeys(client: PkgClient): Promise<SigningKeys> {
  return client.signingKeysWithSession({
    con: [{ t: EMAIL, v: BOB }],
    pubSignId: [{ t: EMAIL }],
    onSession: (session) => void disclose(session.qrText, { [EMAIL]: BOB }),
  });
}

async function sealForAlice(client: PkgClient, message: string): Promise<Uint8Array> {
  const [mpk, keys] = await Promise.all([client.masterPublicKey(), bobsSigningKeys(client)]);
  const policy = { [ALICE]: { ts: pkg.clock.now(), con: [{ t: EMAIL, v: ALICE }] } };
  return seal(mpk, { policy, pubSignKey: keys.pubSignKey }, new TextEncoder().encode(message));
}

/** The recipient's side: the wallet answers every session with Alice's e-mail; sessions are counted. */
function alicesWallet() {
  const sessions: IdentitySession[] = [];
  return {
    sessions,
    onSession: (session: IdentitySession) => {
      sessions.push(session);
      void disclose(session.qrText, { [EMAIL]: ALICE });
    },
  };
}

async function open(client: PkgClient, ciphertext: Uint8Array, wallet: ReturnType<typeof alicesWallet>, extra = {}) {
  const unsealer = await Unsealer.new(ciphertext, await client.verificationKey());
  const policy = unsealer.inspect_header().get(ALICE)!;
  const key = await client.decryptionKey({ recipientId: ALICE, policy, onSession: wallet.onSession, ...extra });
  const [plain, verified] = await unsealer.unseal(ALICE, key.usk);
  return { text: new TextDecoder().decode(plain), source: key.source, verified };
}

describe('sender and recipient flows', () => {
  it('a message sealed with session signing keys opens with a key from a recipient session', async () => {
    const { client } = recorded();
    const ciphertext = await sealForAlice(client, 'hello Alice');
    const wallet = alicesWallet();
    const opened = await open(client, ciphertext, wallet);
    expect(opened.text).toBe('hello Alice');
    expect(opened.source).toBe('session');
    expect(opened.verified.public.con).toEqual([{ t: EMAIL, v: BOB }]);
    expect(wallet.sessions).toHaveLength(1);
  });

  it('without caching, every file needs a scan and nothing secret is stored', async () => {
    const store = memoryStore();
    const { client } = recorded({ store });
    const ciphertext = await sealForAlice(client, 'twice');
    const wallet = alicesWallet();
    await open(client, ciphertext, wallet);
    await open(client, ciphertext, wallet);
    expect(wallet.sessions).toHaveLength(2);
    expect((await store.keys()).filter((k) => /\|(?:jwt|usk)\|/.test(k))).toEqual([]);
  });
});

describe('session hand-over', () => {
  it('a UI callback that throws cancels the session instead of leaving it running', async () => {
    const { client } = recorded();
    const ciphertext = await sealForAlice(client, 'x');
    const unsealer = await Unsealer.new(ciphertext, pkg.keys.vk);
    let token = '';
    const failure = new Error('no QR element');
    await expect(
      client.decryptionKey({
        recipientId: ALICE,
        policy: unsealer.inspect_header().get(ALICE)!,
        onSession: (session) => {
          token = session.token;
          throw failure;
        },
      }),
    ).rejects.toBe(failure);
    expect(await (await fetch(`${pkg.yivi.url}/session/${token}/status`)).json()).toBe('CANCELLED');
  });
});

describe('the opt-in key cache', () => {
  it('the same file again: the cached key; a newer file: the cached JWT; no second scan', async () => {
    const { client, exchanges } = recorded({ cacheKeys: true });
    const first = await sealForAlice(client, 'one');
    const wallet = alicesWallet();
    expect((await open(client, first, wallet)).source).toBe('session');
    expect((await open(client, first, wallet)).source).toBe('cache');
    pkg.clock.advance(10);
    const second = await sealForAlice(client, 'two');
    const before = exchanges.length;
    const opened = await open(client, second, wallet);
    expect(opened).toMatchObject({ text: 'two', source: 'cached-jwt' });
    expect(wallet.sessions).toHaveLength(1);
    expect(exchanges.slice(before).filter((e) => e.url.includes('/start'))).toHaveLength(0);
  });

  it('forgetKeys() drops JWTs and keys (not the public keys): the next file needs a scan', async () => {
    const store = memoryStore();
    const { client } = recorded({ store, cacheKeys: true });
    const ciphertext = await sealForAlice(client, 'forget me');
    const wallet = alicesWallet();
    await open(client, ciphertext, wallet);
    expect((await store.keys()).filter((k) => /\|(?:jwt|usk)\|/.test(k))).toHaveLength(2);
    await client.forgetKeys();
    const left = await store.keys();
    expect(left.filter((k) => /\|(?:jwt|usk)\|/.test(k))).toEqual([]);
    expect(left.filter((k) => k.includes('|params|'))).toHaveLength(2);
    expect((await open(client, ciphertext, wallet)).source).toBe('session');
    expect(wallet.sessions).toHaveLength(2);
  });

  it('entries expire with their JWT (client clock past exp)', async () => {
    const store = memoryStore();
    // The JWT's exp comes from the identity server's clock; the client's clock starts there too.
    let now = pkg.clock.now() * 1000;
    const { client } = recorded({ store, cacheKeys: true, now: () => now });
    const ciphertext = await sealForAlice(client, 'expiring');
    const wallet = alicesWallet();
    await open(client, ciphertext, wallet, { validity: 120 });
    now += 89_000; // within exp minus the 30 s margin
    expect((await open(client, ciphertext, wallet)).source).toBe('cache');
    now += 2_000; // past it
    expect((await open(client, ciphertext, wallet)).source).toBe('session');
  });

  it('a cached JWT the PKG refuses (expired there) is dropped and a session runs', async () => {
    const { client } = recorded({ cacheKeys: true });
    const first = await sealForAlice(client, 'a');
    const wallet = alicesWallet();
    await open(client, first, wallet, { validity: 60 });
    pkg.clock.advance(61); // the PKG now sees the JWT as expired (chronology error)
    const second = await sealForAlice(client, 'b');
    expect(await open(client, second, wallet)).toMatchObject({ text: 'b', source: 'session' });
    expect(wallet.sessions).toHaveLength(2);
  });

  it('fresh: true skips the cache (e.g. after a cached key did not open a file)', async () => {
    const { client } = recorded({ cacheKeys: true });
    const ciphertext = await sealForAlice(client, 'fresh');
    const wallet = alicesWallet();
    await open(client, ciphertext, wallet);
    expect((await open(client, ciphertext, wallet, { fresh: true })).source).toBe('session');
  });

  it('cacheOnly: a hit as usual; a miss or an expired entry is NOT_CACHED and starts no session', async () => {
    let now = pkg.clock.now() * 1000;
    const { client, exchanges } = recorded({ cacheKeys: true, now: () => now });
    const ciphertext = await sealForAlice(client, 'only cached');
    const wallet = alicesWallet();
    await expect(open(client, ciphertext, wallet, { cacheOnly: true })).rejects.toMatchObject({ code: 'NOT_CACHED' });
    await expect(open(client, ciphertext, wallet, { cacheOnly: true, cache: false })).rejects.toMatchObject({
      code: 'NOT_CACHED',
    });
    expect(wallet.sessions).toHaveLength(0);
    await open(client, ciphertext, wallet, { validity: 120 });
    expect((await open(client, ciphertext, wallet, { cacheOnly: true })).source).toBe('cache');
    now += 120_000;
    const before = exchanges.length;
    await expect(open(client, ciphertext, wallet, { cacheOnly: true })).rejects.toMatchObject({ code: 'NOT_CACHED' });
    expect(exchanges.slice(before).filter((e) => e.url.includes('/start'))).toEqual([]);
  });

  it('the passkey tier where there is no WebAuthn (Node): PRF_UNAVAILABLE before any scan, nothing stored', async () => {
    const store = memoryStore();
    const { client, exchanges } = recorded({ store, cacheKeys: true, keyProtection: 'passkey' });
    expect(client.keyProtection).toBe('passkey');
    await expect(client.registerPasskey()).rejects.toMatchObject({ code: 'PRF_UNAVAILABLE' });
    const ciphertext = await sealForAlice(client, 'no passkey');
    const sealed = exchanges.length;
    const wallet = alicesWallet();
    await expect(open(client, ciphertext, wallet)).rejects.toMatchObject({ code: 'PASSKEY_FAILED' });
    const withId = recorded({ store, cacheKeys: true, passkey: { credentialId: 'A'.repeat(22) } }).client;
    await withId.useKeyProtection('passkey');
    await expect(open(withId, ciphertext, wallet)).rejects.toMatchObject({ code: 'PRF_UNAVAILABLE' });
    expect(wallet.sessions).toHaveLength(0);
    expect(exchanges.slice(sealed).filter((e) => e.url.includes('/start'))).toEqual([]);
    expect((await store.keys()).filter((k) => /\|(?:jwt|usk|device-key|passkey)/.test(k))).toEqual([]);
    // Without the cache the passkey is not asked: a scan as ever.
    expect((await open(withId, ciphertext, wallet, { cache: false })).source).toBe('session');
  });

  it('a cached JWT is not thrown away because the PKG is briefly unreachable', async () => {
    const store = memoryStore();
    const { client } = recorded({ store, cacheKeys: true });
    const first = await sealForAlice(client, 'x');
    await open(client, first, alicesWallet());
    pkg.clock.advance(5);
    const second = await sealForAlice(client, 'y');
    const unsealer = await Unsealer.new(second, pkg.keys.vk);
    const down = recorded({
      store,
      cacheKeys: true,
      fetch: async () => Promise.reject(new TypeError('offline')),
    }).client;
    await expect(
      down.decryptionKey({ recipientId: ALICE, policy: unsealer.inspect_header().get(ALICE)! }),
    ).rejects.toMatchObject({
      code: 'PKG_UNAVAILABLE',
    });
    expect((await store.keys()).filter((k) => k.includes('|jwt|'))).toHaveLength(1);
  });
});
