import { ristretto255 } from '@noble/curves/ed25519.js';
import { bytesToNumberLE, numberToBytesLE } from '@noble/curves/utils.js';
import { sha3_256, sha3_512 } from '@noble/hashes/sha3.js';
import { randomBytes } from '@noble/hashes/utils.js';
import { invalidKey, invalidPolicy } from '../errors.js';
import { loadRistrettoWasm, type RistrettoVerifier, type RistrettoWasm } from './ristretto-wasm.js';
import type { Xof } from './xof.js';

/**
 * Galindo–Garcia identity-based signatures on ristretto255, as ibs 0.4.0 defines them:
 *   H(gr, id)     = wide(SHA3-512(enc(gr) ‖ id))
 *   G(m, id, ga)  = wide(SHAKE128(m ‖ id ‖ enc(ga)), 64 bytes)
 *   keygen: gr = r·B, y = r + z·H(gr, id)          → key (y, gr, id)
 *   sign:   ga = a·B, d = G(m, id, ga), b = a + y·d → signature (ga, b, gr)
 *   verify: b·B = ga + d·(gr + H(gr, id)·PK)
 * where wide() reads 64 bytes as a little-endian integer mod ℓ. The message is a running
 * SHAKE128 transcript supplied by the caller; signing and verifying fork it, never consume it.
 */

type Point = InstanceType<typeof ristretto255.Point>;
const Point = ristretto255.Point;
const L = Point.Fn.ORDER;

export const GG_PUBLIC_KEY_BYTES = 32;
export const GG_SECRET_KEY_BYTES = 32;
export const GG_SIGNING_KEY_BYTES = 96;
export const GG_SIGNATURE_BYTES = 96;
export const GG_IDENTITY_BYTES = 32;

const wide = (bytes: Uint8Array): bigint => bytesToNumberLE(bytes) % L;
const scalarBytes = (k: bigint): Uint8Array => numberToBytesLE(k, 32);

/** Canonical little-endian scalar below ℓ (dalek's rule), or undefined. */
function readScalar(bytes: Uint8Array): bigint | undefined {
  if (bytes.length !== 32) return undefined;
  const k = bytesToNumberLE(bytes);
  return k < L ? k : undefined;
}

function readPoint(bytes: Uint8Array): Point | undefined {
  try {
    return Point.fromBytes(bytes);
  } catch {
    return undefined;
  }
}

function randomNonZero(): bigint {
  for (;;) {
    const k = wide(randomBytes(64));
    if (k !== 0n) return k;
  }
}

/** ibs's Identity: input taken verbatim when it is exactly 32 bytes, else its SHA3-256. */
export const ggIdentity = (input: Uint8Array): Uint8Array =>
  input.length === GG_IDENTITY_BYTES ? input.slice() : sha3_256(input);

function checkIdentity(id: Uint8Array): Uint8Array {
  if (!(id instanceof Uint8Array) || id.length !== GG_IDENTITY_BYTES) {
    throw invalidPolicy(`signing identity must be ${GG_IDENTITY_BYTES} bytes`);
  }
  return id;
}

function hashH(gr: Uint8Array, id: Uint8Array): bigint {
  return wide(sha3_512.create().update(gr).update(id).digest());
}

/** The digest G hashes: the transcript's fork with `tail` = (segment suffix ‖) id ‖ enc(ga) appended. */
export const GG_DIGEST_BYTES = 64;

const concatBytes = (...parts: Uint8Array[]): Uint8Array => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) (out.set(p, at), (at += p.length));
  return out;
};

/**
 * The WebAssembly ristretto255 backend (lib/crypto/ristretto-wasm.ts), about 10x faster than
 * BigInt arithmetic for the per-segment work. Signing and verifying are synchronous, so the
 * backend is loaded ahead of time by `loadGgAcceleration()` (seal and unseal await it); until
 * it is loaded, or where WebAssembly is unavailable, @noble/curves does the work.
 */
let accel: RistrettoWasm | undefined;
let accelLoading: Promise<void> | undefined;

export function loadGgAcceleration(): Promise<void> {
  accelLoading ??= loadRistrettoWasm().then((wasm) => {
    accel = wasm;
  });
  return accelLoading;
}

/** Which backend signs and verifies: 'wasm' once loaded, else '@noble/curves'. */
export const ggBackend = (): 'wasm' | '@noble/curves' => (accel ? 'wasm' : '@noble/curves');

declare const opaque: unique symbol;

/** A parsed signing key (y, gr, id). */
export interface GgSigningKey {
  readonly [opaque]: 'GgSigningKey';
  readonly bytes: Uint8Array;
  /** The 32-byte identity the key was issued for. */
  readonly id: Uint8Array;
}

/** A parsed master verifying key (the PKG's IBS public key). */
export interface GgVerifyingKey {
  readonly [opaque]: 'GgVerifyingKey';
  readonly bytes: Uint8Array;
}

class SigningKey {
  constructor(
    readonly bytes: Uint8Array,
    readonly y: bigint,
    /** enc(gr), copied into every signature. */
    readonly gr: Uint8Array,
    readonly id: Uint8Array,
  ) {}
}

class VerifyingKey {
  constructor(
    readonly bytes: Uint8Array,
    readonly pk: Point,
  ) {}
}

/** The PKG's IBS master pair: pk = z·B (32 bytes), sk = z (32 bytes, little-endian). */
export function ggSetup(): { pk: Uint8Array; sk: Uint8Array } {
  const z = randomNonZero();
  return { pk: Point.BASE.multiply(z).toBytes(), sk: scalarBytes(z) };
}

function parseSecretKey(sk: Uint8Array): bigint {
  if (!(sk instanceof Uint8Array) || sk.length !== GG_SECRET_KEY_BYTES) {
    throw invalidKey(`IBS master secret key: expected ${GG_SECRET_KEY_BYTES} bytes`);
  }
  const z = readScalar(sk);
  if (z === undefined) throw invalidKey('IBS master secret key: scalar is not canonical');
  return z;
}

/** Checks a 32-byte IBS master secret key (canonical scalar); throws INVALID_KEY. */
export function validateGgSecretKey(sk: Uint8Array): void {
  parseSecretKey(sk);
}

/** pk = z·B for this secret key. */
export function ggPublicKeyOf(sk: Uint8Array): Uint8Array {
  const z = parseSecretKey(sk);
  return (z === 0n ? Point.ZERO : Point.BASE.multiply(z)).toBytes();
}

/** The 96-byte signing key y ‖ enc(gr) ‖ id for a 32-byte identity (lib/policy.ts signingIdentity). */
export function ggKeygen(sk: Uint8Array, id: Uint8Array): Uint8Array {
  const z = parseSecretKey(sk);
  checkIdentity(id);
  const r = randomNonZero();
  const gr = Point.BASE.multiply(r).toBytes();
  const y = (r + z * hashH(gr, id)) % L;
  const out = new Uint8Array(GG_SIGNING_KEY_BYTES);
  out.set(scalarBytes(y), 0);
  out.set(gr, 32);
  out.set(id, 64);
  return out;
}

/** Parses a 96-byte signing key; INVALID_KEY for a non-canonical y or an invalid gr. */
export function parseSigningKey(bytes: Uint8Array): GgSigningKey {
  if (!(bytes instanceof Uint8Array) || bytes.length !== GG_SIGNING_KEY_BYTES) {
    throw invalidKey(`signing key: expected ${GG_SIGNING_KEY_BYTES} bytes`);
  }
  const copy = bytes.slice();
  const y = readScalar(copy.subarray(0, 32));
  if (y === undefined) throw invalidKey('signing key: scalar y is not canonical');
  const gr = copy.subarray(32, 64);
  if (!readPoint(gr)) throw invalidKey('signing key: gr is not a valid ristretto255 encoding');
  return new SigningKey(copy, y, gr, copy.subarray(64)) as unknown as GgSigningKey;
}

/** Parses the 32-byte master verifying key; INVALID_KEY for an invalid encoding. */
export function parseVerifyingKey(bytes: Uint8Array): GgVerifyingKey {
  if (!(bytes instanceof Uint8Array) || bytes.length !== GG_PUBLIC_KEY_BYTES) {
    throw invalidKey(`verifying key: expected ${GG_PUBLIC_KEY_BYTES} bytes`);
  }
  const copy = bytes.slice();
  const pk = readPoint(copy);
  if (!pk) throw invalidKey('verifying key: not a valid ristretto255 encoding');
  return new VerifyingKey(copy, pk) as unknown as GgVerifyingKey;
}

function unwrap<T>(value: unknown, cls: new (...args: never[]) => T, what: string): T {
  if (!(value instanceof cls)) throw new TypeError(`expected a ${what} made by this module`);
  return value;
}

/** Signs what the transcript has absorbed so far; the transcript itself is left untouched. */
export function ggSign(key: GgSigningKey, transcript: Xof): Uint8Array {
  const pending = ggSignLater(key, new Uint8Array(0));
  return pending.finish(transcript.clone().update(pending.tail).digest(GG_DIGEST_BYTES));
}

/**
 * A signature whose transcript is hashed elsewhere (another thread): `tail` is what to append
 * to a fork of the transcript (after `prefix`, a segment's suffix), and `finish` takes that
 * fork's 64-byte digest. The secret nonce stays inside; each `finish` may be called once.
 */
export function ggSignLater(
  key: GgSigningKey,
  prefix: Uint8Array,
): { tail: Uint8Array; finish(digest: Uint8Array): Uint8Array } {
  const k = unwrap(key, SigningKey, 'GgSigningKey');
  const a = randomNonZero();
  // a is secret: both backends multiply in constant time.
  const ga = accel ? accel.baseMulEncode(scalarBytes(a)) : Point.BASE.multiply(a).toBytes();
  let used = false;
  return {
    tail: concatBytes(prefix, k.id, ga),
    finish(digest) {
      // A nonce signs one digest only: two signatures with one nonce would give away the key.
      if (used) throw new Error('this signature was already finished');
      used = true;
      const d = wide(digest);
      const b = (a + k.y * d) % L;
      const sig = new Uint8Array(GG_SIGNATURE_BYTES);
      sig.set(ga, 0);
      sig.set(scalarBytes(b), 32);
      sig.set(k.gr, 64);
      return sig;
    },
  };
}

/**
 * Whether `sig` signs the transcript for identity `id` under the master verifying key. False,
 * never an exception, for a signature of the wrong length, a non-canonical b or an invalid point.
 * The transcript is left untouched.
 */
export function ggVerify(vk: GgVerifyingKey, id: Uint8Array, sig: Uint8Array, transcript: Xof): boolean {
  const { pk } = unwrap(vk, VerifyingKey, 'GgVerifyingKey');
  checkIdentity(id);
  if (!(sig instanceof Uint8Array) || sig.length !== GG_SIGNATURE_BYTES) return false;
  const gaBytes = sig.subarray(0, 32);
  const grBytes = sig.subarray(64, 96);
  const ga = readPoint(gaBytes);
  const b = readScalar(sig.subarray(32, 64));
  const gr = readPoint(grBytes);
  if (!ga || b === undefined || !gr) return false;
  const c = hashH(grBytes, id);
  const d = wide(transcript.clone().update(id).update(gaBytes).digest(GG_DIGEST_BYTES));
  // Public data only, so the variable-time multiplications are fine.
  const rhs = ga.add(gr.multiplyUnsafe(d)).add(pk.multiplyUnsafe((c * d) % L));
  return Point.BASE.multiplyUnsafe(b).equals(rhs);
}

/** Whether a signing key satisfies y·B = gr + H(gr, id)·PK under this verifying key. */
export function ggSigningKeyMatches(vk: GgVerifyingKey, key: GgSigningKey): boolean {
  const { pk } = unwrap(vk, VerifyingKey, 'GgVerifyingKey');
  const k = unwrap(key, SigningKey, 'GgSigningKey');
  const gr = Point.fromBytes(k.gr);
  // y is the key holder's secret: constant-time multiplication.
  const yB = k.y === 0n ? Point.ZERO : Point.BASE.multiply(k.y);
  return yB.equals(gr.add(pk.multiplyUnsafe(hashH(k.gr, k.id))));
}

/** Signatures a bound verifier checks before it builds a window table for the signer's Q. */
const TABLE_AFTER = 8;
const TABLE_WINDOW = 6;

/**
 * A verifier for one identity under one master key, for checking many signatures by the same
 * signing key (every segment of a stream). The signer's point Q = gr + H(gr, id)·PK is fixed,
 * so it is computed once per gr, and after a few signatures a window table for it makes each
 * check one fixed-base and one table multiplication: b·B − d·Q must equal ga.
 */
export class GgBoundVerifier {
  private gr: Uint8Array | undefined;
  private q: Point | undefined;
  private qBytes: Uint8Array | undefined;
  private prepared: RistrettoVerifier | undefined;
  private uses = 0;
  private readonly pk: Point;

  constructor(
    vk: GgVerifyingKey,
    private readonly id: Uint8Array,
  ) {
    this.pk = unwrap(vk, VerifyingKey, 'GgVerifyingKey').pk;
    checkIdentity(id);
  }

  /** Same contract as ggVerify. */
  verify(sig: Uint8Array, transcript: Xof): boolean {
    const tail = this.tail(new Uint8Array(0), sig);
    return tail !== undefined && this.verifyDigest(sig, transcript.clone().update(tail).digest(GG_DIGEST_BYTES));
  }

  /**
   * For a transcript hashed elsewhere: what to append to its fork (after `prefix`, a segment's
   * suffix) to check `sig`, or undefined for a signature that cannot verify whatever the digest.
   */
  tail(prefix: Uint8Array, sig: Uint8Array): Uint8Array | undefined {
    if (!(sig instanceof Uint8Array) || sig.length !== GG_SIGNATURE_BYTES) return undefined;
    return concatBytes(prefix, this.id, sig.subarray(0, 32));
  }

  /** Whether `sig` verifies, given the 64-byte digest of the transcript's fork with its `tail`. */
  verifyDigest(sig: Uint8Array, digest: Uint8Array): boolean {
    if (!(sig instanceof Uint8Array) || sig.length !== GG_SIGNATURE_BYTES || digest.length !== GG_DIGEST_BYTES)
      return false;
    const gaBytes = sig.subarray(0, 32);
    const b = readScalar(sig.subarray(32, 64));
    if (b === undefined) return false;
    const q = this.signerPoint(sig.subarray(64, 96));
    if (!q) return false;
    const d = wide(digest);
    if (accel) {
      const bBytes = sig.subarray(32, 64);
      if (this.prepared) return this.prepared.check(bBytes, scalarBytes(d), gaBytes);
      return accel.checkOnce((this.qBytes ??= q.toBytes()), bBytes, scalarBytes(d), gaBytes);
    }
    // Encodings are canonical, so comparing bytes is comparing points (and rejects a bad ga).
    const r = Point.BASE.multiplyUnsafe(b).subtract(q.multiplyUnsafe(d));
    return equalBytes(r.toBytes(), gaBytes);
  }

  private signerPoint(grBytes: Uint8Array): Point | undefined {
    if (!this.gr || !equalBytes(this.gr, grBytes)) {
      const gr = readPoint(grBytes);
      if (!gr) return undefined;
      this.gr = grBytes.slice();
      this.q = gr.add(this.pk.multiplyUnsafe(hashH(grBytes, this.id)));
      this.qBytes = undefined;
      this.prepared = undefined;
      this.uses = 0;
    }
    if (++this.uses === TABLE_AFTER) {
      if (accel) this.prepared = accel.prepareVerifier((this.qBytes ??= this.q!.toBytes()));
      else this.q!.precompute(TABLE_WINDOW, false);
    }
    return this.q;
  }
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}
