import { describe, expect, it } from 'vitest';
import { chunkedSource, collector } from '../test/streams.js';
import { InputError } from './errors.js';
import { seal, sealStream, type Policy, type SealOptions } from './index.js';
import { extractSigningKey, generateKemKeys, generateSigningKeys } from './keys.js';

/**
 * Seal options as a careless or hostile caller gives them: recipient attributes that no key could
 * ever match. Each is refused with a typed InputError by `seal` and `sealStream` alike, before a
 * byte is written.
 */

const EMAIL = 'pbdf.sidn-pbdf.email.email';
const bob: Policy = { ts: 1_700_000_000, con: [{ t: EMAIL, v: 'bob@example.com' }] };
const alice: Policy = { ts: 1_700_000_000, con: [{ t: EMAIL, v: 'alice@example.com' }] };
const kem = generateKemKeys();
const ibs = generateSigningKeys();
const pubSignKey = { key: extractSigningKey(ibs.sk, alice), policy: alice };
const plain = new TextEncoder().encode('hello');

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
