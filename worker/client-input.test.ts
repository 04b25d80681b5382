import { expose } from 'comlink';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InputError } from '../lib/errors.js';
import type { SealOptions } from '../lib/index.js';
import { EMAIL, bob, boom, kem, plain, pubSignKey, throwing } from '../test/seal-options.js';
import { chunkedSource, collector } from '../test/streams.js';
import { PostGuardWorker } from './client.js';
import { cryptoWorkerApi } from './worker-api.js';

/**
 * Seal options that cannot be copied to the worker, through the client over comlink in Node (one end
 * of a MessageChannel serves worker-api.ts, as in worker/client.test.ts): a typed InputError, as the
 * library gives in-process, never the raw throw of structured clone (a getter's error, RangeError,
 * DataCloneError); sealStream also aborts the sink and cancels the source with it. The copy is made
 * on the caller's side, before anything is posted, so a real module worker changes nothing here.
 */

let pg: PostGuardWorker;
let close: () => void;
beforeAll(() => {
  const { port1, port2 } = new MessageChannel();
  expose(cryptoWorkerApi(), port1);
  pg = new PostGuardWorker({ endpoint: port2 as never });
  close = () => (port1.close(), port2.close());
});
afterAll(() => close());

/** Both worker sealers reject with an InputError of `code` (message matching); the streams are ended with it. */
async function refusedThroughWorker(
  worker: PostGuardWorker,
  options: () => unknown,
  code: string,
  message: RegExp,
): Promise<InputError> {
  let memory: Promise<unknown> | undefined;
  // A rejected promise, not a synchronous throw.
  expect(() => (memory = worker.seal(kem.mpk, options() as SealOptions, plain))).not.toThrow();
  const error = await memory!.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(InputError);
  expect(error).toMatchObject({ code, message: expect.stringMatching(message) });

  const sink = collector();
  let cancelled: unknown;
  const source = new ReadableStream<Uint8Array>({
    cancel: (reason) => void (cancelled = reason),
  });
  const streamed = await worker.sealStream(kem.mpk, options() as SealOptions, source, sink.writable).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(streamed).toBeInstanceOf(InputError);
  expect(streamed).toMatchObject({ code, message: expect.stringMatching(message) });
  expect(sink.chunks).toEqual([]);
  expect(sink.state()).toBe('aborted');
  expect(sink.abortReason()).toBe(streamed);
  expect(cancelled).toBe(streamed);
  return error as InputError;
}

describe('a getter that throws in the options, through the worker client', () => {
  const cases: Array<[string, () => unknown]> = [
    ['options.policy', () => throwing({ pubSignKey }, 'policy')],
    ['options.pubSignKey', () => throwing({ policy: { bob } }, 'pubSignKey')],
    ['a policy entry', () => ({ policy: throwing({ bob }, 'eve'), pubSignKey })],
    ['an attribute value', () => ({ policy: { eve: { ts: 1, con: [throwing({ t: EMAIL }, 'v')] } }, pubSignKey })],
    [
      "the signing key's policy",
      () => ({ policy: { bob }, pubSignKey: { key: pubSignKey.key, policy: throwing({ ts: 1 }, 'con') } }),
    ],
  ];
  for (const [where, options] of cases) {
    it(`${where}: INVALID_INPUT, the throw as its cause`, async () => {
      const error = await refusedThroughWorker(pg, options, 'INVALID_INPUT', /options: .*threw: x/);
      expect(error.cause).toBe(boom);
    });
  }

  it('good options still seal through the worker, and a stream with them', async () => {
    const options = { policy: new Map([['bob', bob]]), pubSignKey };
    expect((await pg.seal(kem.mpk, options, plain)).length).toBeGreaterThan(plain.length);
    const sink = collector();
    await pg.sealStream(kem.mpk, options, chunkedSource(plain), sink.writable);
    expect(sink.state()).toBe('closed');
  });
});

/** `'x'` inside `depth` arrays. */
function nested(depth: number): unknown {
  let value: unknown = 'x';
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

describe('options that structured clone cannot carry, through the worker client', () => {
  const withValue = (v: unknown) => () => ({ policy: { eve: { ts: 1, con: [{ t: EMAIL, v }] } }, pubSignKey });

  it('an attribute value 100 000 arrays deep (RangeError in the copy): INVALID_INPUT, too deep', async () => {
    const error = await refusedThroughWorker(pg, withValue(nested(100_000)), 'INVALID_INPUT', /nested too deeply/);
    expect((error.cause as Error).name).toBe('RangeError');
  });

  it('nesting that clones but is far deeper than any option: refused before it crosses', async () => {
    await refusedThroughWorker(pg, withValue(nested(200)), 'INVALID_INPUT', /nested too deeply/);
    // Shallow enough to cross: the worker's library refuses it by type, as in-process.
    await expect(pg.seal(kem.mpk, withValue(nested(20))() as SealOptions, plain)).rejects.toMatchObject({
      code: 'INVALID_POLICY',
    });
  });

  it('a value clone cannot carry (a function: DataCloneError): INVALID_INPUT', async () => {
    await refusedThroughWorker(
      pg,
      withValue(() => 'x'),
      'INVALID_INPUT',
      /cannot be sent to the worker/,
    );
  });

  it('what seal does not read is not sent, and a cycle is no obstacle', async () => {
    const entry: Record<string, unknown> = { ...bob };
    entry['self'] = entry;
    const options = { policy: { bob: entry }, pubSignKey, onProgress: () => undefined, extra: nested(100_000) };
    expect((await pg.seal(kem.mpk, options as unknown as SealOptions, plain)).length).toBeGreaterThan(0);
  });
});
