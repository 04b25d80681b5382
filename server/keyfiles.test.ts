import { mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode } from 'postguard-ts';
import { decodePkgKeyFiles, encodePkgKeyFiles, generatePkgKeys, type PkgKeys } from 'postguard-ts/keys';
import { unb64, unhex, vectors } from '../test/vectors.js';
import { DEFAULT_PKG_KEY_PATHS, readPkgKeys, writePkgKeys, type PkgKeyPaths } from './keyfiles.js';

const keys = vectors.keys;
const zB64 = Buffer.from(keys.ibs_master_secret_z_le_hex, 'hex').toString('base64');

function expectCode(f: () => unknown, code: string, message: RegExp): void {
  let thrown: unknown;
  try {
    f();
  } catch (error) {
    thrown = error;
  }
  expect(thrown).toMatchObject({ code });
  expect((thrown as Error).message).toMatch(message);
}

describe('pg-pkg key files', () => {
  let dir: string;
  let n = 0;
  const pathsIn = (d: string): PkgKeyPaths => ({
    ibePublic: join(d, 'pkg_ibe.pub'),
    ibeSecret: join(d, 'pkg_ibe.sec'),
    ibsPublic: join(d, 'pkg_ibs.pub'),
    ibsSecret: join(d, 'pkg_ibs.sec'),
  });
  const fresh = async () => {
    const d = join(dir, String(n++));
    await mkdir(d);
    return pathsIn(d);
  };
  const vectorKeys: PkgKeys = { mpk: keys.mpk_b64, msk: keys.msk_b64, vk: keys.vk_b64, sk: zB64 };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'pg-keys-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("uses pg-pkg's default file names", () => {
    expect(DEFAULT_PKG_KEY_PATHS).toEqual({
      ibePublic: './pkg_ibe.pub',
      ibeSecret: './pkg_ibe.sec',
      ibsPublic: './pkg_ibs.pub',
      ibsSecret: './pkg_ibs.sec',
    });
  });

  it('files hold the raw encodings: 672, 512, 32 and 32 bytes', () => {
    const files = encodePkgKeyFiles(vectorKeys);
    expect(files.ibePublic).toEqual(unb64(keys.mpk_b64));
    expect(files.ibeSecret).toEqual(unb64(keys.msk_b64));
    expect(files.ibsPublic).toEqual(unb64(keys.vk_b64));
    expect(files.ibsSecret).toEqual(unhex(keys.ibs_master_secret_z_le_hex));
    expect(decodePkgKeyFiles(files)).toEqual(vectorKeys);
  });

  it('write then read round-trips; files are 0600', async () => {
    const paths = await fresh();
    const generated = generatePkgKeys();
    await writePkgKeys(paths, generated);
    expect(await readPkgKeys(paths)).toEqual(generated);
    for (const p of Object.values(paths)) expect((await stat(p)).mode & 0o777).toBe(0o600);
    expect((await readFile(paths.ibsPublic)).length).toBe(32);
  });

  it('refuses to overwrite, leaving existing files untouched and no partial set', async () => {
    const paths = await fresh();
    await writeFile(paths.ibsPublic, 'existing');
    await expect(writePkgKeys(paths, vectorKeys)).rejects.toMatchObject({ code: 'EEXIST' });
    expect(await readdir(join(paths.ibsPublic, '..'))).toEqual(['pkg_ibs.pub']);
    expect(await readFile(paths.ibsPublic, 'utf8')).toBe('existing');
    const full = await fresh();
    await writePkgKeys(full, vectorKeys);
    await expect(writePkgKeys(full, generatePkgKeys())).rejects.toMatchObject({ code: 'EEXIST' });
    expect(await readPkgKeys(full)).toEqual(vectorKeys);
  });

  it('refuses to write malformed keys (nothing is created)', async () => {
    const paths = await fresh();
    await expect(writePkgKeys(paths, { ...vectorKeys, msk: 'nope' })).rejects.toMatchObject({
      code: ErrorCode.INVALID_KEY,
    });
    expect(await readdir(join(paths.ibePublic, '..'))).toEqual([]);
  });

  it('reading: wrong sizes, invalid keys and mismatched pairs → INVALID_KEY naming the file', async () => {
    const good = encodePkgKeyFiles(vectorKeys);
    const other = encodePkgKeyFiles(generatePkgKeys());
    const cases: Array<[Partial<typeof good>, RegExp]> = [
      [{ ibePublic: good.ibePublic.subarray(1) }, /IBE public key file: expected 672 bytes/],
      [{ ibeSecret: new Uint8Array(513) }, /IBE secret key file: expected 512 bytes/],
      [{ ibsPublic: new Uint8Array(33) }, /IBS public key file: expected 32 bytes/],
      [{ ibsSecret: new Uint8Array(0) }, /IBS secret key file: expected 32 bytes/],
      [{ ibePublic: new Uint8Array(672) }, /IBE public key file: .*G1 point/],
      [{ ibeSecret: new Uint8Array(512).fill(0xff) }, /IBE secret key file: .*scalar/],
      [{ ibsPublic: new Uint8Array(32).fill(0xff) }, /IBS public key file: .*ristretto255/],
      [{ ibsSecret: new Uint8Array(32).fill(0xff) }, /IBS secret key file: .*canonical/],
      [{ ibeSecret: other.ibeSecret }, /IBE public key file: does not belong/],
      [{ ibsSecret: other.ibsSecret }, /IBS public key file: does not belong/],
    ];
    for (const [patch, message] of cases) {
      expectCode(() => decodePkgKeyFiles({ ...good, ...patch }), ErrorCode.INVALID_KEY, message);
    }
    const paths = await fresh();
    await writePkgKeys(paths, vectorKeys);
    await rm(paths.ibsSecret);
    await writeFile(paths.ibsSecret, other.ibsSecret);
    await expect(readPkgKeys(paths)).rejects.toMatchObject({ code: ErrorCode.INVALID_KEY });
    await expect(readPkgKeys({ ...paths, ibePublic: join(dir, 'missing') })).rejects.toMatchObject({ code: 'ENOENT' });
  });
});
