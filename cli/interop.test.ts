import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadPgWasm, type PgWasm } from '../test/pgwasm.js';
import { chunkedSource } from '../test/streams.js';
import { disclose, type AttributeValues } from '../devtools/standin/wallet.js';
import { startPkg, type RunningPkg } from '../server/testing.js';
import { realClock, runCliProcess } from './testing.js';

/**
 * pg-cli and the reference implementation (@e4a/pg-wasm 0.5.10) open each other's files. The keys
 * the test hands pg-wasm come from the same PKG through the real session flow, as a pg-wasm
 * application would get them.
 */

const EMAIL = 'irma-demo.sidn-pbdf.email.email';
const FULLNAME = 'irma-demo.gemeente.personalData.fullname';
const ALICE = 'alice@example.org';
const BOB = 'bob@example.org';

let pkg: RunningPkg;
let pg: PgWasm;
let dir: string;

beforeAll(async () => {
  pg = await loadPgWasm();
  pkg = await startPkg({ clock: realClock() });
  dir = await mkdtemp(join(tmpdir(), 'pg-cli-interop-'));
});

afterAll(async () => {
  await pkg?.close();
  await rm(dir, { recursive: true, force: true });
});

/** start → the wallet discloses → the session-result JWT. */
async function sessionJwt(con: unknown[], attributes: AttributeValues): Promise<string> {
  const started = await fetch(`${pkg.url}/v2/irma/start`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ con }),
  });
  expect(started.status).toBe(200);
  const session = await started.json();
  expect((await disclose(session, attributes)).proofStatus).toBe('VALID');
  return (await fetch(`${pkg.url}/v2/irma/jwt/${session.token}`)).text();
}

/** Several segments plus a partial one, with content that differs per position. */
const content = (): Uint8Array => new Uint8Array(3 * 256 * 1024 + 1234).map((_, i) => (i * 31 + (i >> 10)) & 0xff);

const collect = () => {
  const parts: Uint8Array[] = [];
  return {
    writable: new WritableStream<Uint8Array>({ write: (c) => void parts.push(c.slice()) }),
    bytes: () => Buffer.concat(parts),
  };
};

describe('pg-cli ↔ @e4a/pg-wasm 0.5.10', () => {
  it('pg-cli dec opens a file sealed by pg-wasm with the PKG-issued signing keys', async () => {
    const jwt = await sessionJwt([{ t: EMAIL }, { t: FULLNAME }], { [EMAIL]: ALICE, [FULLNAME]: 'Alice Archer' });
    const signing = await fetch(`${pkg.url}/v2/irma/sign/key`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${jwt}` },
      body: JSON.stringify({ pubSignId: [{ t: EMAIL }], privSignId: [{ t: FULLNAME }] }),
    });
    const keys = await signing.json();
    const mpk = (await (await fetch(`${pkg.url}/v2/parameters`)).json()).publicKey;
    const plain = content();
    const sealed = collect();
    const ts = Math.floor(Date.now() / 1000) - 5;
    await pg.sealStream(
      mpk,
      {
        policy: { [BOB]: { ts, con: [{ t: EMAIL, v: BOB }] } },
        pubSignKey: keys.pubSignKey,
        privSignKey: keys.privSignKey,
      },
      chunkedSource(plain, 100_000),
      sealed.writable,
    );
    const file = join(dir, 'from-pgwasm.bin.enc');
    await writeFile(file, sealed.bytes());

    const opened = await runCliProcess(['dec', '--pkg', pkg.url, '--json', file], {
      wallet: (s) => disclose(s, { [EMAIL]: BOB }),
    });
    expect(opened.stderr).not.toMatch(/error/);
    expect(opened.code).toBe(0);
    expect(Buffer.compare(await readFile(join(dir, 'from-pgwasm.bin')), Buffer.from(plain))).toBe(0);
    const result = JSON.parse(opened.stdout);
    expect(result.signedBy.public).toEqual(keys.pubSignKey.policy);
    expect(result.signedBy.private).toEqual(keys.privSignKey.policy);
  });

  it('pg-wasm opens a file made by pg-cli enc, with a USK from the session flow', async () => {
    const plain = content();
    const file = join(dir, 'from-cli.bin');
    await writeFile(file, plain);
    const sealed = await runCliProcess(
      [
        'enc',
        '--pkg',
        pkg.url,
        '-i',
        JSON.stringify({ [BOB]: [{ t: EMAIL, v: BOB }] }),
        '-P',
        JSON.stringify([{ t: EMAIL }]),
        file,
      ],
      {
        wallet: (s) => disclose(s, { [EMAIL]: ALICE }),
      },
    );
    expect(sealed.code).toBe(0);

    const vk = (await (await fetch(`${pkg.url}/v2/sign/parameters`)).json()).publicKey;
    const unsealer = await pg.StreamUnsealer.new(chunkedSource(await readFile(`${file}.enc`), 65_536), vk);
    const hidden = unsealer.inspect_header().get(BOB) as { ts: number; con: unknown[] };
    expect(hidden.con).toEqual([{ t: EMAIL, v: '' }]);
    expect(unsealer.public_identity()).toMatchObject({ con: [{ t: EMAIL, v: ALICE }] });

    const jwt = await sessionJwt([{ t: EMAIL, v: BOB }], { [EMAIL]: BOB });
    const key = await (
      await fetch(`${pkg.url}/v2/irma/key/${hidden.ts}`, { headers: { authorization: `Bearer ${jwt}` } })
    ).json();
    expect(key.status).toBe('DONE');
    const opened = collect();
    const verified = (await unsealer.unseal(BOB, key.key, opened.writable)) as { public: { con: unknown[] } };
    expect(Buffer.compare(opened.bytes(), Buffer.from(plain))).toBe(0);
    expect(verified.public.con).toEqual([{ t: EMAIL, v: ALICE }]);
  });

  it("a file in pg-wasm's in-memory mode is refused with exit 3 and a clear reason, before any session", async () => {
    const mpk = (await (await fetch(`${pkg.url}/v2/parameters`)).json()).publicKey;
    const jwt = await sessionJwt([{ t: EMAIL }], { [EMAIL]: ALICE });
    const keys = await (
      await fetch(`${pkg.url}/v2/irma/sign/key`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${jwt}` },
        body: JSON.stringify({ pubSignId: [{ t: EMAIL }] }),
      })
    ).json();
    const ts = Math.floor(Date.now() / 1000) - 5;
    const sealed = await pg.seal(
      mpk,
      { policy: { [BOB]: { ts, con: [{ t: EMAIL, v: BOB }] } }, pubSignKey: keys.pubSignKey },
      new TextEncoder().encode('in memory'),
    );
    const file = join(dir, 'in-memory.txt.enc');
    await writeFile(file, sealed);
    const opened = await runCliProcess(['dec', '--pkg', pkg.url, file], {
      wallet: (s) => disclose(s, { [EMAIL]: BOB }),
    });
    expect(opened.code).toBe(3);
    expect(opened.stderr).toBe(
      "pg-cli: error: the file was sealed in PostGuard's in-memory mode; pg-cli reads streaming-mode files, as PostGuard's pg-cli does\n",
    );
    expect(opened.sessions).toEqual([]);
  });
});
