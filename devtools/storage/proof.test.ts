import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { sealStream, signChallenge } from '../../lib/index.js';
import { extractSigningKey, generateSigningKeys } from '../../lib/keys.js';
import { fakePkgKeys } from '../../client/testing.js';
import { collector } from '../../test/streams.js';
import { startStorage, uploadWhole, type RunningStorage } from './testing.js';

/**
 * Proof of possession at finalize (pg-js 2.5, pg-core 0.6.5): init hands out a 32-byte
 * challenge; finalize may carry X-PostGuard-Proof, base64 of signChallenge(sender key, upload
 * id, challenge). A proof that verifies marks the upload proven, none leaves it unproven, and a
 * proof that fails is refused with a JSON error while the upload stays for a retry with a good
 * proof; after a failed proof, a finalize without one is refused too.
 */

const EMAIL = 'pbdf.sidn-pbdf.email.email';
const keys = fakePkgKeys();
const ts = Math.floor(Date.now() / 1000);
const alice = { ts, con: [{ t: EMAIL, v: 'alice@example.org' }] };
const aliceKey = extractSigningKey(keys.sk, alice);
let storage: RunningStorage;
let file: Uint8Array<ArrayBuffer>;

beforeAll(async () => {
  storage = await startStorage({ verifyingKey: keys.vk, sessionTtlSeconds: 600 });
  const out = collector();
  const policy = { 'bob@example.org': { ts, con: [{ t: EMAIL, v: 'bob@example.org' }] } };
  await sealStream(
    keys.mpk,
    { policy, pubSignKey: { key: aliceKey, policy: alice } },
    new Blob([new Uint8Array(5000)]).stream(),
    out.writable,
  );
  file = out.bytes() as Uint8Array<ArrayBuffer>;
});
afterAll(() => storage.close());
beforeEach(() => fetch(`${storage.url}/standin/outbox`, { method: 'DELETE' }));

/** An upload of `file` (to bob, who is told), its one chunk sent, not finalized. */
const uploaded = () => uploadWhole(storage.url, file, { notifyRecipients: true });

const finalize = (upload: { uuid: string; token: string }, proof?: string) =>
  fetch(`${storage.url}/fileupload/finalize/${upload.uuid}`, {
    method: 'POST',
    headers: {
      cryptifytoken: upload.token,
      'content-range': `bytes */${file.length}`,
      ...(proof === undefined ? {} : { 'x-postguard-proof': proof }),
    },
  });

const b64 = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64');
const proven = async () => (await storage.outbox()).map((m) => m.senderProven);

describe('proof of possession at finalize', () => {
  it('a proof by the sender over this upload and its challenge: finalized, proven', async () => {
    const upload = await uploaded();
    const response = await finalize(upload, b64(signChallenge(aliceKey, upload.uuid, upload.challenge)));
    expect(response.status).toBe(200);
    expect(new Set(await proven())).toEqual(new Set([true]));
  });

  it('no proof: finalized, unproven (older clients)', async () => {
    const upload = await uploaded();
    expect((await finalize(upload)).status).toBe(200);
    expect(new Set(await proven())).toEqual(new Set([false]));
  });

  it('a failing proof is refused with a JSON error and the upload kept: a good proof then finalizes it', async () => {
    const upload = await uploaded();
    const other = await uploaded();
    const stranger = extractSigningKey(generateSigningKeys().sk, alice);
    const bobKey = extractSigningKey(keys.sk, { ts, con: [{ t: EMAIL, v: 'bob@example.org' }] });
    const bad = [
      b64(signChallenge(aliceKey, other.uuid, upload.challenge)), // another upload's id
      b64(signChallenge(aliceKey, upload.uuid, other.challenge)), // another challenge
      b64(signChallenge(bobKey, upload.uuid, upload.challenge)), // not the sender
      b64(signChallenge(stranger, upload.uuid, upload.challenge)), // another PKG's key
      'not base64!',
      b64(new Uint8Array(96)),
    ];
    for (const proof of bad) {
      const response = await finalize(upload, proof);
      expect(response.status, proof).toBe(403);
      expect(await response.json()).toEqual({ error: 'proof_invalid', message: expect.any(String) });
    }
    expect(await storage.outbox()).toEqual([]);
    const good = await finalize(upload, b64(signChallenge(aliceKey, upload.uuid, upload.challenge)));
    expect(good.status).toBe(200);
    expect(new Set(await proven())).toEqual(new Set([true]));
  });

  it('a failed proof is sticky: finalize without a proof is refused from then on, a good proof still passes', async () => {
    const upload = await uploaded();
    const failed = await finalize(upload, b64(new Uint8Array(96)));
    expect(failed.status).toBe(403);
    for (let attempt = 0; attempt < 2; attempt++) {
      const unproven = await finalize(upload);
      expect(unproven.status).toBe(403);
      expect(await unproven.json()).toEqual({ error: 'proof_invalid', message: expect.stringMatching(/failed/) });
    }
    expect(await storage.outbox()).toEqual([]);
    expect((await storage.upload(upload.uuid))?.session?.finalized).toBe(0);

    const good = await finalize(upload, b64(signChallenge(aliceKey, upload.uuid, upload.challenge)));
    expect(good.status).toBe(200);
    // Finalized once, proven; an unproven finalize afterwards is still refused.
    expect((await finalize(upload)).status).toBe(403);
    expect(await proven()).toEqual([true]);
  });

  it('a second finalize sends no mail and counts nothing again', async () => {
    const upload = await uploaded();
    const proof = b64(signChallenge(aliceKey, upload.uuid, upload.challenge));
    expect((await finalize(upload, proof)).status).toBe(200);
    expect((await finalize(upload, proof)).status).toBe(200);
    expect((await finalize(upload)).status).toBe(200);
    expect(await proven()).toEqual([true]);
  });

  it('the quota is charged to the sender only with a proof: a copy of their file uploaded by anyone else does not lock them out', async () => {
    const small = await startStorage({ verifyingKey: keys.vk, sessionTtlSeconds: 600, rollingLimit: file.length + 10 });
    try {
      const up = () => uploadWhole(small.url, file, { notifyRecipients: true });
      const at = (upload: { uuid: string; token: string }, proof?: string) =>
        fetch(`${small.url}/fileupload/finalize/${upload.uuid}`, {
          method: 'POST',
          headers: {
            cryptifytoken: upload.token,
            'content-range': `bytes */${file.length}`,
            ...(proof === undefined ? {} : { 'x-postguard-proof': proof }),
          },
        });
      // A replay of alice's file without her key: charged to the uploader's address, not to alice.
      expect((await at(await up())).status).toBe(200);
      // Alice, proving her key, still has her whole quota...
      const mine = await up();
      expect((await at(mine, b64(signChallenge(aliceKey, mine.uuid, mine.challenge)))).status).toBe(200);
      // ...which her proven upload used: the next one is over it; and the replayer's address is spent too.
      const again = await up();
      expect((await at(again, b64(signChallenge(aliceKey, again.uuid, again.challenge)))).status).toBe(413);
      expect((await at(await up())).status).toBe(413);
    } finally {
      await small.close();
    }
  });

  it('another upload is not affected by a failed proof', async () => {
    const upload = await uploaded();
    const other = await uploaded();
    expect((await finalize(upload, 'not base64!')).status).toBe(403);
    expect((await finalize(other)).status).toBe(200);
  });

  it('without a verifying key a proof cannot be checked: refused, and then so is the unproven finalize', async () => {
    const keyed = storage;
    storage = await startStorage({});
    try {
      const upload = await uploaded();
      const response = await finalize(upload, b64(signChallenge(aliceKey, upload.uuid, upload.challenge)));
      expect(response.status).toBe(403);
      expect((await finalize(upload)).status).toBe(403);
      expect(await storage.outbox()).toEqual([]);
    } finally {
      await storage.close();
      storage = keyed;
    }
  });
});
