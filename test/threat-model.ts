import { createShake128, segmentHasher } from '#shake';
import { encodeFrame, splitFrame } from '../lib/frame.js';
import { extractSigningKey, extractUsk, generateSigningKeys, signingKeyFromBase64, type PkgKeys } from '../lib/keys.js';
import { pumpSegments } from '../lib/pump.js';
import { sealStream, type SealOptions } from '../lib/seal.js';
import { SegmentSealer } from '../lib/segments.js';
import { encodeSignatureExt, signTranscript, type VerificationResult } from '../lib/signatures.js';
import { openSegmentAccess } from '../lib/unseal.js';
import type { Policy } from '../lib/policy.js';
import { loadPgWasm } from './pgwasm.js';
import { chunkedSource, collector } from './streams.js';

/**
 * The threat model of docs/security.md, as files: for every attacker and every kind of file, the
 * best forgery that attacker can make of a genuine file of that kind, and what a reader must
 * report for it. The library's, the CLI's and the demo's tests all read this one table, so the
 * document, the API and the words people see cannot drift apart.
 */

export const EMAIL = 'pbdf.sidn-pbdf.email.email';
export const DEMO_EMAIL = 'irma-demo.sidn-pbdf.email.email';
export const AGE = 'pbdf.pbdf.ageLimits.over18';

export const ALICE = 'alice@example.com';
export const BOB = 'bob@example.com';
export const CAROL = 'carol@example.net';
export const MALLORY = 'mallory@example.org';

export type Attacker = 'outsider' | 'outsider-with-key' | 'co-recipient' | 'pkg-operator' | 'storage-operator';
export type FileKind = 'unbound' | 'unbound-private' | 'bound' | 'bound-private' | 'demo-sender';

export const ATTACKERS: readonly Attacker[] = [
  'outsider',
  'outsider-with-key',
  'co-recipient',
  'pkg-operator',
  'storage-operator',
];
export const FILE_KINDS: readonly FileKind[] = ['unbound', 'unbound-private', 'bound', 'bound-private', 'demo-sender'];

/** What a reader of the forgery must end with: a typed error, or exactly this result. */
export type Outcome = { error: string; at: 'header' | 'content' } | { result: VerificationResult };

export interface ThreatRow {
  attacker: Attacker;
  kind: FileKind;
  /** The forged (or, for the PKG operator, re-made) streaming ciphertext. */
  file: Uint8Array;
  /** The sender the forgery's header claims (what every reader shows before unsealing), if it has one. */
  claimed: Policy | undefined;
  outcome: Outcome;
}

export interface ThreatModel {
  /** Bob's recipient policy (the same in every file) and his key. */
  bob: Policy;
  bobUsk: string;
  rows: ThreatRow[];
}

const who = (ts: number, v: string, type = EMAIL): Policy => ({ ts, con: [{ t: type, v }] });

/**
 * Builds every row under one PKG's keys (`keys`), with recipient timestamps `ts`: tests that ask
 * a running PKG for Bob's key pass that PKG's keys and a timestamp it accepts.
 */
export async function buildThreatModel(keys: PkgKeys, ts: number): Promise<ThreatModel> {
  const bob = who(ts, BOB);
  const carol = who(ts, CAROL);
  const policy = { [BOB]: bob, [CAROL]: carol };
  const signer = (p: Policy) => ({ key: extractSigningKey(keys.sk, p), policy: p });
  const alice = who(ts, ALICE);
  const alicePrivate = who(ts, 'yes', AGE);
  const senders: Record<FileKind, { pub: Policy; priv?: Policy; pgWasm: boolean }> = {
    unbound: { pub: alice, pgWasm: true },
    'unbound-private': { pub: alice, priv: alicePrivate, pgWasm: true },
    bound: { pub: alice, pgWasm: false },
    'bound-private': { pub: alice, priv: alicePrivate, pgWasm: false },
    'demo-sender': { pub: who(ts, ALICE, DEMO_EMAIL), pgWasm: false },
  };
  const message = new TextEncoder().encode('the genuine content, as its sender wrote it\n');
  const forgedMessage = new TextEncoder().encode('content written by the attacker\n');
  const otherPkg = generateSigningKeys();
  const mallory = who(ts, MALLORY);
  // Carol, a co-recipient, signs with a private identity of her own (over 18: anything she holds).
  const carolPrivate = who(ts, 'yes', AGE);

  const rows: ThreatRow[] = [];
  for (const kind of FILE_KINDS) {
    const s = senders[kind];
    const options: SealOptions = {
      policy,
      pubSignKey: signer(s.pub),
      ...(s.priv === undefined ? {} : { privSignKey: signer(s.priv) }),
    };
    const genuine = await sealWith(keys.mpk, options, message, s.pgWasm);
    const genuineResult: VerificationResult = {
      public: s.pub,
      ...(s.priv === undefined ? {} : { private: s.priv }),
      contentSigner: s.priv === undefined ? 'public' : 'private',
      bound: !s.pgWasm,
    };
    const row = (attacker: Attacker, file: Uint8Array, claimed: Policy | undefined, outcome: Outcome) =>
      rows.push({ attacker, kind, file, claimed, outcome });

    // Without a key of this PKG nothing verifies: a header signed under another PKG's key.
    row('outsider', resignHeader(genuine, signingKeyFromBase64(extractSigningKey(otherPkg.sk, s.pub)), s.pub), s.pub, {
      error: 'BAD_SIGNATURE',
      at: 'header',
    });

    // A signing key of this PKG re-signs the header as Mallory. Bound files refuse it; in an
    // unbound one the content still carries the genuine signer, so she is named as a header claim.
    const resigned = resignHeader(genuine, signingKeyFromBase64(extractSigningKey(keys.sk, mallory)), mallory);
    row(
      'outsider-with-key',
      resigned,
      mallory,
      s.pgWasm
        ? { result: { public: mallory, private: s.priv ?? s.pub, contentSigner: 'private', bound: false } }
        : { error: 'SENDER_MISMATCH', at: 'content' },
    );

    // Carol holds the file's key: she keeps the header and its signature, writes new content and
    // signs it with her own private key, copying the header's sender inside so it reads as bound.
    const carolUsk = extractUsk(keys.msk, carol);
    const rewritten = await rewriteContent(
      genuine,
      keys.vk,
      CAROL,
      carolUsk,
      signer(carolPrivate),
      s.pub,
      forgedMessage,
    );
    row('co-recipient', rewritten, s.pub, {
      result: { public: s.pub, private: carolPrivate, contentSigner: 'private', bound: true },
    });

    // The PKG's operator holds every key: a file made anew in the sender's name reads as genuine.
    row('pkg-operator', await sealWith(keys.mpk, options, forgedMessage, s.pgWasm), s.pub, { result: genuineResult });

    // Storage holds no key: it can only cut, swap or damage. The best of those, a cut at the last
    // segment boundary, is seen as such.
    row('storage-operator', genuine.subarray(0, genuine.length - splitFrame(genuine).payload.length), s.pub, {
      error: 'TRUNCATED',
      at: 'content',
    });
  }
  return { bob, bobUsk: extractUsk(keys.msk, bob), rows };
}

async function sealWith(mpk: string, options: SealOptions, plain: Uint8Array, pgWasm: boolean): Promise<Uint8Array> {
  const out = collector();
  if (pgWasm) await (await loadPgWasm()).sealStream(mpk, options, chunkedSource(plain), out.writable);
  else await sealStream(mpk, options, chunkedSource(plain), out.writable);
  return out.bytes();
}

/** The same header bytes and payload, with the header signature replaced. */
function resignHeader(file: Uint8Array, key: ReturnType<typeof signingKeyFromBase64>, as: Policy): Uint8Array {
  const { header, payload } = splitFrame(file);
  const signature = encodeSignatureExt(signTranscript({ key, policy: as }, createShake128().update(header)), as);
  return concat(encodeFrame(header, signature), payload);
}

/** What a recipient can do with the file's key: the header and its signature kept, new content. */
async function rewriteContent(
  file: Uint8Array,
  vk: string,
  recipientId: string,
  usk: string,
  signer: { key: string; policy: Policy },
  sender: Policy,
  message: Uint8Array,
): Promise<Uint8Array> {
  const { header, signature } = splitFrame(file);
  const access = await openSegmentAccess(header, signature, vk, recipientId, usk);
  const hasher = segmentHasher(createShake128().update(header), header);
  const out = collector();
  try {
    const sealer = new SegmentSealer(
      {
        iv: access.iv,
        key: access.key,
        hasher,
        signer: { key: signingKeyFromBase64(signer.key), policy: signer.policy },
        sender,
      },
      access.segmentSize,
    );
    const reader = chunkedSource(message).getReader();
    await pumpSegments(reader, out.writable.getWriter(), encodeFrame(header, signature), sealer, 4);
  } finally {
    hasher.close();
  }
  return out.bytes();
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
