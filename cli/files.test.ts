import { mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CliError, Exit } from './exit.js';
import { READ_CHUNK_BYTES, createAtomicOutput, openInput, refuseExisting, removeTempFilesSync } from './files.js';

let dir: string;
let n = 0;
const fresh = (name = 'f') => join(dir, `${name}-${++n}`);

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'pg-cli-files-'));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function fileError(promise: Promise<unknown>): Promise<string> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(CliError);
  expect((error as CliError).exitCode).toBe(Exit.FILE);
  return (error as CliError).message;
}

async function drain(stream: ReadableStream<Uint8Array>): Promise<Uint8Array[]> {
  const chunks: Uint8Array[] = [];
  const reader = stream.getReader();
  for (let next = await reader.read(); !next.done; next = await reader.read()) chunks.push(next.value);
  return chunks;
}

const write = async (writable: WritableStream<Uint8Array>, chunks: Uint8Array[]): Promise<void> => {
  const writer = writable.getWriter();
  for (const chunk of chunks) await writer.write(chunk);
  await writer.close();
};

const names = async () => (await readdir(dir)).sort();

describe('openInput', () => {
  it('reads the file in chunks of at most READ_CHUNK_BYTES, reporting each', async () => {
    const path = fresh();
    const bytes = new Uint8Array(2 * READ_CHUNK_BYTES + 5).map((_, i) => i % 251);
    await writeFile(path, bytes);
    const input = await openInput(path);
    expect(input.size).toBe(bytes.length);
    const seen: number[] = [];
    const chunks = await drain(input.readable((k) => seen.push(k)));
    expect(chunks.map((c) => c.length)).toEqual([READ_CHUNK_BYTES, READ_CHUNK_BYTES, 5]);
    expect(seen).toEqual([READ_CHUNK_BYTES, READ_CHUNK_BYTES, 5]);
    expect(Buffer.concat(chunks).equals(Buffer.from(bytes))).toBe(true);
  });

  it('an empty file is an empty stream', async () => {
    const path = fresh();
    await writeFile(path, '');
    expect(await drain((await openInput(path)).readable())).toEqual([]);
  });

  it('says why it cannot read: missing, a directory', async () => {
    const missing = fresh('missing');
    expect(await fileError(openInput(missing))).toBe(`cannot read ${missing}: no such file`);
    const sub = fresh('dir');
    await mkdir(sub);
    expect(await fileError(openInput(sub))).toBe(`cannot read ${sub}: is a directory`);
  });

  it('errors the stream with the abort reason once the signal fires', async () => {
    const path = fresh();
    await writeFile(path, new Uint8Array(3 * READ_CHUNK_BYTES));
    const controller = new AbortController();
    const reader = (await openInput(path)).readable(undefined, controller.signal).getReader();
    expect((await reader.read()).done).toBe(false);
    controller.abort('SIGINT');
    await expect(reader.read()).rejects.toBe('SIGINT');
  });
});

describe('refuseExisting', () => {
  it('passes a free path, refuses an existing one unless forced', async () => {
    const path = fresh();
    await refuseExisting(path, false);
    await writeFile(path, 'x');
    expect(await fileError(refuseExisting(path, false))).toBe(`${path} already exists (use --force to overwrite it)`);
    await refuseExisting(path, true);
  });
});

describe('createAtomicOutput', () => {
  it('writes to a hidden temporary file and publishes it only on commit', async () => {
    const path = fresh('out');
    const out = await createAtomicOutput(path, { force: false, mode: 0o600 });
    await write(out.writable, [new TextEncoder().encode('hello '), new TextEncoder().encode('world')]);
    expect(await names()).toContain(out.tempPath.slice(dir.length + 1));
    await expect(stat(path)).rejects.toThrow();
    await out.commit();
    expect(await readFile(path, 'utf8')).toBe('hello world');
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect((await names()).filter((f) => f.includes('partial'))).toEqual([]);
    await out.discard(); // after commit: nothing to do, the file stays
    expect(await readFile(path, 'utf8')).toBe('hello world');
  });

  it('discard removes the temporary file and publishes nothing', async () => {
    const path = fresh('out');
    const out = await createAtomicOutput(path, { force: false, mode: 0o666 });
    await out.writable.getWriter().write(new Uint8Array(10));
    await out.discard();
    await out.discard();
    expect((await names()).filter((f) => f.includes('partial'))).toEqual([]);
    await expect(stat(path)).rejects.toThrow();
  });

  it('does not clobber a file that appeared meanwhile unless forced', async () => {
    const path = fresh('out');
    const out = await createAtomicOutput(path, { force: false, mode: 0o666 });
    await write(out.writable, [new Uint8Array([1, 2, 3])]);
    await writeFile(path, 'theirs');
    expect(await fileError(out.commit())).toBe(`${path} already exists (use --force to overwrite it)`);
    expect(await readFile(path, 'utf8')).toBe('theirs');
    expect((await names()).filter((f) => f.includes('partial'))).toEqual([]);

    const forced = await createAtomicOutput(path, { force: true, mode: 0o666 });
    await write(forced.writable, [new TextEncoder().encode('ours')]);
    await forced.commit();
    expect(await readFile(path, 'utf8')).toBe('ours');
  });

  it('cannot write in a directory that does not exist: a FILE error', async () => {
    const path = join(fresh('nodir'), 'out');
    expect(await fileError(createAtomicOutput(path, { force: false, mode: 0o666 }))).toMatch(
      /^cannot write in .*: no such file$/,
    );
  });

  it('removeTempFilesSync (the signal handler) removes every live temporary file at once', async () => {
    const a = await createAtomicOutput(fresh('sig'), { force: false, mode: 0o666 });
    const b = await createAtomicOutput(fresh('sig'), { force: false, mode: 0o666 });
    const done = await createAtomicOutput(fresh('sig'), { force: false, mode: 0o666 });
    await write(done.writable, [new Uint8Array(1)]);
    await done.commit();
    expect((await names()).filter((f) => f.includes('partial'))).toHaveLength(2);
    removeTempFilesSync();
    expect((await names()).filter((f) => f.includes('partial'))).toEqual([]);
    expect(await readFile(done.path)).toHaveLength(1);
    await a.discard();
    await b.discard();
  });
});
