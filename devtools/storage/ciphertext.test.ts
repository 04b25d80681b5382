import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seal, sealStream } from '../../lib/index.js';
import { extractSigningKey, generateSigningKeys } from '../../lib/keys.js';
import { fakePkgKeys, sealAs } from '../../client/testing.js';
import { collector } from '../../test/streams.js';
import { startStorage, type RunningStorage } from './testing.js';

/**
 * Finalize reads the sender from the uploaded header. Bytes that cannot name a sender (not
 * PostGuard, an in-memory file, a header signed under another PKG's key, a sender without the
 * e-mail attribute) are the uploader's problem: 422 with a JSON reason, nothing recorded. Cryptify
 * answers 500 here; a client cannot tell that from an outage. Failures of the service itself stay 500.
 */

const EMAIL = 'pbdf.sidn-pbdf.email.email';
const keys = fakePkgKeys();
const ts = Math.floor(Date.now() / 1000);
const alice = { ts, con: [{ t: EMAIL, v: 'alice@example.org' }] };
const policy = { 'bob@example.org': { ts, con: [{ t: EMAIL, v: 'bob@example.org' }] } };
const plain = new Uint8Array(3000).fill(7);

let keyed: RunningStorage;
let keyless: RunningStorage;
let stream: Uint8Array<ArrayBuffer>;
let inMemory: Uint8Array<ArrayBuffer>;
let otherPkg: Uint8Array<ArrayBuffer>;

beforeAll(async () => {
  keyed = await startStorage({ verifyingKey: keys.vk });
  keyless = await startStorage({});
  stream = await sealAs('alice@example.org', plain);
  inMemory = (await seal(
    keys.mpk,
    { policy, pubSignKey: { key: extractSigningKey(keys.sk, alice), policy: alice } },
    plain,
  )) as Uint8Array<ArrayBuffer>;
  const stranger = generateSigningKeys();
  const out = collector();
  await sealStream(
    keys.mpk,
    { policy, pubSignKey: { key: extractSigningKey(stranger.sk, alice), policy: alice } },
    new Blob([plain]).stream(),
    out.writable,
  );
  otherPkg = out.bytes() as Uint8Array<ArrayBuffer>;
});
afterAll(async () => {
  await keyed.close();
  await keyless.close();
});

/** init, one chunk, then finalize (after `between`, if given). */
async function upload(
  storage: RunningStorage,
  bytes: Uint8Array<ArrayBuffer>,
  between?: (uuid: string) => Promise<void>,
) {
  const init = await fetch(`${storage.url}/fileupload/init`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ recipient: 'bob@example.org', mailContent: '', mailLang: 'EN', confirm: true }),
  });
  const { uuid } = (await init.json()) as { uuid: string };
  const put = await fetch(`${storage.url}/fileupload/${uuid}`, {
    method: 'PUT',
    headers: { cryptifytoken: init.headers.get('cryptifytoken')!, 'content-range': `bytes 0-${bytes.length}/*` },
    body: bytes,
  });
  expect(put.status).toBe(200);
  await between?.(uuid);
  return fetch(`${storage.url}/fileupload/finalize/${uuid}`, {
    method: 'POST',
    headers: { cryptifytoken: put.headers.get('cryptifytoken')!, 'content-range': `bytes */${bytes.length}` },
  });
}

async function refused(response: Response, reason: RegExp): Promise<void> {
  expect(response.status).toBe(422);
  expect(response.headers.get('content-type')).toMatch(/^application\/json/);
  const body = (await response.json()) as { error: string; message: string };
  expect(body).toEqual({ error: 'ciphertext_invalid', message: expect.stringMatching(reason) });
}

describe('finalize refuses bytes that name no sender with 422', () => {
  it('a well-formed stream signed under the configured key finalizes', async () => {
    expect((await upload(keyed, stream)).status).toBe(200);
    expect((await upload(keyless, stream)).status).toBe(200);
  });

  it('an in-memory PostGuard file, with or without a verifying key', async () => {
    await refused(await upload(keyed, inMemory), /in-memory/);
    await refused(await upload(keyless, inMemory), /in-memory/);
  });

  it("a header signature that does not verify under the PKG's key", async () => {
    await refused(await upload(keyed, otherPkg), /signature does not verify/);
    // The recipient id in the header changed (bob@ → cob@): still well-formed, no longer signed.
    const altered = stream.slice();
    altered[Buffer.from(altered).indexOf('bob@example.org')] = 'c'.charCodeAt(0);
    await refused(await upload(keyed, altered), /signature does not verify/);
  });

  it('bytes that are not PostGuard, or end inside the header', async () => {
    for (const storage of [keyed, keyless]) {
      await refused(await upload(storage, new Uint8Array(1000).fill(1)), /NOT_POSTGUARD/);
      await refused(await upload(storage, stream.slice(0, 100)), /ends inside the PostGuard header/);
    }
  });

  it('a sender without the configured e-mail attribute', async () => {
    const strict = await startStorage({ verifyingKey: keys.vk, emailAttribute: 'irma-demo.sidn-pbdf.email.email' });
    try {
      await refused(await upload(strict, stream), /has no irma-demo\.sidn-pbdf\.email\.email attribute/);
      expect(await strict.outbox()).toEqual([]);
    } finally {
      await strict.close();
    }
  });

  it('records nothing for a refused upload', async () => {
    await fetch(`${keyed.url}/standin/outbox`, { method: 'DELETE' });
    await upload(keyed, inMemory);
    await upload(keyed, otherPkg);
    expect(await keyed.outbox()).toEqual([]);
  });

  it("the service's own failure (the stored file gone) is still a 500", async () => {
    const response = await upload(keyed, stream, (uuid) => rm(join(keyed.dataDir, uuid)));
    expect(response.status).toBe(500);
    expect(await response.text()).toBe('an internal error occurred');
  });
});
