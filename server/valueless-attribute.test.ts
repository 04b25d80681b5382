import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InputError, Unsealer, seal, sealStream, type Policy, type SealOptions } from '../lib/index.js';
import { extractSigningKey, extractUsk, generateSigningKeys } from '../lib/keys.js';
import { loadPgWasm, type PgWasm } from '../test/pgwasm.js';
import { chunkedSource, collector } from '../test/streams.js';
import { disclose } from '../devtools/standin/wallet.js';
import { startPkg, type RunningPkg } from './testing.js';

/**
 * A recipient attribute without a value ({t} and no v). pg-wasm 0.5.10 seals it; but our PKG
 * issues user keys for the values a disclosure proved, so no key it hands out, through the
 * stand-in identity server as a client would ask (the hidden policy's types, any value), opens
 * such a file: a wallet that discloses a value gets a key for that value, and one that discloses
 * nothing gets no key. Our seal therefore refuses such a policy (INVALID_POLICY), and our
 * unsealers still read the files pg-wasm makes.
 */

const EMAIL = 'irma-demo.sidn-pbdf.email.email';
const SURNAME = 'irma-demo.gemeente.personalData.surname';
const BOB = 'bob@example.org';
const plain = new TextEncoder().encode('for Bob');

let pkg: RunningPkg;
let pg: PgWasm;
let mpk: string;
const signer = (() => {
  const ibs = generateSigningKeys();
  const policy = { ts: 1_700_000_000, con: [{ t: EMAIL, v: 'sender@example.org' }] };
  return { vk: ibs.vk, pubSignKey: { key: extractSigningKey(ibs.sk, policy), policy } };
})();

beforeAll(async () => {
  pg = await loadPgWasm();
  pkg = await startPkg();
  mpk = ((await (await fetch(`${pkg.url}/v2/parameters`)).json()) as { publicKey: string }).publicKey;
});
afterAll(() => pkg?.close());

/** The recipient's side: a session for the hidden policy's attributes, the wallet disclosing `values`, then key/{ts}. */
async function keyFromPkg(hidden: Policy, values: Record<string, string | null>): Promise<string | undefined> {
  const started = await fetch(`${pkg.url}/v2/irma/start`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ con: hidden.con.map(({ t }) => ({ t })), validity: 600 }),
  });
  expect(started.status).toBe(200);
  const session = (await started.json()) as { token: string };
  await disclose(session, values);
  const jwt = await (await fetch(`${pkg.url}/v2/irma/jwt/${session.token}`)).text();
  const answer = await fetch(`${pkg.url}/v2/irma/key/${hidden.ts}`, { headers: { authorization: `Bearer ${jwt}` } });
  expect(answer.status).toBe(200);
  return ((await answer.json()) as { key?: string }).key;
}

describe('a recipient attribute without a value', () => {
  const cases: Array<[string, Policy['con'], Array<Record<string, string | null>>]> = [
    ['the only attribute', [{ t: EMAIL }], [{ [EMAIL]: BOB }, { [EMAIL]: '' }, { [EMAIL]: null }]],
    [
      'beside one with a value',
      [{ t: EMAIL, v: BOB }, { t: SURNAME }],
      [
        { [EMAIL]: BOB, [SURNAME]: 'Builder' },
        { [EMAIL]: BOB, [SURNAME]: null },
      ],
    ],
  ];

  for (const [name, con, disclosures] of cases) {
    it(`${name}: no key from our PKG opens pg-wasm's file, so our seal refuses it`, async () => {
      const ts = pkg.clock.now() - 60;
      const options: SealOptions = { policy: { [BOB]: { ts, con } }, pubSignKey: signer.pubSignKey };
      const theirs = await pg.seal(mpk, options, plain);

      // Our unsealer reads the header as pg-wasm does: the attribute has no value.
      const hidden = (await Unsealer.new(theirs, signer.vk)).inspect_header().get(BOB)!;
      expect(hidden).toEqual((await pg.Unsealer.new(theirs, signer.vk)).inspect_header().get(BOB));
      // pg-wasm's JS shape: `v` present and undefined.
      expect(hidden.con.filter((a) => 'v' in a && a.v === undefined)).toHaveLength(1);

      let keys = 0;
      for (const values of disclosures) {
        const usk = await keyFromPkg(hidden, values);
        if (usk === undefined) continue; // nothing disclosed for the attribute: no key at all
        keys++;
        await expect((await Unsealer.new(theirs, signer.vk)).unseal(BOB, usk)).rejects.toMatchObject({
          code: 'WRONG_KEY',
        });
        await expect((await pg.Unsealer.new(theirs, signer.vk)).unseal(BOB, usk)).rejects.toThrow();
      }
      expect(keys).toBeGreaterThan(0);

      // Only a key extracted for exactly that policy, which no PKG of ours hands out, opens it.
      const [got] = await (await Unsealer.new(theirs, signer.vk)).unseal(BOB, extractUsk(pkg.keys.msk, { ts, con }));
      expect(got).toEqual(plain);

      await expect(seal(mpk, options, plain)).rejects.toBeInstanceOf(InputError);
      await expect(seal(mpk, options, plain)).rejects.toMatchObject({
        code: 'INVALID_POLICY',
        message: expect.stringMatching(/has no value/),
      });
      const sink = collector();
      await expect(sealStream(mpk, options, chunkedSource(plain), sink.writable)).rejects.toMatchObject({
        code: 'INVALID_POLICY',
      });
      expect(sink.chunks).toEqual([]);
    });
  }

  it('an empty value is a value: sealed, and opened with the key for it', async () => {
    const ts = pkg.clock.now() - 60;
    const con = [
      { t: EMAIL, v: BOB },
      { t: SURNAME, v: '' },
    ];
    const ct = await seal(mpk, { policy: { [BOB]: { ts, con } }, pubSignKey: signer.pubSignKey }, plain);
    const [got] = await (await Unsealer.new(ct, signer.vk)).unseal(BOB, extractUsk(pkg.keys.msk, { ts, con }));
    expect(got).toEqual(plain);
  });
});
