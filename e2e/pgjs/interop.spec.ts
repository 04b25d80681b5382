import { PostGuard } from '../../client/index.js';
import { readZip } from '../../client/testing.js';
import { expectSameBytes } from './bytes.js';
import { EMAIL, FILES, RECIPIENT, SENDER, UPLOAD_CHUNK, fileBytes } from './files.js';
import { expect, openPage, oursOpenInPage, oursSendInPage, pgjsReceive, pgjsSend, test } from './fixtures.js';
import { openWithClient } from './open-client.js';
import { API_KEY_SENDER } from './stack.js';

/**
 * Interop both ways with the published @e4a/pg-js 1.6.0, in a real browser, through our PKG, the
 * stand-in identity server and the storage stand-in in strict mode (issue 23): pg-js uploads and
 * our client opens by uuid, in the page and in Node; our client uploads, in the page (signed by a
 * session) and in Node (by an API key), and pg-js opens by uuid. pg-js signs and decrypts with
 * its session callback (no Yivi widget), the stand-in's wallet disclosing from the page. Exact
 * bytes of every file, every way.
 */

const NAMES = FILES.map((f) => f.name);
const fromBase64 = (text: string) => new Uint8Array(Buffer.from(text, 'base64'));

/** Each file of a bundle, by name, compared with what the other side started from. */
function expectTheFiles(zip: Uint8Array): void {
  const entries = readZip(zip);
  expect([...entries.keys()]).toEqual(NAMES);
  for (const spec of FILES) expectSameBytes(entries.get(spec.name), fileBytes(spec), spec.name);
}

/** Our signing session, and pg-js's: one, for the sender's address. */
const SIGNING = [{ con: [{ t: EMAIL, v: SENDER }], sort: 'Signing' }];
/** pg-js's decryption session (ours sends the same): the recipient's address from the hidden policy. */
const DECRYPTION = [{ con: [{ t: EMAIL, v: RECIPIENT }], sort: 'Decryption', hints: [{ t: EMAIL, v: RECIPIENT }] }];

test('pg-js uploads three files signed by a session; our client opens them by uuid, in the page and in Node', async ({
  tab,
  interop,
}) => {
  await openPage(tab, interop);
  const sent = await pgjsSend(tab, interop);
  expect(sent.sessions).toEqual(SIGNING);
  expect(sent.progress.at(-1)).toBe(100);

  // In the page: cross-origin to the strict storage, the crypto in the crypto worker.
  const inPage = await oursOpenInPage(tab, interop, sent.uuid);
  expect(inPage.recipients).toEqual([RECIPIENT]);
  expect(inPage.claimed).toEqual({ standing: 'claimed', con: [[{ t: EMAIL, v: SENDER }]] });
  // File by file, our ZIP reader on the bundle pg-js wrote (conflux's ZIP): the same files, same bytes.
  expect(inPage.entries.map((e) => [e.name, e.size])).toEqual(FILES.map((f) => [f.name, f.size]));
  for (const [i, spec] of FILES.entries())
    expectSameBytes(fromBase64(inPage.entries[i]!.bytes), fileBytes(spec), spec.name);
  // Whole, the signatures hold to the last segment; pg-js 1.x seals the older format, where the
  // sender is not also sealed inside the encryption.
  expect(inPage.sender).toEqual({ standing: 'older-format', con: [[{ t: EMAIL, v: SENDER }]] });
  expectTheFiles(fromBase64(inPage.zip));
  // A session callback runs for each decryption: as in pg-js, enableCache keeps only the keys of
  // sessions the client runs itself (the Node read below shows its session once).
  expect(inPage.sessions).toEqual([...DECRYPTION, ...DECRYPTION]);

  // In Node (the inline engine, no CORS): the same.
  const inNode = await openWithClient(interop, sent.uuid, RECIPIENT);
  expect(inNode.recipients).toEqual([RECIPIENT]);
  expect([...inNode.entries.keys()]).toEqual(NAMES);
  for (const spec of FILES) expectSameBytes(inNode.entries.get(spec.name), fileBytes(spec), spec.name);
  expect(inNode.sender.standing).toBe('older-format');
  expectTheFiles(inNode.zip);
  expect(inNode.sessions).toBe(1);
});

test('our client in the page uploads three files signed by a session; pg-js opens them by uuid', async ({
  tab,
  interop,
}) => {
  await openPage(tab, interop);
  const sent = await oursSendInPage(tab, interop);
  expect(sent.sessions).toEqual(SIGNING);

  const received = await pgjsReceive(tab, interop, sent.uuid);
  expect(received.recipients).toEqual([RECIPIENT]);
  expect(received.sessions).toEqual(DECRYPTION);
  // pg-js gets the sender from pg-wasm as a policy ({ts, con}) but reads an e-mail only from a
  // {public: {con}} shape: its `sender.email` is null for every file, its own included.
  expect(received.sender?.raw).toMatchObject({ con: [{ t: EMAIL, v: SENDER }] });
  expect(received.sender?.email).toBeNull();
  expect(received.files).toEqual(NAMES);
  expectTheFiles(fromBase64(received.zip));
});

test('our client in Node uploads three files signed by an API key; pg-js opens them by uuid', async ({
  tab,
  interop,
}) => {
  const pg = new PostGuard({
    pkgUrl: interop.pkgUrl,
    cryptifyUrl: interop.storageUrl,
    allowInsecureUrls: true,
    uploadChunkSize: UPLOAD_CHUNK,
  });
  const { uuid } = await pg
    .encrypt({
      files: FILES.map((spec) => ({ name: spec.name, content: fileBytes(spec) })),
      recipients: [pg.recipient.email(RECIPIENT)],
      sign: pg.sign.apiKey(interop.apiKey),
    })
    .upload();

  await openPage(tab, interop);
  const received = await pgjsReceive(tab, interop, uuid);
  expect(received.recipients).toEqual([RECIPIENT]);
  expect(received.sessions).toEqual(DECRYPTION);
  expect(received.sender?.raw).toMatchObject({ con: [{ t: EMAIL, v: API_KEY_SENDER }] });
  expect(received.files).toEqual(NAMES);
  expectTheFiles(fromBase64(received.zip));
});
