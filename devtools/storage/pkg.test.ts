import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sealAs, startFakePkg, type FakePkg } from '../../client/testing.js';
import { startStorage } from './testing.js';

/** The storage stand-in talking to a PKG: the verifying key at start-up and API-key tiers at init. */

let pkg: FakePkg;
beforeAll(async () => {
  pkg = await startFakePkg();
});
afterAll(() => pkg.close());

const initBody = JSON.stringify({ recipient: 'bob@example.org', mailContent: '', mailLang: 'EN', confirm: false });

/** Sends a 2000-byte first chunk to a store whose default cap is 1000 bytes. */
async function bigFirstChunk(storageUrl: string, authorization?: string) {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (authorization !== undefined) headers['authorization'] = authorization;
  const init = await fetch(`${storageUrl}/fileupload/init`, { method: 'POST', headers, body: initBody });
  expect(init.status).toBe(200);
  const { uuid } = (await init.json()) as { uuid: string };
  return fetch(`${storageUrl}/fileupload/${uuid}`, {
    method: 'PUT',
    headers: { cryptifytoken: init.headers.get('cryptifytoken')!, 'content-range': 'bytes 0-2000/*' },
    body: new Uint8Array(2000),
  });
}

describe('API-key tiers', () => {
  it('a key the PKG validates lifts the per-upload cap; a rejected or absent key does not', async () => {
    const storage = await startStorage({ pkgUrl: pkg.url, perUploadLimit: 1000, apiKeyPerUploadLimit: 10_000 });
    try {
      expect((await bigFirstChunk(storage.url, `Bearer ${pkg.apiKey}`)).status).toBe(200);
      expect((await bigFirstChunk(storage.url, `bearer ${pkg.apiKey}`)).status).toBe(200);
      expect((await bigFirstChunk(storage.url, 'Bearer PG-not-a-real-key')).status).toBe(413);
      expect((await bigFirstChunk(storage.url, `Bearer ${pkg.apiKey.slice(3)}`)).status).toBe(413);
      expect((await bigFirstChunk(storage.url)).status).toBe(413);
    } finally {
      await storage.close();
    }
  });

  it('answers 503 instead of 413 when a key was sent but the PKG could not be asked', async () => {
    const storage = await startStorage({
      pkgUrl: 'http://127.0.0.1:9',
      verifyingKey: pkg.keys.vk,
      perUploadLimit: 1000,
    });
    try {
      expect(await (await bigFirstChunk(storage.url, `Bearer ${pkg.apiKey}`)).text()).toBe(
        'an internal error occurred',
      );
      expect((await bigFirstChunk(storage.url, `Bearer ${pkg.apiKey}`)).status).toBe(503);
      expect((await bigFirstChunk(storage.url)).status).toBe(413);
    } finally {
      await storage.close();
    }
  });
});

describe('verifying key', () => {
  it('is fetched from the PKG at start-up when not given, and finalize then verifies the sender', async () => {
    const storage = await startStorage({ pkgUrl: `${pkg.url}/` });
    try {
      const message = await sealAs('alice@example.org', new Uint8Array(100));
      const init = await fetch(`${storage.url}/fileupload/init`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ recipient: 'bob@example.org', mailContent: '', mailLang: 'EN', confirm: true }),
      });
      const { uuid } = (await init.json()) as { uuid: string };
      const chunk = await fetch(`${storage.url}/fileupload/${uuid}`, {
        method: 'PUT',
        headers: { cryptifytoken: init.headers.get('cryptifytoken')!, 'content-range': `bytes 0-${message.length}/*` },
        body: message,
      });
      const done = await fetch(`${storage.url}/fileupload/finalize/${uuid}`, {
        method: 'POST',
        headers: { cryptifytoken: chunk.headers.get('cryptifytoken')!, 'content-range': `bytes */${message.length}` },
      });
      expect(done.status).toBe(200);
      // notifyRecipients defaults to true at Cryptify: one recipient mail and the confirmation.
      expect((await storage.outbox()).map((m) => [m.kind, m.to, m.senderVerified])).toEqual([
        ['recipient', 'bob@example.org', true],
        ['confirmation', 'alice@example.org', true],
      ]);
    } finally {
      await storage.close();
    }
  });

  it('start-up fails when the PKG never answers within the budget', async () => {
    await expect(startStorage({ pkgUrl: 'http://127.0.0.1:9', pkgStartupTimeoutMs: 600 })).rejects.toThrow(
      /verifying key/,
    );
  });
});
