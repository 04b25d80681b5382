import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Unsealer, seal, type Policy, type SealOptions } from '../lib/index.js';
import { extractSigningKey, generateSigningKeys } from '../lib/keys.js';
import { keyIdOf } from './keyset.js';
import { loadPgWasm, type PgWasm } from '../test/pgwasm.js';
import { disclose } from '../devtools/standin/wallet.js';
import { startPkg, type RunningPkg } from './testing.js';

/**
 * The whole flows over loopback HTTP, PKG in front of the real stand-in, wallet disclosing as a phone
 * would; the keys the PKG hands out must work in postguard-ts and in @e4a/pg-wasm 0.5.10.
 */

const EMAIL = 'irma-demo.sidn-pbdf.email.email';
const FULLNAME = 'irma-demo.gemeente.personalData.fullname';

let pkg: RunningPkg;
let pg: PgWasm;
let mpk: string;
let vk: string;

async function json(response: Response): Promise<any> {
  expect(response.headers.get('content-type')).toMatch(/^application\/json/);
  return response.json();
}

async function post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${pkg.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}

/** start → wallet discloses → jwt; the JWT a client would hold afterwards. */
async function sessionJwt(prefix: string, start: unknown, attributes: Record<string, string>): Promise<string> {
  const started = await post(`${prefix}/start`, start);
  expect(started.status).toBe(200);
  const pkgSession = await json(started);
  expect(Object.keys(pkgSession).sort()).toEqual(['sessionPtr', 'token']);
  expect(pkgSession.sessionPtr.irmaqr).toBe('disclosing');
  expect(pkgSession.token).toMatch(/^[A-Z0-9]{20}$/i);
  const report = await disclose(pkgSession, attributes);
  expect(report.proofStatus).toBe('VALID');
  const jwt = await fetch(`${pkg.url}${prefix}/jwt/${pkgSession.token}`);
  expect(jwt.status).toBe(200);
  expect(jwt.headers.get('content-type')).toBe('text/plain; charset=utf-8');
  return jwt.text();
}

// A sender key that is not under test: for the recipient flow, anyone may sign.
const otherSigner = (() => {
  const ibs = generateSigningKeys();
  const policy = { ts: 1_700_000_000, con: [{ t: EMAIL, v: 'sender@example.org' }] };
  return { vk: ibs.vk, pubSignKey: { key: extractSigningKey(ibs.sk, policy), policy } };
})();

beforeAll(async () => {
  pg = await loadPgWasm();
  pkg = await startPkg();
  mpk = (await json(await fetch(`${pkg.url}/v2/parameters`))).publicKey;
  vk = (await json(await fetch(`${pkg.url}/v2/sign/parameters`))).publicKey;
});

afterAll(async () => {
  await pkg?.close();
});

describe('parameters', () => {
  it('publish the master public key and verifying key in pg-pkg shapes', async () => {
    const body = await json(await fetch(`${pkg.url}/v2/parameters`));
    // pg-pkg's two fields, and beside them the key set: here the one key of the four key files.
    const one = (publicKey: string) => [
      { id: keyIdOf(publicKey), publicKey, status: 'primary', notBefore: null, notAfter: null },
    ];
    expect(body).toEqual({ formatVersion: 0, publicKey: pkg.keys.mpk, keys: one(pkg.keys.mpk) });
    expect(mpk).toHaveLength(896);
    expect(await json(await fetch(`${pkg.url}/v2/sign/parameters`))).toEqual({
      formatVersion: 0,
      publicKey: pkg.keys.vk,
      keys: one(pkg.keys.vk),
    });
    expect(vk).toHaveLength(44);
  });
});

describe('recipient flow: start → disclose → jwt → key/{ts}', () => {
  const recipient = 'alice@example.org';
  const plain = new TextEncoder().encode('for Alice only');

  for (const prefix of ['/v2/irma', '/v2/request', '/v2/idp']) {
    it(`the USK from ${prefix} opens ciphertexts sealed by postguard-ts and by pg-wasm`, async () => {
      const ts = pkg.clock.now() - 3600; // sealed an hour ago
      const policy: Record<string, Policy> = { [recipient]: { ts, con: [{ t: EMAIL, v: recipient }] } };
      const options: SealOptions = { policy, pubSignKey: otherSigner.pubSignKey };
      const ours = await seal(mpk, options, plain);
      const theirs = await pg.seal(mpk, options, plain);

      // The client reads the hidden policy and asks for what it names, fixing the e-mail value.
      const hidden = (await Unsealer.new(ours, otherSigner.vk)).inspect_header().get(recipient)!;
      expect(hidden.ts).toBe(ts);
      const jwt = await sessionJwt(
        prefix,
        { con: hidden.con.map((a) => ({ t: a.t, v: recipient })), validity: 600 },
        { [EMAIL]: recipient },
      );

      const answer = await fetch(`${pkg.url}${prefix}/key/${ts}`, { headers: { authorization: `Bearer ${jwt}` } });
      expect(answer.status).toBe(200);
      const body = await json(answer);
      expect(body.status).toBe('DONE');
      expect(body.proofStatus).toBe('VALID');
      expect(body.key).toHaveLength(768);

      for (const ct of [ours, theirs]) {
        const [a] = await (await Unsealer.new(ct, otherSigner.vk)).unseal(recipient, body.key);
        expect(new TextDecoder().decode(a)).toBe('for Alice only');
        const [b] = await (await pg.Unsealer.new(ct, otherSigner.vk)).unseal(recipient, body.key);
        expect(new TextDecoder().decode(b)).toBe('for Alice only');
      }
    });
  }

  it('the spec start shape {attr: {recipient: {t, con}}} gives the same key', async () => {
    const ts = pkg.clock.now() - 60;
    const policy = { [recipient]: { ts, con: [{ t: EMAIL, v: recipient }] } };
    const ct = await seal(mpk, { policy, pubSignKey: otherSigner.pubSignKey }, plain);
    const jwt = await sessionJwt(
      '/v2/idp',
      { attr: { [recipient]: { t: ts, con: [{ t: EMAIL, v: recipient }] } } },
      { [EMAIL]: recipient },
    );
    const body = await json(
      await fetch(`${pkg.url}/v2/idp/key/${ts}`, { headers: { authorization: `Bearer ${jwt}` } }),
    );
    const [got] = await (await pg.Unsealer.new(ct, otherSigner.vk)).unseal(recipient, body.key);
    expect(got).toEqual(plain);
  });

  it('a USK for another value does not open the ciphertext', async () => {
    const ts = pkg.clock.now() - 60;
    const ct = await seal(
      mpk,
      { policy: { [recipient]: { ts, con: [{ t: EMAIL, v: recipient }] } }, pubSignKey: otherSigner.pubSignKey },
      plain,
    );
    const jwt = await sessionJwt('/v2/irma', { con: [{ t: EMAIL }] }, { [EMAIL]: 'mallory@example.org' });
    const body = await json(
      await fetch(`${pkg.url}/v2/irma/key/${ts}`, { headers: { authorization: `Bearer ${jwt}` } }),
    );
    expect(body.key).toHaveLength(768);
    await expect((await Unsealer.new(ct, otherSigner.vk)).unseal(recipient, body.key)).rejects.toMatchObject({
      code: 'WRONG_KEY',
    });
  });
});

describe('sender flow: start → disclose → jwt → sign/key', () => {
  const sender = 'bob@example.org';
  const recipient = 'carol@example.org';

  it('signing keys from a session JWT sign ciphertexts that both implementations verify', async () => {
    const jwt = await sessionJwt(
      '/v2/request',
      { con: [{ t: EMAIL, v: sender }, { t: FULLNAME }] },
      { [EMAIL]: sender, [FULLNAME]: 'Bob Example' },
    );
    const before = pkg.clock.now();
    const answer = await post(
      '/v2/irma/sign/key',
      { pubSignId: [{ t: EMAIL }], privSignId: [{ t: FULLNAME }] },
      {
        authorization: `Bearer ${jwt}`,
      },
    );
    expect(answer.status).toBe(200);
    const keys = await json(answer);
    expect(keys.status).toBe('DONE');
    expect(keys.proofStatus).toBe('VALID');
    expect(keys.pubSignKey.policy).toEqual({ ts: before, con: [{ t: EMAIL, v: sender }] });
    expect(keys.privSignKey.policy).toEqual({ ts: before, con: [{ t: FULLNAME, v: 'Bob Example' }] });
    expect(keys.pubSignKey.key).toHaveLength(128);

    // The recipient's key, straight from the master secret (that part of the flow is tested above).
    const { extractUsk } = await import('../lib/keys.js');
    const ts = pkg.clock.now();
    const recipientPolicy = { ts, con: [{ t: EMAIL, v: recipient }] };
    const usk = extractUsk(pkg.keys.msk, recipientPolicy);
    const options: SealOptions = {
      policy: { [recipient]: recipientPolicy },
      pubSignKey: keys.pubSignKey,
      privSignKey: keys.privSignKey,
    };
    const plain = new TextEncoder().encode('signed by Bob');
    const expected = { public: keys.pubSignKey.policy, private: keys.privSignKey.policy };

    // Our files bind the sender inside the encryption; pg-wasm 0.5.10's do not.
    for (const [ct, bound] of [
      [await seal(mpk, options, plain), true],
      [await pg.seal(mpk, options, plain), false],
    ] as const) {
      const ours = await Unsealer.new(ct, vk);
      expect(ours.public_identity()).toEqual(keys.pubSignKey.policy);
      const [a, ourResult] = await ours.unseal(recipient, usk);
      expect(a).toEqual(plain);
      expect(ourResult).toEqual({ ...expected, contentSigner: 'private', bound });
      const theirs = await pg.Unsealer.new(ct, vk);
      expect(theirs.public_identity()).toEqual(keys.pubSignKey.policy);
      const [b, theirResult] = await theirs.unseal(recipient, usk);
      expect(b).toEqual(plain);
      expect(theirResult).toEqual(expected);
    }
  });

  it('without privSignId only the public key is issued, for the listed types only', async () => {
    const jwt = await sessionJwt(
      '/v2/irma',
      { con: [{ t: EMAIL, v: sender }, { t: FULLNAME }] },
      { [EMAIL]: sender, [FULLNAME]: 'Bob Example' },
    );
    const keys = await json(
      await post(
        '/v2/irma/sign/key',
        { pubSignId: [{ t: EMAIL, v: 'ignored@example.org' }] },
        { authorization: `Bearer ${jwt}` },
      ),
    );
    expect(keys.pubSignKey.policy.con).toEqual([{ t: EMAIL, v: sender }]);
    expect(keys.privSignKey).toBeUndefined();
  });

  it('a privSignId entry with a value selects nothing (pg-pkg rule), and nothing gets no private key', async () => {
    const jwt = await sessionJwt(
      '/v2/irma',
      { con: [{ t: EMAIL, v: sender }, { t: FULLNAME }] },
      { [EMAIL]: sender, [FULLNAME]: 'Bob Example' },
    );
    const keys = await json(
      await post(
        '/v2/irma/sign/key',
        { pubSignId: [{ t: EMAIL }], privSignId: [{ t: FULLNAME, v: 'Bob Example' }] },
        { authorization: `Bearer ${jwt}` },
      ),
    );
    // pg-pkg would sign for the empty private identity; a key that names nobody is not issued.
    expect(keys.privSignKey).toBeUndefined();
    expect(keys.pubSignKey.policy.con).toEqual([{ t: EMAIL, v: sender }]);
  });
});
