import { sha3_256 } from '@noble/hashes/sha3.js';
import { loadShake128, segmentHasher } from '#shake';
import { loadGgAcceleration } from './crypto/gg.js';
import { loadPairingAcceleration, multiEncaps } from './crypto/cgwkv.js';
import { aesGcmSeal, importAesKey } from '#aes';
import { AES_KEY_BYTES, type AesKey } from './crypto/aes.js';
import type { Xof } from './crypto/xof.js';
import { ErrorCode, InputError, describeThrown, invalidKey, invalidPolicy, isPostGuardError } from './errors.js';
import { MAX_HEADER_BYTES, MAX_SIGNATURE_BYTES, encodeFrame } from './frame.js';
import { DEFAULT_SEGMENT_SIZE, IV_BYTES, encodeHeader, type Mode, type RecipientHeader } from './header.js';
import { asBytes } from './io.js';
import { masterPublicKeyFromBase64, signingKeyFromBase64 } from './keys.js';
import {
  compareUtf8,
  hidePolicy,
  normalizeEncryptionPolicy,
  normalizePolicy,
  type EncryptionPolicy,
  type Policy,
} from './policy.js';
import { encodeSignatureExt, signTranscript, type Signer } from './signatures.js';
import { MAX_SIGNER_ATTRIBUTES, canonicalPolicy, kemIdentity, rawPolicyDigest } from './identity.js';
import { encodeMemoryPayload } from './payload.js';
import { SegmentSealer } from './segments.js';
import { framingSize, headerSize, memoryPayloadSize, signatureExtSize, streamPayloadSize } from './size.js';
import { abortBoth, pumpSegments } from './pump.js';
import { readerSource, type ChunkSource } from './io.js';

/** A signing key as the PKG issues it: the base64 key and the policy it was issued for. */
export interface SigningKeyInput {
  /** The signing key, 128 characters of padded base64. */
  key: string;
  /** The identity the key was issued for, as the PKG returns it (`t` is pg-pkg's name for `ts`). */
  policy: Policy | { t: number; con: Policy['con'] };
}

/** What `seal` and `sealStream` encrypt for, and who signs: pg-wasm's sealing options. */
export interface SealOptions {
  /** Recipient id → policy. Required unless `skipEncryption`. A plain object or a Map. */
  policy?: EncryptionPolicy;
  /** Signs the header; its policy (e.g. the sender's e-mail) is readable by anyone. */
  pubSignKey: SigningKeyInput;
  /** Signs the payload instead of pubSignKey; its policy is only visible to recipients. */
  privSignKey?: SigningKeyInput;
  /** pg-wasm's test switch: seal for the fixed "Default" recipient instead of `policy`. */
  skipEncryption?: boolean;
  /**
   * `sealStream` only: the plaintext's length in bytes, when known. The header then states it as
   * the exact size hint (so a reader knows the size before decrypting: `plaintextSize`), and the
   * seal fails (INVALID_INPUT) if the stream carries a different number of bytes.
   */
  size?: number;
}

/** The in-memory size field is a u32. */
export const MAX_IN_MEMORY_BYTES = 0xffff_ffff;

const SKIP_ENCRYPTION_POLICY: Array<[string, Policy]> = [['Default', { ts: 0, con: [{ t: 'default', v: 'Default' }] }]];

/** Everything a sealer needs once the header is written and signed. */
export interface SealContext {
  /** Preamble ‖ header ‖ signature length ‖ header signature. */
  readonly frame: Uint8Array;
  readonly iv: Uint8Array;
  readonly key: AesKey;
  /** The header bytes, which start the transcript. */
  readonly header: Uint8Array;
  /** SHAKE128 that has absorbed the header bytes. */
  readonly transcript: Xof;
  /** Signs the payload: the private key if given, else the public one. */
  readonly signer: Signer;
  /** The public sender as the header names it; sealed again inside the payload (payload.ts). */
  readonly sender: Policy;
}

/**
 * The signer, with the policy to write into the file: the canonical spelling when the key is for
 * the canonical identity (what a current PKG issues), so every reader, 0.5.10's too, derives the
 * identity from the header bytes as they stand; the spelling as given when the key is an older
 * PKG's for exactly that spelling.
 */
function readSigner(input: unknown, field: string): Signer {
  if (typeof input !== 'object' || input === null) throw invalidPolicy(`${field}: expected {key, policy}`);
  const { key: encoded, policy: raw } = input as { key?: unknown; policy?: unknown };
  const key = signingKeyFromBase64(encoded, field);
  const given = normalizePolicy(raw, `${field}.policy`);
  if (given.con.length > MAX_SIGNER_ATTRIBUTES) {
    // Readers refuse to derive an identity for so long a policy: no one could verify the file.
    throw new InputError(
      ErrorCode.TOO_LARGE,
      `${field}.policy: ${given.con.length} attributes, over the ${MAX_SIGNER_ATTRIBUTES} readers accept for a signer`,
    );
  }
  const canonical = canonicalPolicy(given);
  if (equalBytes(key.id, sha3_256(rawPolicyDigest(canonical)))) return { key, policy: canonical };
  if (canonical !== given && equalBytes(key.id, sha3_256(rawPolicyDigest(given)))) return { key, policy: given };
  // A key issued for another policy signs ciphertexts that no one can verify: refuse it here.
  throw invalidKey(`${field}: the key was not issued for this policy`);
}

interface ReadOptions {
  recipients: Array<[string, Policy]>;
  publicSigner: Signer;
  payloadSigner: Signer;
}

/**
 * The options, read into our own values. Whatever the caller's objects throw while being read
 * (a getter, a Proxy trap, a Map whose iterator fails) is the caller's input: an InputError, the
 * thrown value as its cause, never the raw throw.
 */
function readOptions(options: unknown): ReadOptions {
  try {
    return readOptionsUnguarded(options);
  } catch (error) {
    if (isPostGuardError(error)) throw error;
    throw new InputError(ErrorCode.INVALID_INPUT, `options: reading them threw: ${describeThrown(error)}`, {
      cause: error,
    });
  }
}

function readOptionsUnguarded(options: unknown): ReadOptions {
  if (typeof options !== 'object' || options === null) throw invalidPolicy('options: expected an object');
  const o = options as Partial<SealOptions>;
  if (o.pubSignKey === undefined) throw invalidPolicy('options: missing field pubSignKey');
  const publicSigner = readSigner(o.pubSignKey, 'pubSignKey');
  const payloadSigner = o.privSignKey != null ? readSigner(o.privSignKey, 'privSignKey') : publicSigner;
  if (o.skipEncryption !== undefined && o.skipEncryption !== null && typeof o.skipEncryption !== 'boolean') {
    throw invalidPolicy(`options: skipEncryption must be true or false, not ${typeof o.skipEncryption}`);
  }
  let recipients: Array<[string, Policy]>;
  if (o.skipEncryption === true) recipients = SKIP_ENCRYPTION_POLICY;
  else if (o.policy === undefined || o.policy === null) throw invalidPolicy('options: missing field policy');
  // Recipients are sealed for their canonical identities (a current PKG issues keys for those),
  // and the header shows the canonical spelling (its hints too).
  else recipients = normalizeEncryptionPolicy(o.policy).map(([id, p]) => [id, canonicalPolicy(p)]);
  recipients.sort(([a], [b]) => compareUtf8(a, b));
  return { recipients, publicSigner, payloadSigner };
}

/**
 * Every reader (ours and pg-wasm) refuses a header over 1 MiB, and ours a header signature over
 * MAX_SIGNATURE_BYTES: such a file would be sealed for nobody. Checked from the sizes alone,
 * before any key is encapsulated or byte written.
 */
function refuseUnopenableFrame(recipients: ReadonlyArray<readonly [string, Policy]>, mode: Mode, signer: Policy): void {
  const header = headerSize(recipients, mode);
  if (header > MAX_HEADER_BYTES) {
    throw new InputError(
      ErrorCode.TOO_LARGE,
      `the header would be ${header} bytes, over the ${MAX_HEADER_BYTES} every reader accepts: fewer recipients or shorter policies`,
    );
  }
  const signature = signatureExtSize(signer);
  if (signature > MAX_SIGNATURE_BYTES) {
    throw new InputError(
      ErrorCode.TOO_LARGE,
      `the header signature would be ${signature} bytes, over the ${MAX_SIGNATURE_BYTES} readers accept: the signing policy is too long`,
    );
  }
}

const equalBytes = (a: Uint8Array, b: Uint8Array): boolean => a.length === b.length && a.every((x, i) => x === b[i]);

const randomBytes = (n: number): Uint8Array => crypto.getRandomValues(new Uint8Array(n));

/** Encapsulates for every recipient, writes and signs the header. */
export async function prepareSeal(mpk: unknown, options: unknown, mode: Mode): Promise<SealContext> {
  const { recipients, publicSigner, payloadSigner } = readOptions(options);
  const masterKey = masterPublicKeyFromBase64(mpk);
  const hidden = recipients.map(([, policy]) => hidePolicy(policy));
  refuseUnopenableFrame(
    recipients.map(([id], i) => [id, hidden[i]!] as const),
    mode,
    publicSigner.policy,
  );
  // Encapsulation runs on the WebAssembly pairing engine once it is loaded (once per realm).
  const [createShake] = await Promise.all([loadShake128(), loadGgAcceleration(), loadPairingAcceleration()]);
  const { ss, cts } = await multiEncaps(
    masterKey,
    recipients.map(([, policy]) => kemIdentity(policy)),
  );
  const entries = new Map<string, RecipientHeader>();
  recipients.forEach(([id], i) => entries.set(id, { policy: hidden[i]!, capsule: cts[i]! }));
  const iv = randomBytes(IV_BYTES);
  const header = encodeHeader({ recipients: entries, iv, mode });
  const transcript = createShake().update(header);
  const headerSignature = encodeSignatureExt(signTranscript(publicSigner, transcript), publicSigner.policy);
  const key = await importAesKey(ss.subarray(0, AES_KEY_BYTES));
  return {
    frame: encodeFrame(header, headerSignature),
    iv,
    key,
    header,
    transcript,
    signer: payloadSigner,
    sender: publicSigner.policy,
  };
}

/** In-memory mode: one AES-GCM message over bincode(MessageAndSignature). */
export async function seal(mpk: string, options: SealOptions, plain: Uint8Array): Promise<Uint8Array> {
  const message = asBytes(plain);
  if (message.length > MAX_IN_MEMORY_BYTES) {
    throw new InputError(ErrorCode.TOO_LARGE, 'in-memory messages must be smaller than 4 GiB; use sealStream');
  }
  const ctx = await prepareSeal(mpk, options, { type: 'InMemory', size: message.length });
  const signature = signTranscript(ctx.signer, ctx.transcript.update(message));
  const inner = encodeMemoryPayload(message, signature, ctx.signer.policy, ctx.sender);
  const payload = await aesGcmSeal(ctx.key, ctx.iv, inner);
  const out = new Uint8Array(ctx.frame.length + payload.length);
  out.set(ctx.frame, 0);
  out.set(payload, ctx.frame.length);
  return out;
}

/**
 * Streaming mode: reads `readable` to its end and writes the ciphertext to `writable`, which
 * is closed on success. On any failure (bad options, a source error, a sink error) the
 * writable is aborted and the source cancelled with the same typed error, so a failed seal
 * can never look like a complete ciphertext.
 */
export async function sealStream(
  mpk: string,
  options: SealOptions,
  readable: ReadableStream<Uint8Array>,
  writable: WritableStream<Uint8Array>,
): Promise<void> {
  const reader = readable.getReader();
  const writer = writable.getWriter();
  try {
    const size = statedSize(options);
    const ctx = await prepareSeal(mpk, options, streamingMode(size));
    const hasher = segmentHasher(ctx.transcript, ctx.header);
    try {
      const sealer = new SegmentSealer({ ...ctx, hasher }, DEFAULT_SEGMENT_SIZE);
      const source = size === undefined ? reader : exactly(size, readerSource(reader));
      await pumpSegments(source, writer, ctx.frame, sealer, hasher.inFlight(DEFAULT_SEGMENT_SIZE));
    } finally {
      hasher.close();
    }
  } catch (error) {
    await abortBoth(reader, writer, error);
    throw error;
  }
}

/** The stream's mode: the exact size hint when the length is known, the reference's (0, None) when not. */
const streamingMode = (size: number | undefined): Mode => ({
  type: 'Streaming',
  segmentSize: DEFAULT_SEGMENT_SIZE,
  sizeHint: size === undefined ? [0n, undefined] : [BigInt(size), BigInt(size)],
});

/** `options.size`, checked: a length in bytes, or undefined. */
function statedSize(options: unknown): number | undefined {
  let size: unknown;
  try {
    size = typeof options === 'object' && options !== null ? (options as SealOptions).size : undefined;
  } catch (error) {
    throw new InputError(ErrorCode.INVALID_INPUT, `options: reading them threw: ${describeThrown(error)}`, {
      cause: error,
    });
  }
  if (size === undefined) return undefined;
  if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0)
    throw new InputError(ErrorCode.INVALID_INPUT, "options.size must be the plaintext's length in bytes");
  return size;
}

/** Passes `source` on, failing as soon as it carries more than `size` bytes, or ends with fewer. */
function exactly(size: number, source: ChunkSource): ChunkSource {
  let seen = 0;
  const mismatch = (what: string) =>
    new InputError(ErrorCode.INVALID_INPUT, `the stream carried ${what} than the ${size} bytes options.size states`);
  return async () => {
    const chunk = await source();
    if (chunk === undefined) {
      if (seen !== size) throw mismatch('fewer');
    } else if ((seen += chunk.length) > size) throw mismatch('more');
    return chunk;
  };
}

/**
 * The exact length of the ciphertext that sealing `plaintextBytes` with `options` writes, before
 * anything is sealed: `'stream'` for `sealStream` (with `options.size` set to the same length, as
 * the header then carries it), `'memory'` for `seal`. Checks the options as sealing does.
 */
export function sealedSize(plaintextBytes: number, options: SealOptions, mode: 'stream' | 'memory' = 'stream'): number {
  const { recipients, publicSigner, payloadSigner } = readOptions(options);
  return sizeOf(plaintextBytes, recipients, publicSigner.policy, payloadSigner.policy, mode);
}

/** The recipients and the signers' identities of a message whose signing keys are not issued yet. */
export interface SealShape {
  /** The recipients, as `SealOptions.policy`. */
  policy: SealOptions['policy'];
  /** The identity the public signing key will be issued for (what the sender discloses publicly). */
  pubSignPolicy: Policy;
  /** The identity of the private signing key, when there will be one. */
  privSignPolicy?: Policy | undefined;
}

/**
 * `sealedSize` for signing keys that do not exist yet: the length sealing will write once the PKG
 * issued keys for exactly these identities. An app checks a storage limit with it before the
 * sender scans a QR code; where the disclosed values are not known in advance (any e-mail address)
 * put the longest value you allow, for an upper bound.
 */
export function expectedSealedSize(
  plaintextBytes: number,
  shape: SealShape,
  mode: 'stream' | 'memory' = 'stream',
): number {
  if (typeof shape !== 'object' || shape === null) throw invalidPolicy('shape: expected {policy, pubSignPolicy}');
  const recipients = normalizeEncryptionPolicy(shape.policy).map(([id, p]): [string, Policy] => [
    id,
    canonicalPolicy(p),
  ]);
  const pub = canonicalPolicy(normalizePolicy(shape.pubSignPolicy, 'pubSignPolicy'));
  const priv =
    shape.privSignPolicy == null ? pub : canonicalPolicy(normalizePolicy(shape.privSignPolicy, 'privSignPolicy'));
  return sizeOf(plaintextBytes, recipients, pub, priv, mode);
}

function sizeOf(
  plaintextBytes: number,
  recipients: Array<[string, Policy]>,
  publicPolicy: Policy,
  payloadPolicy: Policy,
  mode: 'stream' | 'memory',
): number {
  if (!Number.isSafeInteger(plaintextBytes) || plaintextBytes < 0)
    throw new InputError(ErrorCode.INVALID_INPUT, 'plaintextBytes must be a length in bytes');
  const hidden = recipients.map(([id, policy]) => [id, hidePolicy(policy)] as const);
  if (mode === 'memory') {
    if (plaintextBytes > MAX_IN_MEMORY_BYTES)
      throw new InputError(ErrorCode.TOO_LARGE, 'in-memory messages must be smaller than 4 GiB; use sealStream');
    const framing = framingSize(hidden, { type: 'InMemory', size: plaintextBytes }, publicPolicy);
    return framing + memoryPayloadSize(plaintextBytes, payloadPolicy, publicPolicy);
  }
  const framing = framingSize(hidden, streamingMode(plaintextBytes), publicPolicy);
  return framing + streamPayloadSize(plaintextBytes, DEFAULT_SEGMENT_SIZE, payloadPolicy, publicPolicy);
}
