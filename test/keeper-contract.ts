import {
  DIGEST_PIECE,
  pieceDigest,
  type KeeperOptions,
  type UploadKeeper,
  type UploadRecord,
} from '../client/keeper.js';

/**
 * The contract of an upload keeper (client/keeper.ts), as one body that runs anywhere: in Vitest
 * against the memory and file keepers (client/keeper.test.ts, sdk/file-keeper.test.ts) and in each
 * browser engine against browserKeeper (e2e/engines/keeper.spec.ts). It imports no test framework:
 * a broken rule throws an Error naming it. `make` opens a keeper over the same storage every time
 * it is called (a persistent one sees what the last one left); the storage starts empty.
 */

export type MakeKeeper = (options?: KeeperOptions) => Promise<UploadKeeper>;

/** Sizes that make the pieces of every backend meet inside a read: 5 MiB, 1 byte, 4 MiB + 3. */
export const CONTRACT_PIECES = [5 * 1024 * 1024, 1, 4 * 1024 * 1024 + 3];

/** `length` bytes of a sequence that differs at every offset of a piece boundary (xorshift from `seed`). */
export function patterned(length: number, seed: number): Uint8Array {
  return fillPattern(new Uint8Array(length), seed);
}

/** `out` filled with {@link patterned}'s bytes for `seed`, without allocating. */
export function fillPattern(out: Uint8Array, seed: number): Uint8Array {
  let x = seed | 1;
  for (let i = 0; i < out.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

class ContractError extends Error {}

function ok(condition: boolean, rule: string): asserts condition {
  if (!condition) throw new ContractError(`keeper contract: ${rule}`);
}

/** JSON with every object's keys sorted: a keeper need not keep a record's key order. */
const canonical = (value: unknown): string =>
  JSON.stringify(value, (_, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([x], [y]) => (x < y ? -1 : 1)))
      : v,
  );

function sameJson(actual: unknown, expected: unknown, rule: string): void {
  const a = canonical(actual);
  const e = canonical(expected);
  ok(a === e, `${rule}: got ${a}, expected ${e}`);
}

function sameBytes(actual: Uint8Array, expected: Uint8Array, rule: string): void {
  ok(actual instanceof Uint8Array, `${rule}: not a Uint8Array`);
  ok(actual.length === expected.length, `${rule}: ${actual.length} bytes, expected ${expected.length}`);
  for (let i = 0; i < expected.length; i++)
    if (actual[i] !== expected[i]) ok(false, `${rule}: first difference at byte ${i}`);
}

async function failsWith(run: () => Promise<unknown>, code: string, rule: string): Promise<void> {
  let thrown: unknown;
  try {
    await run();
  } catch (e) {
    thrown = e;
  }
  ok(thrown !== undefined, `${rule}: did not fail`);
  const got = (thrown as { code?: unknown }).code;
  ok(got === code, `${rule}: failed with ${String(got)} (${String(thrown)}), expected ${code}`);
}

/** Writes `pieces` (fresh arrays) to a new writable of `id`; closes it unless told not to. */
async function write(keeper: UploadKeeper, id: string, pieces: Uint8Array[], close = true) {
  const writer = (await keeper.create(id)).getWriter();
  for (const piece of pieces) await writer.write(piece);
  if (close) await writer.close();
  return writer;
}

function joined(pieces: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(pieces.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of pieces) out.set(p, (at += p.length) - p.length);
  return out;
}

const recordOf = (id: string, size: number, createdAt = Date.now()): UploadRecord => ({
  id,
  createdAt,
  size,
  recipients: ['alice@example.org', 'example.com'],
  label: 'report.pdf, photo.jpg',
  notify: { recipients: true, sender: false, message: 'hoi', language: 'NL' },
});

/**
 * Runs the contract. Returns the rules it checked, in order (so a caller can see it ran them all).
 * `log` is told each step as it starts.
 */
export async function keeperContract(
  make: MakeKeeper,
  log: (step: string) => void = () => undefined,
): Promise<string[]> {
  const steps: string[] = [];
  const step = (name: string) => {
    steps.push(name);
    log(name);
  };
  const keeper = await make();
  sameJson(await keeper.list(), [], 'a fresh keeper lists nothing');

  step('three pieces written, then read back by spans across their boundaries');
  const pieces = CONTRACT_PIECES.map((n, i) => patterned(n, 7 + i));
  const whole = joined(pieces);
  const writer = await write(keeper, 'first', pieces, false);
  ok((await keeper.open('first')) === undefined, 'bytes are not visible before the writable closes');
  await writer.close();
  const source = await keeper.open('first');
  ok(source !== undefined, 'closed bytes can be opened');
  ok(source.size === whole.length, `size ${source.size}, expected ${whole.length}`);
  const [a, b] = CONTRACT_PIECES as [number, number, number];
  for (const [offset, length] of [
    [0, 10],
    [a - 3, 7],
    [a, 1],
    [4 * 1024 * 1024 - 2, 4],
    [8 * 1024 * 1024 - 5, 11],
    [a + b, 5],
    [whole.length - 9, 9],
    [17, 0],
    [0, whole.length],
  ] as const)
    sameBytes(await source.read(offset, length), whole.subarray(offset, offset + length), `bytes ${offset}+${length}`);

  step('reads outside the bytes and aborted reads fail with their codes');
  await failsWith(() => source.read(whole.length - 1, 2), 'INVALID_INPUT', 'a read past the end');
  await failsWith(() => source.read(-1, 1), 'INVALID_INPUT', 'a negative offset');
  await failsWith(() => source.read(0, 1, AbortSignal.abort()), 'ABORTED', 'a read with an aborted signal');

  step('a saved record is listed once its bytes are whole, oldest first, with the digests of its bytes; save replaces');
  const digestsOf = async (bytes: Uint8Array) => {
    const out: string[] = [];
    for (let at = 0; at < bytes.length; at += DIGEST_PIECE)
      out.push(await pieceDigest(bytes.subarray(at, at + DIGEST_PIECE)));
    return out;
  };
  const saved = recordOf('first', whole.length);
  await keeper.save(saved);
  const first = { ...saved, digests: await digestsOf(whole) };
  sameJson(await keeper.list(), [first], 'the record of whole bytes');
  const small = [patterned(1000, 3)];
  await write(keeper, 'older', small);
  const savedOlder = recordOf('older', 1000, first.createdAt - 1000);
  await keeper.save(savedOlder);
  const older = { ...savedOlder, digests: await digestsOf(small[0]!) };
  sameJson(
    (await keeper.list()).map((r) => r.id),
    ['older', 'first'],
    'oldest first',
  );
  const updated = {
    ...first,
    uuid: 'c8f9a3e0-1d2b-4c5d-8e6f-0123456789ab',
    recoveryToken: 't0k',
    chunkSize: 5_000_000,
    proof: 'p',
  };
  await keeper.save(updated);
  sameJson((await keeper.list()).at(-1), updated, 'the replaced record');

  step('another keeper over the same storage sees the same (persistent keepers)');
  if (keeper.persistent) {
    const again = await make();
    sameJson(await again.list(), [older, updated], 'the list seen anew');
    const reopened = await again.open('first');
    ok(reopened !== undefined && reopened.size === whole.length, 'the bytes seen anew');
    sameBytes(await reopened.read(a - 1, 2), whole.subarray(a - 1, a + 1), 'bytes seen anew');
  }

  step('remove takes the record and the bytes');
  await keeper.remove('older');
  sameJson(
    (await keeper.list()).map((r) => r.id),
    ['first'],
    'after remove',
  );
  ok((await keeper.open('older')) === undefined, 'removed bytes cannot be opened');
  await keeper.remove('never-there');

  step('abort removes the bytes, earlier committed ones included');
  const aborting = await write(keeper, 'aborted', [patterned(3000, 5)], false);
  await aborting.abort(new Error('cancelled'));
  ok((await keeper.open('aborted')) === undefined, 'no bytes after an abort');
  await write(keeper, 'aborted', [patterned(10, 5)]);
  await (await write(keeper, 'aborted', [patterned(20, 5)], false)).abort();
  ok((await keeper.open('aborted')) === undefined, 'an abort removes earlier bytes of the id');

  step('a short file is dropped from the list and removed');
  await write(keeper, 'short', [patterned(10, 9)]);
  await keeper.save(recordOf('short', 11));
  sameJson(
    (await keeper.list()).map((r) => r.id),
    ['first'],
    'the short one is not listed',
  );
  ok((await keeper.open('short')) === undefined, 'the short bytes are gone');
  await write(keeper, 'short', [patterned(11, 9)]);
  sameJson(
    (await keeper.list()).map((r) => r.id),
    ['first'],
    'its record is gone too',
  );
  await keeper.remove('short');

  step('missing bytes: hidden while young (still being written), removed when old');
  await keeper.save(recordOf('young', 4));
  sameJson(
    (await keeper.list()).map((r) => r.id),
    ['first'],
    'a young record without bytes is hidden',
  );
  await write(keeper, 'young', [patterned(4, 1)]);
  sameJson(
    (await keeper.list()).map((r) => r.id),
    ['first', 'young'],
    'then listed once its bytes came',
  );
  await keeper.save(recordOf('stale', 4, Date.now() - 2 * 24 * 60 * 60 * 1000));
  sameJson(
    (await keeper.list()).map((r) => r.id),
    ['first', 'young'],
    'an old record without bytes is dropped',
  );
  await write(keeper, 'stale', [patterned(4, 1)]);
  sameJson(
    (await keeper.list()).map((r) => r.id),
    ['first', 'young'],
    'and was removed',
  );
  ok((await keeper.open('stale')) !== undefined, 'young bytes without a record stay (their record may come)');

  step('bad input is INVALID_INPUT');
  for (const id of ['', '../x', 'a/b', 'a.b', 'x'.repeat(129), 7 as unknown as string])
    await failsWith(() => keeper.create(id), 'INVALID_INPUT', `create(${JSON.stringify(id)})`);
  await failsWith(() => keeper.open('..'), 'INVALID_INPUT', 'open("..")');
  await failsWith(() => keeper.remove('/'), 'INVALID_INPUT', 'remove("/")');
  for (const [what, record] of [
    ['no recipients', { ...first, recipients: undefined }],
    ['size 0', { ...first, size: 0 }],
    ['a fractional size', { ...first, size: 1.5 }],
    ['a numeric uuid', { ...first, uuid: 5 }],
    ['another language', { ...first, notify: { language: 'DE' } }],
    ['a huge label', { ...first, label: 'x'.repeat(300_000) }],
    ['null', null],
  ] as const)
    await failsWith(() => keeper.save(record as unknown as UploadRecord), 'INVALID_INPUT', `save with ${what}`);
  const typed = (await keeper.create('typed')).getWriter();
  await failsWith(() => typed.write('text' as unknown as Uint8Array), 'INVALID_INPUT', 'a chunk that is not bytes');
  ok((await keeper.open('typed')) === undefined, 'a failed write commits nothing');

  step('after the grace period, bytes without a record are removed');
  await new Promise((resolve) => setTimeout(resolve, 30));
  const impatient = await make({ graceMs: 0 });
  sameJson(
    (await impatient.list()).map((r) => r.id),
    ['first', 'young'],
    'the uploads stay',
  );
  ok((await impatient.open('stale')) === undefined, 'the unrecorded bytes are gone');

  for (const id of ['first', 'young', 'typed', 'aborted']) await keeper.remove(id);
  sameJson(await keeper.list(), [], 'empty at the end');
  return steps;
}
