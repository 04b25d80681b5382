import { createHash } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fakePkgKeys, sealAs } from '../../client/testing.js';
import { manualClock } from '../standin/testing.js';
import { startStorage, type RunningStorage } from './testing.js';

/**
 * The storage stand-in's own bounds, beyond Cryptify's, over real HTTP: at most
 * maxUnfinalizedUploads uploads begun and not finalized (503 beyond), and an upload not finalized
 * within unfinalizedTtlSeconds of its init expires with its partial file, however active it is.
 */

const keys = fakePkgKeys();
const clock = manualClock(1_800_000_000);
let storage: RunningStorage;
let message: Uint8Array<ArrayBuffer>;
const dataDir = () => storage.dataDir;

beforeAll(async () => {
  storage = await startStorage({
    verifyingKey: keys.vk,
    clock,
    sessionTtlSeconds: 600,
    unfinalizedTtlSeconds: 100,
    maxUnfinalizedUploads: 2,
  });
  message = await sealAs('alice@example.org', new Uint8Array(2000).fill(7));
});
afterAll(() => storage.close());

const init = () =>
  fetch(`${storage.url}/fileupload/init`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      recipient: 'bob@example.org',
      mailContent: 'x',
      mailLang: 'EN',
      confirm: false,
      notifyRecipients: false,
    }),
  });

async function begin(): Promise<{ uuid: string; token: string; recovery: string }> {
  const response = await init();
  expect(response.status).toBe(200);
  const json = (await response.json()) as { uuid: string; recovery_token: string };
  return { uuid: json.uuid, token: response.headers.get('cryptifytoken')!, recovery: json.recovery_token };
}

async function uploadAndFinalize(uuid: string, token: string): Promise<void> {
  const put = await fetch(`${storage.url}/fileupload/${uuid}`, {
    method: 'PUT',
    headers: {
      'content-type': 'application/octet-stream',
      cryptifytoken: token,
      'content-range': `bytes 0-${message.length}/*`,
    },
    body: message,
  });
  expect(put.status).toBe(200);
  const next = put.headers.get('cryptifytoken')!;
  expect(next).toBe(createHash('sha256').update(token).update(message).digest('hex'));
  const done = await fetch(`${storage.url}/fileupload/finalize/${uuid}`, {
    method: 'POST',
    headers: { cryptifytoken: next, 'content-range': `bytes */${message.length}` },
  });
  expect(done.status).toBe(200);
}

const status = (uuid: string, recovery: string) =>
  fetch(`${storage.url}/fileupload/${uuid}/status`, { headers: { 'x-recovery-token': recovery } });

describe('unfinalized uploads', () => {
  it('are capped: init beyond the cap is 503 with Retry-After and creates no file; finalizing one makes room', async () => {
    const first = await begin();
    const second = await begin();
    const files = (await readdir(dataDir())).length;
    const refused = await init();
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('60');
    expect(await refused.text()).toBe('too many uploads in progress');
    expect((await readdir(dataDir())).length).toBe(files);
    // A finalized upload no longer counts.
    await uploadAndFinalize(first.uuid, first.token);
    const third = await begin();
    expect((await init()).status).toBe(503);
    // Expired ones make room too (clean-up for the next test).
    clock.advance(101);
    expect((await status(second.uuid, second.recovery)).status).toBe(404);
    expect((await status(third.uuid, third.recovery)).status).toBe(404);
  });

  it('expire unfinalized after the TTL from init, however active, and take their partial file with them', async () => {
    const upload = await begin();
    const finished = await begin();
    await uploadAndFinalize(finished.uuid, finished.token);
    const put = await fetch(`${storage.url}/fileupload/${upload.uuid}`, {
      method: 'PUT',
      headers: {
        'content-type': 'application/octet-stream',
        cryptifytoken: upload.token,
        'content-range': 'bytes 0-100/*',
      },
      body: message.subarray(0, 100),
    });
    expect(put.status).toBe(200);
    clock.advance(60);
    expect((await status(upload.uuid, upload.recovery)).status).toBe(200); // activity, but not a reprieve
    clock.advance(41);
    const gone = await status(upload.uuid, upload.recovery);
    expect(gone.status).toBe(404);
    expect(await gone.json()).toMatchObject({ reason: 'expired_or_unknown' });
    await expect.poll(async () => (await readdir(dataDir())).includes(upload.uuid)).toBe(false);
    expect((await fetch(`${storage.url}/filedownload/${upload.uuid}`)).status).toBe(404);
    // A finalized upload is not subject to it: its session and its file stay.
    expect((await status(finished.uuid, finished.recovery)).status).toBe(200);
    expect((await fetch(`${storage.url}/filedownload/${finished.uuid}`)).status).toBe(200);
  });
});
