import { PostGuard } from '../../client/index.js';
import { readZip } from '../../client/testing.js';
import { expectSameBytes } from './bytes.js';
import { EMAIL, FILES, RECIPIENT, SENDER, UPLOAD_CHUNK, fileBytes } from './files.js';
import { expect, openPage, pgjsReceive, pgjsSend, test } from './fixtures.js';
import { openWithLibrary } from './open-library.js';
import { API_KEY_SENDER } from './stack.js';

/**
 * Interop both ways with the published @e4a/pg-js 1.6.0, in a real browser, through our PKG, the
 * stand-in identity server and the storage stand-in (issue 23): pg-js uploads, we open by uuid;
 * we upload, pg-js opens by uuid. pg-js signs and decrypts with its session callback (no Yivi
 * widget), the stand-in's wallet disclosing from the page. Exact bytes of every file both ways.
 */

/** Each file of a bundle, by name, compared with what the other side started from. */
function expectTheFiles(zip: Uint8Array): void {
  const entries = readZip(zip);
  expect([...entries.keys()]).toEqual(FILES.map((f) => f.name));
  for (const spec of FILES) expectSameBytes(entries.get(spec.name), fileBytes(spec), spec.name);
}

test('pg-js uploads three files signed by a session; we download them by uuid and open them', async ({
  tab,
  interop,
}) => {
  await openPage(tab, interop);
  const sent = await pgjsSend(tab, interop);

  // One signing session, for the sender's address, through the PKG's /v2/request routes.
  expect(sent.sessions).toEqual([{ con: [{ t: EMAIL, v: SENDER }], sort: 'Signing' }]);
  expect(sent.progress.at(-1)).toBe(100);

  const opened = await openWithLibrary(interop, sent.uuid, RECIPIENT);
  expect(opened.recipients).toEqual([RECIPIENT]);
  expect(opened.result.public.con).toEqual([{ t: EMAIL, v: SENDER }]);
  expect(opened.result.contentSigner).toBe('public');
  // pg-js 1.x seals the older format: the sender is not also sealed inside the encryption.
  expect(opened.result.bound).toBe(false);
  expectTheFiles(opened.plaintext);
});

test('we upload three files signed by an API key; pg-js downloads them by uuid and opens them', async ({
  tab,
  interop,
}) => {
  const pg = new PostGuard({
    pkgUrl: interop.pkgUrl,
    storageUrl: interop.storageUrl,
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
  // pg-js asks the session for the recipient's address from the hidden policy, through /v2/irma.
  expect(received.sessions).toEqual([
    { con: [{ t: EMAIL, v: RECIPIENT }], sort: 'Decryption', hints: [{ t: EMAIL, v: RECIPIENT }] },
  ]);
  // pg-js gets the sender from pg-wasm as a policy ({ts, con}), but reads an e-mail only from a
  // {public: {con}} shape: its `sender.email` is null for every file, its own included.
  expect(received.sender?.raw).toMatchObject({ con: [{ t: EMAIL, v: API_KEY_SENDER }] });
  expect(received.sender?.email).toBeNull();
  expect(received.files).toEqual(FILES.map((f) => f.name));
  expectTheFiles(new Uint8Array(Buffer.from(received.zip, 'base64')));
});
