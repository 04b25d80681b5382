import { describe, expect, it } from 'vitest';
import { keeperContract } from '../test/keeper-contract.js';
import { deviceKeyBox } from '../lib/pkg/secret-box.js';
import { memoryStore } from '../lib/pkg/store.js';
import { ClientError } from './errors.js';
import { keeperOver, memoryBackend, memoryKeeper, type KeeperBackend, type UploadRecord } from './keeper.js';

const record = (id: string, size: number): UploadRecord => ({ id, createdAt: Date.now(), size, recipients: ['a@b.c'] });

async function writeAll(stream: WritableStream<Uint8Array>, bytes: Uint8Array): Promise<void> {
  const writer = stream.getWriter();
  await writer.write(bytes);
  await writer.close();
}

describe('memoryKeeper', () => {
  it('keeps the keeper contract (test/keeper-contract.ts)', async () => {
    const backend = memoryBackend();
    const steps = await keeperContract(async (options) => keeperOver(backend, options));
    expect(steps).toHaveLength(10);
  });

  it('with a secret box the recovery token is stored sealed, bound to its upload; one that does not open is not resumed', async () => {
    const backend = memoryBackend();
    const keys = memoryStore();
    const keeper = keeperOver({ ...backend, secrets: deviceKeyBox(keys) });
    for (const id of ['a', 'b']) {
      await writeAll(await keeper.create(id), new Uint8Array(3));
      await keeper.save({ ...record(id, 3), recoveryToken: `recovery-token-of-${id}` });
    }
    const stored = await backend.listRecords();
    expect(JSON.stringify(stored)).not.toContain('recovery-token-of');
    expect((await keeper.list()).map((r) => r.recoveryToken)).toEqual(['recovery-token-of-a', 'recovery-token-of-b']);

    // a's sealed token copied into b's record: bound to a, it does not open as b's; b is dropped.
    const a = stored.find((r) => r.id === 'a')!.value as UploadRecord;
    await backend.saveRecord({
      ...(stored.find((r) => r.id === 'b')!.value as UploadRecord),
      recoveryToken: a.recoveryToken!,
    });
    expect((await keeper.list()).map((r) => r.id)).toEqual(['a']);
    expect(await keeper.open('b')).toBeUndefined();
    // A token in the clear (written by someone else) is not trusted; nor any once the key is gone.
    await backend.saveRecord({ ...record('c', 3), recoveryToken: 'clear' });
    expect((await keeper.list()).map((r) => r.id)).toEqual(['a']);
    await keys.delete('pg|device-key');
    // After a reload (a new box over the same store): the key is gone, so is every record.
    expect(await keeperOver({ ...backend, secrets: deviceKeyBox(keys) }).list()).toEqual([]);
  });

  it('is not persistent, and a new one starts empty', async () => {
    const keeper = memoryKeeper();
    expect(keeper.persistent).toBe(false);
    await writeAll(await keeper.create('x'), new Uint8Array(3));
    await keeper.save(record('x', 3));
    expect(await keeper.list()).toHaveLength(1);
    expect(await memoryKeeper().list()).toEqual([]);
  });

  it('copies what is written: a writer reusing its buffer does not change the kept bytes', async () => {
    const keeper = memoryKeeper();
    const writer = (await keeper.create('reuse')).getWriter();
    const buffer = new Uint8Array([1, 2, 3]);
    await writer.write(buffer);
    buffer.fill(9);
    await writer.write(buffer);
    await writer.close();
    const source = await keeper.open('reuse');
    expect([...(await source!.read(0, 6))]).toEqual([1, 2, 3, 9, 9, 9]);
  });

  it('refuses a grace period that is not a whole number of ms', () => {
    expect(() => memoryKeeper({ graceMs: -1 })).toThrow(ClientError);
    expect(() => memoryKeeper({ graceMs: Number.NaN })).toThrow(/graceMs/);
  });
});

describe('keeperOver', () => {
  it('removes damaged records (not an object, wrong id, from another version) and their bytes', async () => {
    const backend = memoryBackend();
    const keeper = keeperOver(backend);
    for (const id of ['good', 'renamed', 'garbage']) await writeAll(await keeper.create(id), new Uint8Array(4));
    await keeper.save(record('good', 4));
    await backend.saveRecord({ ...record('other', 4) } as UploadRecord);
    const stored = backend.listRecords;
    backend.listRecords = async () => [
      ...(await stored()),
      { id: 'renamed', value: record('other', 4) },
      { id: 'garbage', value: 'not a record' },
    ];
    expect((await keeper.list()).map((r) => r.id)).toEqual(['good']);
    backend.listRecords = stored;
    expect(await keeper.open('garbage')).toBeUndefined();
    expect(await keeper.open('renamed')).toBeUndefined();
    expect(await keeper.open('good')).toBeDefined();
  });

  it("types a backend's failures INPUT_FAILED, with the cause", async () => {
    const failing: KeeperBackend = {
      ...memoryBackend(),
      openBytes: async () => ({ size: 10, read: () => Promise.reject(new Error('disk on fire')) }),
      listRecords: () => Promise.reject(new DOMException('quota', 'QuotaExceededError')),
    };
    const keeper = keeperOver(failing);
    const source = await keeper.open('x');
    const error = await source!.read(0, 1).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'INPUT_FAILED', message: expect.stringMatching(/disk on fire/) });
    expect((error as Error).cause).toBeInstanceOf(Error);
    await expect(keeper.list()).rejects.toMatchObject({ code: 'INPUT_FAILED' });
  });

  it('a source that answers with another count is a source that changed', async () => {
    const keeper = keeperOver({
      ...memoryBackend(),
      openBytes: async () => ({ size: 10, read: async (_o, length) => new Uint8Array(length - 1) }),
    });
    await expect((await keeper.open('x'))!.read(0, 4)).rejects.toMatchObject({
      code: 'INPUT_FAILED',
      message: expect.stringMatching(/changed/),
    });
  });

  it('a read that never settles ends with ABORTED when its signal fires', async () => {
    const keeper = keeperOver({
      ...memoryBackend(),
      openBytes: async () => ({ size: 10, read: () => new Promise<Uint8Array>(() => undefined) }),
    });
    const controller = new AbortController();
    const pending = (await keeper.open('x'))!.read(0, 4, controller.signal);
    setTimeout(() => controller.abort(), 10);
    await expect(pending).rejects.toMatchObject({ code: 'ABORTED' });
  });
});

describe('records marked sealing', () => {
  it('are never resumable: list() leaves them out, list({ sealing: true }) gives only them, whatever their bytes', async () => {
    const keeper = memoryKeeper();
    await writeAll(await keeper.create('whole'), new Uint8Array(4));
    await keeper.save(record('whole', 4));
    await keeper.save({ ...record('sealing', 4), sealing: true });
    await writeAll(await keeper.create('sealed'), new Uint8Array(4));
    await keeper.save({ ...record('sealed', 4), sealing: true });
    expect((await keeper.list()).map((r) => r.id)).toEqual(['whole']);
    const sealing = await keeper.list({ sealing: true });
    expect(sealing.map((r) => [r.id, r.sealing]).sort()).toEqual([
      ['sealed', true],
      ['sealing', true],
    ]);
    // Saved again without the mark once the bytes are committed: resumable from then on.
    await keeper.save(record('sealed', 4));
    expect((await keeper.list()).map((r) => r.id).sort()).toEqual(['sealed', 'whole']);
    // Still there: listing does not remove a send being sealed within the grace.
    expect((await keeper.list({ sealing: true })).map((r) => r.id)).toEqual(['sealing']);
  });

  it('go with their bytes once the grace is over (a sealer that never came back)', async () => {
    const backend = memoryBackend();
    const keeper = keeperOver(backend, { graceMs: 0 });
    await writeAll(await keeper.create('old'), new Uint8Array(4));
    await keeper.save({ ...record('old', 4), createdAt: Date.now() - 1000, sealing: true });
    expect(await keeper.list({ sealing: true })).toEqual([]);
    expect(await backend.listRecords()).toEqual([]);
    expect(await backend.listBytes()).toEqual([]);
  });

  it('keep the mark as a boolean: anything else is INVALID_INPUT, false is dropped', async () => {
    const keeper = memoryKeeper();
    await expect(keeper.save({ ...record('x', 1), sealing: 'yes' as unknown as boolean })).rejects.toMatchObject({
      code: 'INVALID_INPUT',
    });
    await keeper.save({ ...record('y', 1), sealing: false });
    expect((await keeper.list({ sealing: true })).map((r) => r.id)).toEqual([]);
  });
});
