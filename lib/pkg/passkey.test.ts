import { createHmac } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { PkgCache } from './cache.js';
import { PkgClient } from './client.js';
import { createPasskey, passkeyBox, type PasskeyRegistration } from './passkey.js';
import { deviceKeyBox } from './secret-box.js';
import { memoryStore } from './store.js';

/**
 * The passkey tier's rules against a scripted authenticator in Node (navigator.credentials and
 * PublicKeyCredential stubbed): what the browser hands back decides the outcome, so every rule can
 * be broken on purpose. The real thing, Chromium's virtual authenticator with PRF, is
 * worker/test/passkey.spec.ts.
 */

class FakeCredential {
  constructor(
    readonly rawId: ArrayBuffer,
    readonly response: { authenticatorData: ArrayBuffer },
    private readonly extensions: unknown,
  ) {}
  getClientExtensionResults() {
    return this.extensions;
  }
}

interface Authenticator {
  /** Credential ids it holds, with their PRF secrets. */
  held: Map<string, Buffer>;
  prf: boolean;
  verifiesUser: boolean;
  /** Answers with this id whatever was asked (a misbehaving authenticator). */
  answerAs?: string;
  /** Never answers (a prompt the user leaves open). */
  hang?: boolean;
  assertions: number;
}

const b64url = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64url');

function install(): Authenticator {
  const auth: Authenticator = { held: new Map(), prf: true, verifiesUser: true, assertions: 0 };
  const flags = () => {
    const data = new Uint8Array(37);
    data[32] = 0x01 | (auth.verifiesUser ? 0x04 : 0);
    return data.buffer;
  };
  vi.stubGlobal('PublicKeyCredential', FakeCredential);
  vi.stubGlobal('navigator', {
    credentials: {
      async create() {
        const id = crypto.getRandomValues(new Uint8Array(16));
        auth.held.set(b64url(id), Buffer.from(crypto.getRandomValues(new Uint8Array(32))));
        return new FakeCredential(id.buffer, { authenticatorData: flags() }, { prf: { enabled: auth.prf } });
      },
      async get(options: CredentialRequestOptions) {
        auth.assertions++;
        if (auth.hang === true) return new Promise(() => undefined);
        const asked = b64url(new Uint8Array(options.publicKey!.allowCredentials![0]!.id as Uint8Array));
        const id = auth.answerAs ?? asked;
        const secret = auth.held.get(id);
        if (secret === undefined) throw new DOMException('no credential', 'NotAllowedError');
        const input = (options.publicKey!.extensions as { prf: { eval: { first: Uint8Array } } }).prf.eval.first;
        const output = createHmac('sha256', secret).update(input).digest();
        return new FakeCredential(
          new Uint8Array(Buffer.from(id, 'base64url')).buffer,
          { authenticatorData: flags() },
          auth.prf ? { prf: { results: { first: new Uint8Array(output) } } } : {},
        );
      },
    },
  });
  return auth;
}

const PKG = 'https://pkg.example';

describe('the passkey tier', () => {
  let auth: Authenticator;
  beforeEach(() => {
    auth = install();
  });
  afterEach(() => {
    vi.unstubAllGlobals();
  });

  const cacheWith = (registration: () => PasskeyRegistration | undefined, store = memoryStore()) => {
    const cache = new PkgCache(Promise.resolve(store), PKG, Date.now, {
      passkey: passkeyBox(async () => registration(), PKG),
    });
    cache.useTier('passkey');
    return { cache, store };
  };
  const exp = () => Math.floor(Date.now() / 1000) + 3600;

  it('seals under the PRF key after one assertion per box; another box (a new page session) asks again and opens it', async () => {
    const a = await createPasskey();
    const { cache, store } = cacheWith(() => a);
    await cache.putSecret('usk', 'x', 'THE-KEY', exp());
    await cache.putSecret('jwt', 'x', 'THE-JWT', exp());
    expect(await cache.secret('usk', 'x')).toBe('THE-KEY');
    expect(auth.assertions).toBe(1);
    const stored = JSON.stringify(await Promise.all((await store.keys()).map((k) => store.get(k))), (_, v: unknown) =>
      v instanceof Uint8Array ? Buffer.from(v).toString('latin1') : v,
    );
    expect(stored).not.toContain('THE-KEY');
    expect(stored).not.toContain('THE-JWT');
    expect(stored).toContain(`passkey:${a.credentialId}`);
    const again = cacheWith(() => a, store).cache;
    expect(await again.secret('jwt', 'x')).toBe('THE-JWT');
    expect(auth.assertions).toBe(2);
  });

  it("another passkey's entries: PASSKEY_MISMATCH before any prompt; the device tier's are never opened", async () => {
    const a = await createPasskey();
    const b = await createPasskey();
    const { cache, store } = cacheWith(() => a);
    await cache.putSecret('usk', 'x', 'K', exp());
    const before = auth.assertions;
    await expect(cacheWith(() => b, store).cache.secret('usk', 'x')).rejects.toMatchObject({
      code: 'PASSKEY_MISMATCH',
    });
    expect(auth.assertions).toBe(before);
    // The device tier neither opens a passkey's entry nor is opened by the passkey tier.
    const device = new PkgCache(Promise.resolve(store), PKG, Date.now);
    expect(await device.secret('usk', 'x')).toBeUndefined();
    await device.putSecret('usk', 'y', 'D', exp());
    expect(await cacheWith(() => a, store).cache.secret('usk', 'y')).toBeUndefined();
    expect(
      await deviceKeyBox(store).open({ v: 1, iv: new Uint8Array(12), data: new Uint8Array(16), by: 'passkey:x' }, 'c'),
    ).toBeUndefined();
  });

  it('an authenticator that answers with another credential: PASSKEY_MISMATCH', async () => {
    const a = await createPasskey();
    const b = await createPasskey();
    auth.answerAs = b.credentialId;
    await expect(cacheWith(() => a).cache.unlock()).rejects.toMatchObject({ code: 'PASSKEY_MISMATCH' });
  });

  it('no user verification, a credential the authenticator lacks, none registered: PASSKEY_FAILED, and nothing kept', async () => {
    const a = await createPasskey();
    auth.verifiesUser = false;
    const { cache, store } = cacheWith(() => a);
    await expect(cache.unlock()).rejects.toMatchObject({ code: 'PASSKEY_FAILED' });
    await cache.putSecret('usk', 'x', 'K', exp());
    expect((await store.keys()).filter((k) => k.includes('|usk|'))).toEqual([]);
    auth.verifiesUser = true;
    auth.held.clear(); // the authenticator is gone
    await expect(cache.unlock()).rejects.toMatchObject({ code: 'PASSKEY_FAILED' });
    await expect(cacheWith(() => undefined).cache.unlock()).rejects.toMatchObject({ code: 'PASSKEY_FAILED' });
  });

  it('without PRF: registration and assertion say PRF_UNAVAILABLE; without WebAuthn too', async () => {
    const a = await createPasskey();
    auth.prf = false;
    await expect(createPasskey()).rejects.toMatchObject({ code: 'PRF_UNAVAILABLE' });
    await expect(cacheWith(() => a).cache.unlock()).rejects.toMatchObject({ code: 'PRF_UNAVAILABLE' });
    vi.unstubAllGlobals();
    await expect(createPasskey()).rejects.toMatchObject({ code: 'PRF_UNAVAILABLE' });
  });

  it('the key is bound to the PKG URL: the same passkey for another PKG does not open the entry', async () => {
    const a = await createPasskey();
    const store = memoryStore();
    const { cache } = cacheWith(() => a, store);
    await cache.putSecret('usk', 'x', 'K', exp());
    const [name] = (await store.keys()).filter((k) => k.includes('|usk|'));
    const other = passkeyBox(async () => a, 'https://other.example');
    const entry = await store.get<{ sealed: unknown }>(name!);
    expect(await other.open(entry!.sealed, name!)).toBeUndefined();
    expect(await passkeyBox(async () => a, PKG).open(entry!.sealed, name!)).toBe('K');
  });

  it("a prompt left open: the key request's signal ends it with ABORTED, and no session starts", async () => {
    await createPasskey();
    const requests: string[] = [];
    const client = new PkgClient({
      url: PKG,
      store: memoryStore(),
      cacheKeys: true,
      keyProtection: 'passkey',
      fetch: async (input) => {
        requests.push(String(input));
        throw new TypeError('offline');
      },
    });
    await client.registerPasskey();
    auth.hang = true;
    const abort = new AbortController();
    const pending = client.decryptionKey({
      recipientId: 'alice@example.org',
      policy: { ts: 1_700_000_000, con: [{ t: 'pbdf.sidn-pbdf.email.email', v: 'alice@example.org' }] },
      signal: abort.signal,
    });
    setTimeout(() => abort.abort(), 20);
    await expect(pending).rejects.toMatchObject({ code: 'ABORTED' });
    expect(auth.assertions).toBe(1);
    expect(requests).toEqual([]);
  });
});
