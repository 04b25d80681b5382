import { chmod, mkdtemp, readFile, readdir, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { keeperContract, patterned } from '../test/keeper-contract.js';
import { expectSameBytes } from '../test/bytes.js';
import { fileKeeper } from './file-keeper.js';
import { TOKEN_KEY_ENV, defaultTokenKeyFile } from './token-key.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'pg-file-keeper-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const record = (id: string, size: number) => ({ id, createdAt: Date.now(), size, recipients: ['a@b.c'] });

async function keep(keeper: ReturnType<typeof fileKeeper>, id: string, bytes: Uint8Array) {
  const writer = (await keeper.create(id)).getWriter();
  await writer.write(bytes);
  await writer.close();
  await keeper.save(record(id, bytes.length));
}

describe('fileKeeper', () => {
  it('keeps the keeper contract (test/keeper-contract.ts), in a folder it makes', async () => {
    const folder = join(dir, 'nested', 'uploads');
    const steps = await keeperContract(async (options) => fileKeeper(folder, options));
    expect(steps).toHaveLength(10);
    expect(await readdir(folder)).toEqual([]);
  });

  it('a process that dies mid-write leaves only a .part: nothing listed, and the sweep removes it', async () => {
    const keeper = fileKeeper(dir);
    const writer = (await keeper.create('crashed')).getWriter();
    await writer.write(patterned(1000, 1));
    await keeper.save(record('crashed', 2000));
    expect(await readdir(dir)).toEqual(
      expect.arrayContaining([expect.stringMatching(/^crashed\.pgenc\.[\da-f]{16}\.part$/)]),
    );
    const after = fileKeeper(dir);
    expect(await after.list()).toEqual([]);
    expect(await after.open('crashed')).toBeUndefined();
    await new Promise((resolve) => setTimeout(resolve, 20));
    await fileKeeper(dir, { graceMs: 0 }).list();
    expect(await readdir(dir)).toEqual([]);
    await writer.abort();
  });

  it('bytes cut short on disk are dropped from the list, with their record', async () => {
    const keeper = fileKeeper(dir);
    await keep(keeper, 'cut', patterned(5000, 2));
    await keep(keeper, 'whole', patterned(10, 3));
    await truncate(join(dir, 'cut.pgenc'), 4096);
    expect((await keeper.list()).map((r) => r.id)).toEqual(['whole']);
    expect((await readdir(dir)).sort()).toEqual(['whole.json', 'whole.pgenc']);
  });

  it('damaged records (not JSON, not a record, too large) are removed with their bytes', async () => {
    const keeper = fileKeeper(dir);
    for (const id of ['text', 'shape', 'huge']) await keep(keeper, id, patterned(8, 4));
    await keep(keeper, 'fine', patterned(8, 4));
    await writeFile(join(dir, 'text.json'), '{"id":');
    await writeFile(join(dir, 'shape.json'), JSON.stringify({ id: 'shape', size: 'eight' }));
    await writeFile(join(dir, 'huge.json'), JSON.stringify({ ...record('huge', 8), label: 'x'.repeat(300_000) }));
    expect((await keeper.list()).map((r) => r.id)).toEqual(['fine']);
    expect((await readdir(dir)).sort()).toEqual(['fine.json', 'fine.pgenc']);
  });

  it('a read after the file was replaced fails INPUT_FAILED instead of mixing two files', async () => {
    const keeper = fileKeeper(dir);
    const first = patterned(100_000, 5);
    await keep(keeper, 'swap', first);
    const source = await keeper.open('swap');
    expectSameBytes(await source!.read(10, 1000), first.subarray(10, 1010));
    await keep(keeper, 'swap', patterned(100_000, 6));
    await expect(source!.read(10, 1000)).rejects.toMatchObject({
      code: 'INPUT_FAILED',
      message: expect.stringMatching(/changed/),
    });
    await rm(join(dir, 'swap.pgenc'));
    await expect(source!.read(0, 1)).rejects.toMatchObject({ code: 'INPUT_FAILED' });
  });

  it('only its own names count: other files in the folder are left alone', async () => {
    await writeFile(join(dir, 'notes.txt'), 'mine');
    await writeFile(join(dir, 'a.b.pgenc'), 'x');
    const keeper = fileKeeper(dir, { graceMs: 0 });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await keeper.list()).toEqual([]);
    expect((await readdir(dir)).sort()).toEqual(['a.b.pgenc', 'notes.txt']);
  });

  it('a commit that fails (the folder went away) is INPUT_FAILED, and leaves nothing open or behind', async () => {
    const folder = join(dir, 'gone');
    const keeper = fileKeeper(folder);
    const writer = (await keeper.create('lost')).getWriter();
    await writer.write(patterned(100, 1));
    await rm(folder, { recursive: true });
    await expect(writer.close()).rejects.toMatchObject({ code: 'INPUT_FAILED' });
    expect(await keeper.list()).toEqual([]);
    expect(await readdir(folder)).toEqual([]);
  });

  it('refuses a folder that is not a path', () => {
    expect(() => fileKeeper('')).toThrow(expect.objectContaining({ code: 'INVALID_INPUT' }));
  });
});

describe('fileKeeper: the recovery token at rest', () => {
  const withToken = (id: string) => ({ ...record(id, 3), recoveryToken: `recovery-token-of-${id}` });

  it('is sealed under a key kept apart: the folder holds no byte of it; the same key resumes, another does not', async () => {
    const key = crypto.getRandomValues(new Uint8Array(32));
    const keeper = fileKeeper(dir, { tokenKey: key });
    const writer = (await keeper.create('a')).getWriter();
    await writer.write(new Uint8Array(3));
    await writer.close();
    await keeper.save(withToken('a'));
    for (const name of await readdir(dir))
      expect(await readFile(join(dir, name), 'latin1'), name).not.toContain('recovery-token-of');
    expect((await fileKeeper(dir, { tokenKey: key }).list()).map((r) => r.recoveryToken)).toEqual([
      'recovery-token-of-a',
    ]);
    // Another key (the folder copied elsewhere): the token does not open, so the upload is not resumed.
    expect(await fileKeeper(dir, { tokenKey: crypto.getRandomValues(new Uint8Array(32)) }).list()).toEqual([]);
  });

  it('a key file is made 0600 in a 0700 folder; one others can read, or of the wrong size, stops the keeper and removes nothing', async () => {
    const file = join(dir, 'keys', 'keeper.key');
    const folder = join(dir, 'uploads');
    const keeper = fileKeeper(folder, { tokenKey: { file } });
    await keep(keeper, 'a', new Uint8Array(3));
    await keeper.save(withToken('a'));
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect((await stat(join(dir, 'keys'))).mode & 0o777).toBe(0o700);
    expect(await fileKeeper(folder, { tokenKey: { file } }).list()).toHaveLength(1);
    await chmod(file, 0o644);
    await expect(fileKeeper(folder, { tokenKey: { file } }).list()).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    await chmod(file, 0o600);
    await writeFile(file, new Uint8Array(31));
    await expect(fileKeeper(folder, { tokenKey: { file } }).open('a')).rejects.toMatchObject({
      code: 'INVALID_INPUT',
    });
    await expect(fileKeeper(folder, { tokenKey: new Uint8Array(16) }).list()).rejects.toMatchObject({
      code: 'INVALID_INPUT',
    });
    expect((await readdir(folder)).sort()).toEqual(['a.json', 'a.pgenc']);
  });

  it('by default the key comes from POSTGUARD_KEEPER_KEY, else a key file in the configuration folder, never the folder itself', async () => {
    expect(defaultTokenKeyFile({ XDG_CONFIG_HOME: '/cfg' })).toBe('/cfg/postguard-ts/keeper.key');
    const saved = { env: process.env[TOKEN_KEY_ENV], xdg: process.env['XDG_CONFIG_HOME'] };
    try {
      process.env['XDG_CONFIG_HOME'] = join(dir, 'config');
      const folder = join(dir, 'uploads');
      await keep(fileKeeper(folder), 'a', new Uint8Array(3));
      await fileKeeper(folder).save(withToken('a'));
      expect((await stat(join(dir, 'config', 'postguard-ts', 'keeper.key'))).size).toBe(32);
      expect(await readdir(folder)).not.toContain('keeper.key');
      process.env[TOKEN_KEY_ENV] = Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64');
      expect(await fileKeeper(folder).list()).toEqual([]); // another key: not resumed
    } finally {
      for (const [name, value] of [
        [TOKEN_KEY_ENV, saved.env],
        ['XDG_CONFIG_HOME', saved.xdg],
      ] as const)
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
    }
  });
});
