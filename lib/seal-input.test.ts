import { describe, expect, it } from 'vitest';
import { chunkedSource, collector } from '../test/streams.js';
import { InputError } from './errors.js';
import { seal, sealStream, type Policy, type SealOptions } from './index.js';
import { EMAIL, alice, bob, boom, kem, plain, pubSignKey, throwing } from '../test/seal-options.js';

/**
 * Seal options as a careless or hostile caller gives them: recipient attributes that no key could
 * ever match, getters and Proxies that throw while the options are read. Each is refused with a
 * typed InputError by `seal` and `sealStream` alike, before a byte is written.
 */

/** Both sealers reject with an InputError of `code` (message matching), and the stream's sink got nothing. */
async function refused(options: unknown, code: string, message: RegExp): Promise<void> {
  const memory = await seal(kem.mpk, options as SealOptions, plain).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(memory).toBeInstanceOf(InputError);
  expect(memory).toMatchObject({ code, message: expect.stringMatching(message) });
  const sink = collector();
  const streamed = await sealStream(kem.mpk, options as SealOptions, chunkedSource(plain), sink.writable).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(streamed).toBeInstanceOf(InputError);
  expect(streamed).toMatchObject({ code, message: expect.stringMatching(message) });
  expect(sink.chunks).toEqual([]);
  expect(sink.state()).toBe('aborted');
  expect(sink.abortReason()).toBe(streamed);
}

describe('recipient attributes no key could match', () => {
  it('an empty attribute type: INVALID_POLICY', async () => {
    const blank = { ts: 1, con: [{ t: '', v: 'x' }] };
    await refused(
      { policy: { bob, eve: blank }, pubSignKey },
      'INVALID_POLICY',
      /"eve".*con\[0\].*empty attribute type/,
    );
    await refused({ policy: new Map([['eve', blank]]), pubSignKey }, 'INVALID_POLICY', /empty attribute type/);
    const second = { ts: 1, con: [{ t: EMAIL, v: 'eve@example.com' }, { t: '' }] };
    await refused({ policy: { eve: second }, pubSignKey }, 'INVALID_POLICY', /con\[1\].*empty attribute type/);
  });
});

describe('a getter or Proxy that throws while the options are read: INVALID_INPUT, the throw as its cause', () => {
  const cases: Array<[string, () => unknown]> = [
    ['options.policy', () => throwing({ pubSignKey }, 'policy')],
    ['options.pubSignKey', () => throwing({ policy: { bob } }, 'pubSignKey')],
    ['options.privSignKey', () => throwing({ policy: { bob }, pubSignKey }, 'privSignKey')],
    ['options.skipEncryption', () => throwing({ policy: { bob }, pubSignKey }, 'skipEncryption')],
    ['a policy entry', () => ({ policy: throwing({ bob }, 'eve'), pubSignKey })],
    ["an entry's ts", () => ({ policy: { eve: throwing({ con: bob.con }, 'ts') }, pubSignKey })],
    ["an entry's con", () => ({ policy: { eve: throwing({ ts: 1 }, 'con') }, pubSignKey })],
    ['an attribute type', () => ({ policy: { eve: { ts: 1, con: [throwing({ v: 'x' }, 't')] } }, pubSignKey })],
    ['an attribute value', () => ({ policy: { eve: { ts: 1, con: [throwing({ t: EMAIL }, 'v')] } }, pubSignKey })],
    ['the signing key', () => ({ policy: { bob }, pubSignKey: throwing({ policy: alice }, 'key') })],
    [
      "the signing key's policy",
      () => ({ policy: { bob }, pubSignKey: { key: pubSignKey.key, policy: throwing({ ts: 1 }, 'con') } }),
    ],
    [
      'a Proxy whose ownKeys trap throws',
      () => ({
        policy: new Proxy(
          { bob },
          {
            ownKeys() {
              throw boom;
            },
          },
        ),
        pubSignKey,
      }),
    ],
    [
      'a Map whose entries throw',
      () => {
        const policy = new Map([['bob', bob]]);
        policy.entries = () => {
          throw boom;
        };
        return { policy, pubSignKey };
      },
    ],
    [
      'options itself a Proxy whose get trap throws',
      () =>
        new Proxy(
          {},
          {
            get: () => {
              throw boom;
            },
          },
        ),
    ],
  ];

  for (const [where, options] of cases) {
    it(where, async () => {
      await refused(options(), 'INVALID_INPUT', /options: reading them threw: x/);
      const error = await seal(kem.mpk, options() as SealOptions, plain).catch((e: unknown) => e);
      expect((error as Error).cause).toBe(boom);
    });
  }

  it('whatever is thrown: a string, or an object whose message itself throws', async () => {
    await refused(throwing({ pubSignKey }, 'policy', 'plain string'), 'INVALID_INPUT', /threw: plain string/);
    const nasty = throwing(new Error(), 'message');
    await refused(throwing({ pubSignKey }, 'policy', nasty), 'INVALID_INPUT', /threw: a value that cannot be shown/);
  });

  it("a PostGuardError thrown by the caller's getter keeps its code", async () => {
    const own = new InputError('INVALID_KEY', 'from the caller');
    await refused(throwing({ pubSignKey }, 'policy', own), 'INVALID_KEY', /from the caller/);
  });
});

/** `'x'` inside `depth` arrays. */
function nested(depth: number): unknown {
  let value: unknown = 'x';
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

describe('deeply nested options (what structured clone cannot copy) are refused by type, not by overflow', () => {
  const deep = nested(100_000);
  const cases: Array<[string, unknown, RegExp]> = [
    [
      'as an attribute value',
      { policy: { eve: { ts: 1, con: [{ t: EMAIL, v: deep }] } }, pubSignKey },
      /v must be a string/,
    ],
    [
      'as an attribute type',
      { policy: { eve: { ts: 1, con: [{ t: deep, v: 'x' }] } }, pubSignKey },
      /t must be a string/,
    ],
    ['as a timestamp', { policy: { eve: { ts: deep, con: bob.con } }, pubSignKey }, /ts must be/],
    ['as the attribute list', { policy: { eve: { ts: 1, con: deep } }, pubSignKey }, /must be a string|attribute/],
    ['as a policy entry', { policy: { eve: deep }, pubSignKey }, /missing field ts/],
    ["as the signing key's policy", { policy: { bob }, pubSignKey: { key: pubSignKey.key, policy: deep } }, /ts/],
  ];
  for (const [where, options, message] of cases) {
    it(where, async () => {
      await refused(options, 'INVALID_POLICY', message);
    });
  }

  it('a cycle beside the fields seal reads is no obstacle', async () => {
    const entry: Record<string, unknown> = { ...bob };
    entry['self'] = entry;
    expect(
      (await seal(kem.mpk, { policy: { bob: entry as unknown as Policy }, pubSignKey }, plain)).length,
    ).toBeGreaterThan(0);
  });
});
