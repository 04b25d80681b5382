import { sha3_256 } from '@noble/hashes/sha3.js';
import { describe, expect, it } from 'vitest';
import { expectLinearTime, repeated as run } from '../test/linear-time.js';
import { fromBase64, toBase64 } from './base64.js';
import { Reader } from './bincode.js';
import { ggKeygen } from './crypto/gg.js';
import { signChallenge, verifyChallenge } from './challenge.js';
import { PostGuardError } from './errors.js';
import { decodeHeader, encodeHeader, CAPSULE_BYTES, type Header } from './header.js';
import { canonicalPolicy, canonicalize, isCanonical, kemIdentity, rawPolicyDigest } from './identity.js';
import { generateSigningKeys, verifyingKeyFromBase64 } from './keys.js';
import { encodePolicy, hidePolicy, normalizePolicy, readPolicy, type Policy } from './policy.js';
import { SignatureVerifier, decodeSignatureExt, encodeSignatureExt } from './signatures.js';

/**
 * Every normaliser and parser that sees untrusted bytes, fed the worst input we could craft at about
 * 1 MiB (the header and header-signature caps) and a benign one of the same size: the crafted one
 * is refused with a typed error or handled in time of the same order (test/linear-time.ts). The
 * signer policy of a header signature is read before anything is authenticated, so its e-mail
 * trim, its identity derivation and its decoding are what a stranger's file makes a reader run.
 */

const EMAIL = 'pbdf.sidn-pbdf.email.email';
const MOBILE = 'pbdf.sidn-pbdf.mobilenumber.mobilenumber';
const ts = 1_700_000_000;
const typed = (error: unknown) => error instanceof PostGuardError;
const ibs = generateSigningKeys();
const vk = verifyingKeyFromBase64(ibs.vk);

/** Every Unicode White_Space character, so a trim that special-cases some still sees the rest. */
const WHITE_SPACE =
  '\t\n\v\f\r \u0085\u00A0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200A\u2028\u2029\u202F\u205F\u3000';
/** An address with a long run of whitespace inside, which a trim must not retry from every position. */
const spaced = (n: number, unit = ' ') => `a${run(unit, n - 2)}a`;
const email = (v: string): Policy => ({ ts, con: [{ t: EMAIL, v }] });
/** A policy of about `n` bincode bytes made of the smallest attributes there are (9 bytes: empty type, no value). */
const flood = (n: number): Policy => ({ ts, con: Array.from({ length: Math.floor(n / 9) }, () => ({ t: '' })) });

describe('identities (lib/identity.ts)', () => {
  it('canonicalize and isCanonical: an e-mail with a long inner run of whitespace', async () => {
    for (const unit of [' ', WHITE_SPACE]) {
      await expectLinearTime(`canonicalize e-mail, inner run of ${JSON.stringify(unit.slice(0, 3))}…`, (n) => ({
        crafted: () => expect(canonicalize(EMAIL, spaced(n, unit))).toHaveLength(n),
        benign: () => canonicalize(EMAIL, run('a', n)),
      }));
    }
    await expectLinearTime('isCanonical e-mail, inner run of spaces', (n) => ({
      crafted: () => expect(isCanonical(EMAIL, spaced(n))).toBe(true),
      benign: () => isCanonical(EMAIL, run('a', n)),
    }));
    // Runs at the ends are what a trim removes: all of it, from either side.
    await expectLinearTime('canonicalize e-mail, whitespace on both sides', (n) => ({
      crafted: () => expect(canonicalize(EMAIL, `${run(' ', n / 2)}a${run('\u3000', n / 2)}`)).toBe('a'),
      benign: () => canonicalize(EMAIL, run('a', n)),
    }));
  });

  it('canonicalize and isCanonical: mobile numbers of nested and repeated separators', async () => {
    for (const unit of ['(0)', '((0', '(0))', ' -./', '00', '\u00A0\u2011(']) {
      await expectLinearTime(`canonicalize mobile, ${JSON.stringify(unit)} repeated`, (n) => ({
        crafted: () => canonicalize(MOBILE, `+31${run(unit, n)}6`),
        benign: () => canonicalize(MOBILE, `+31${run('6', n)}`),
      }));
    }
    await expectLinearTime('isCanonical mobile, a long E.164 look-alike', (n) => ({
      crafted: () => expect(isCanonical(MOBILE, `+${run('1', n)}`)).toBe(false),
      benign: () => isCanonical(MOBILE, run('a', n)),
    }));
  });

  it('identity derivation: a spaced e-mail, and attributes whose types share a long prefix (the sort)', async () => {
    await expectLinearTime('kemIdentity of a spaced e-mail', (n) => ({
      crafted: () => kemIdentity(email(spaced(n))),
      benign: () => kemIdentity(email(run('a', n))),
    }));
    // As many attributes as a signer's policy may have, with types that differ only at their end.
    await expectLinearTime('rawPolicyDigest of 1024 attributes sharing a prefix', (n) => {
      const type = (i: number) => `${run('x', n / 1024 - 4)}${String(i).padStart(4, '0')}`;
      const crafted: Policy = { ts, con: Array.from({ length: 1024 }, (_, i) => ({ t: type(1023 - i), v: '' })) };
      return {
        crafted: () => rawPolicyDigest(canonicalPolicy(crafted)),
        benign: () => rawPolicyDigest(canonicalPolicy(email(run('a', n)))),
      };
    });
  });
});

describe('policies (lib/policy.ts)', () => {
  it('normalizePolicy: a value of surrogate pairs with a lone surrogate at its end', async () => {
    await expectLinearTime(
      'normalizePolicy, lone surrogate after a run of pairs',
      (n) => ({
        crafted: () => normalizePolicy({ ts, con: [{ t: EMAIL, v: `${run('\u{1F600}', n - 1)}\uD800` }] }),
        benign: () => normalizePolicy({ ts, con: [{ t: EMAIL, v: run('a', n) }] }),
      }),
      { refused: typed },
    );
  });

  it('readPolicy: a policy made of the smallest attributes, against one long value', async () => {
    await expectLinearTime('readPolicy, attribute flood', (n) => {
      const crafted = encodePolicy(flood(n));
      const benign = encodePolicy(email(run('a', n)));
      return {
        crafted: () => readPolicy(new Reader(crafted, 'policy')),
        benign: () => readPolicy(new Reader(benign, 'policy')),
      };
    });
  });

  it('hidePolicy: a long hint value', async () => {
    await expectLinearTime(
      'hidePolicy of a long mobile number',
      (n) => ({
        crafted: () => hidePolicy({ ts, con: [{ t: MOBILE, v: `${run('(0) ', n - 2)}\u{1F600}` }] }),
        benign: () => hidePolicy({ ts, con: [{ t: MOBILE, v: run('6', n) }] }),
      }),
      { refused: typed },
    );
  });
});

describe('header and header signature (lib/header.ts, lib/bincode.ts, the signer policy)', () => {
  const header = (recipients: Array<[string, Policy]>): Header => ({
    recipients: new Map(recipients.map(([id, policy]) => [id, { policy, capsule: new Uint8Array(CAPSULE_BYTES) }])),
    iv: new Uint8Array(12),
    mode: { type: 'Streaming', segmentSize: 262_144, sizeHint: [0n, undefined] },
  });

  it('decodeHeader: a hidden policy flood, and a thousand recipients of one id, against one long id', async () => {
    await expectLinearTime('decodeHeader, hidden policy flood', (n) => {
      const crafted = encodeHeader(header([['bob', flood(n - 400)]]));
      const benign = encodeHeader(header([[run('b', n - 400), email('')]]));
      return { crafted: () => decodeHeader(crafted), benign: () => decodeHeader(benign) };
    });
    await expectLinearTime('decodeHeader, repeated recipient ids', (n) => {
      // The encoder writes a map; duplicate ids (the reader keeps the last) are spliced in by hand.
      const one = encodeHeader(header([['bob', email('')]]));
      const entry = one.subarray(8, one.length - 4 - 12 - 4 - 4 - 8 - 1);
      const count = Math.max(1, Math.floor((n - 64) / entry.length));
      const crafted = new Uint8Array(8 + count * entry.length + (one.length - 8 - entry.length));
      new DataView(crafted.buffer).setBigUint64(0, BigInt(count), true);
      for (let i = 0; i < count; i++) crafted.set(entry, 8 + i * entry.length);
      crafted.set(one.subarray(8 + entry.length), 8 + count * entry.length);
      const benign = encodeHeader(header([[run('b', crafted.length - 400), email('')]]));
      return {
        crafted: () => expect(decodeHeader(crafted).recipients.size).toBe(1),
        benign: () => decodeHeader(benign),
      };
    });
  });

  it("the header signature's signer policy, decoded and made a verifier, as both unsealers do first", async () => {
    const verifier = (bytes: Uint8Array) => new SignatureVerifier(vk, decodeSignatureExt(bytes).policy);
    const signature = (policy: Policy) => encodeSignatureExt(new Uint8Array(96), policy);
    const benign = (n: number) => signature(email(run('a', n - 200)));
    await expectLinearTime('signer policy, spaced e-mail', (n) => {
      const [crafted, plain] = [signature(email(spaced(n - 200))), benign(n)];
      return { crafted: () => verifier(crafted), benign: () => verifier(plain) };
    });
    await expectLinearTime(
      'signer policy, attribute flood',
      (n) => {
        const [crafted, plain] = [signature(flood(n - 200)), benign(n)];
        return { crafted: () => verifier(crafted), benign: () => verifier(plain) };
      },
      { refused: typed },
    );
  });
});

describe('proofs of possession (lib/challenge.ts)', () => {
  const challenge = crypto.getRandomValues(new Uint8Array(32));

  it('verifyChallenge: a spaced e-mail signer with a valid proof, an attribute flood, a long context', async () => {
    await expectLinearTime('verifyChallenge, spaced e-mail', (n) => {
      // A real proof by the key for that identity (derived without canonicalising: it is canonical).
      const signer = (v: string) => {
        const policy = email(v);
        const key = toBase64(ggKeygen(fromBase64(ibs.sk, 'sk', 32), sha3_256(rawPolicyDigest(policy))));
        return { policy, proof: signChallenge(key, 'upload', challenge) };
      };
      const [crafted, plain] = [signer(spaced(n)), signer(run('a', n))];
      return {
        crafted: () => expect(verifyChallenge(ibs.vk, crafted.policy, 'upload', challenge, crafted.proof)).toBe(true),
        benign: () => verifyChallenge(ibs.vk, plain.policy, 'upload', challenge, plain.proof),
      };
    });
    await expectLinearTime('verifyChallenge, attribute flood', (n) => {
      const [crafted, signature] = [flood(n), new Uint8Array(96)];
      return {
        crafted: () => expect(verifyChallenge(ibs.vk, crafted, 'upload', challenge, signature)).toBe(false),
        benign: () => verifyChallenge(ibs.vk, email(run('a', n)), 'upload', challenge, signature),
      };
    });
    await expectLinearTime('verifyChallenge, long context of whitespace', (n) => {
      const signature = new Uint8Array(96);
      const alice = email('alice@example.com');
      return {
        crafted: () => verifyChallenge(ibs.vk, alice, run(' \u3000', n), challenge, signature),
        benign: () => verifyChallenge(ibs.vk, alice, run('a', n), challenge, signature),
      };
    });
  });
});
