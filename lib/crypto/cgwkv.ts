import { normalizeZ } from '@noble/curves/abstract/curve.js';
import type { WeierstrassPoint } from '@noble/curves/abstract/weierstrass.js';
import { bls12_381 } from '@noble/curves/bls12-381.js';
import { bytesToNumberLE, numberToBytesLE } from '@noble/curves/utils.js';
import { sha3_512, shake256 } from '@noble/hashes/sha3.js';
import { randomBytes } from '@noble/hashes/utils.js';
import { AuthenticationError, ErrorCode, InputError, invalidKey, malformed, type PostGuardError } from '../errors.js';
import { aesGcmOpen, aesGcmSeal, importAesKey } from '#aes';
import { AES_KEY_BYTES, GCM_IV_BYTES, GCM_TAG_BYTES } from './aes.js';
import { loadPairingWasm, type PairingWasm } from './bls-wasm.js';
import { G1_BETA } from './bls-wasm-layout.js';
import { compressGt, decompressGt, GtPowBase, gtEquals, gtGenerator, GT_ONE, lexFp, lexFp2, R } from './gt.js';

/**
 * CGWKV, the identity-based KEM of PostGuard (ibe 0.3.0: Chen–Gay–Wee IBE with the CCA
 * transform of eprint 2022/1436), and the multi-recipient wrap around it that puts one shared
 * secret into one capsule per recipient (AES-128-GCM under the first 16 bytes of each
 * recipient's KEM secret: ibe 0.3.0, not the HKDF of later ibe versions).
 *
 * Identity points: pg-curve's pairing skips pairs that contain the identity, noble's throws.
 * No honest party produces an identity point in a master public key, a user secret key or a
 * ciphertext (the chance is about 2^-255), and a ciphertext made of identity points would give
 * every recipient the same publicly known KEM secret. So parsing rejects them all: this is
 * stricter than the reference, never weaker.
 */

type G1 = WeierstrassPoint<bigint>;
type G2 = WeierstrassPoint<import('@noble/curves/abstract/tower.js').Fp2>;
type LinePrecompute = ReturnType<typeof bls12_381.utils.calcPairingPrecomputes>;

const G1Point = bls12_381.G1.Point;
const G2Point = bls12_381.G2.Point;
const Fp = bls12_381.fields.Fp;

export const MPK_BYTES = 672;
export const MSK_BYTES = 512;
export const USK_BYTES = 576;
export const CGWKV_CT_BYTES = 224;
export const MKEM_CT_BYTES = 284;
export const SS_BYTES = 32;
export const KEM_ID_BYTES = 64;

const G1_BYTES = 48;
const G2_BYTES = 96;
const SCALAR_BYTES = 32;
const KK_BYTES = 32;
const WRAP_BYTES = SS_BYTES + GCM_TAG_BYTES;

// ---------------------------------------------------------------------------------------------
// Scalars of BLS12-381 (mod r), in pg-curve's 32-byte little-endian encoding.

/** Canonical little-endian scalar, or undefined when the value is not below r. */
export function scalarFromBytes(bytes: Uint8Array): bigint | undefined {
  if (bytes.length !== SCALAR_BYTES) return undefined;
  const k = bytesToNumberLE(bytes);
  return k < R ? k : undefined;
}

export const scalarToBytes = (k: bigint): Uint8Array => numberToBytesLE(k, SCALAR_BYTES);

/** A 64-byte string read as one little-endian integer, reduced mod r (zkcrypto from_bytes_wide). */
export const wideScalar = (bytes: Uint8Array): bigint => bytesToNumberLE(bytes) % R;

/** Uniform non-zero scalar: 64 random bytes, wide-reduced, as pg-curve draws them. */
export function randomScalar(): bigint {
  for (;;) {
    const k = wideScalar(randomBytes(64));
    if (k !== 0n) return k;
  }
}

const mod = (k: bigint): bigint => ((k % R) + R) % R;

// ---------------------------------------------------------------------------------------------
// G1 multiplication through the GLV endomorphism φ(X, Y, Z) = (β·X, -Y, Z), which acts on G1 as
// multiplication by λ = x² (noble's subgroup check uses its negation, (β·X, Y, Z) = -x²·P). A 255-bit scalar splits
// into two halves below 2^128 (k = k0 + k1·λ), so a sum of n scalar multiples is one chain of
// 128 doublings over a joint table of 2^(2n) sums of the points and their images.

/** λ = x², so that φ(P) = λ·P on G1. */
export const GLV_LAMBDA = 0xd201000000010000n ** 2n;
const HALF_BITS = 128;

export const g1Endomorphism = (p: G1): G1 => new G1Point(Fp.mul(p.X, G1_BETA), Fp.neg(p.Y), p.Z);

/** Sums of the points P_i and φ(P_i) for every subset (bit 2i: P_i, bit 2i+1: φ(P_i)). */
export function g1JointTable(points: G1[]): G1[] {
  const bases = points.flatMap((p) => [p, g1Endomorphism(p)]);
  const table: G1[] = [G1Point.ZERO];
  for (let m = 1; m < 1 << bases.length; m++) {
    const low = 31 - Math.clz32(m & -m);
    table.push(m === 1 << low ? bases[low]! : table[m & (m - 1)]!.add(bases[low]!));
  }
  return table;
}

/**
 * The joint-table index of each step of Σ k_i·P_i, most significant first: bit 2i of a digit
 * is a bit of k_i's low half, bit 2i+1 of its high half (k = k0 + k1·λ).
 */
export function g1SumDigits(scalars: bigint[]): Uint8Array {
  const halves: bigint[] = [];
  for (const k of scalars) {
    if (k < 0n || k >= R) throw new RangeError('scalar out of range');
    halves.push(k % GLV_LAMBDA, k / GLV_LAMBDA);
  }
  const digits = new Uint8Array(HALF_BITS);
  for (let bit = HALF_BITS - 1; bit >= 0; bit--) {
    const b = BigInt(bit);
    let m = 0;
    for (let i = 0; i < halves.length; i++) m |= Number((halves[i]! >> b) & 1n) << i;
    digits[HALF_BITS - 1 - bit] = m;
  }
  return digits;
}

/**
 * Σ k_i·P_i for the points the table was built from, 0 <= k_i < r. The operation sequence
 * (128 doublings, 128 additions, full-scan table reads) does not depend on the scalars, which
 * may be secret.
 */
export function g1MulSum(table: G1[], scalars: bigint[]): G1 {
  if (table.length !== 1 << (2 * scalars.length)) throw new RangeError('joint table does not fit the scalars');
  const digits = g1SumDigits(scalars);
  let acc = G1Point.ZERO;
  for (const m of digits) {
    acc = acc.double();
    let sel = table[0]!;
    for (let i = 1; i < table.length; i++) sel = i === m ? table[i]! : sel;
    acc = acc.add(sel);
  }
  return acc;
}

/** k·P for a public scalar: variable-time, two 128-bit halves through noble's Strauss–Shamir. */
function g1MulPublic(p: G1, k: bigint): G1 {
  if (pairingAccel) return G1Point.fromAffine(pairingAccel.g1MulPublic(p.toAffine(), k));
  return p.mulAddUnsafe(k % GLV_LAMBDA, g1Endomorphism(p), k / GLV_LAMBDA);
}

// ---------------------------------------------------------------------------------------------
// Point encoding (ZCash / zkcrypto format, identical to noble's). noble's toBytes re-runs the
// subgroup check on every point it encodes, which costs more than the encoding; the points we
// encode are all computed from validated ones, so we write the bytes ourselves.

const FLAG_COMPRESSED = 0x80;
const FLAG_INFINITY = 0x40;
const FLAG_Y_LARGEST = 0x20;

/** 48-byte compressed G1: x with flags (compressed; infinity; y lexicographically largest). */
export function encodeG1(p: G1): Uint8Array {
  if (p.is0()) return infinity(G1_BYTES, FLAG_COMPRESSED);
  const { x, y } = p.toAffine();
  const out = Fp.toBytes(x);
  out[0]! |= FLAG_COMPRESSED | (lexFp(y) ? FLAG_Y_LARGEST : 0);
  return out;
}

/** 96-byte uncompressed G1: x ‖ y, flags clear (0x40 for infinity). */
export function encodeG1Uncompressed(p: G1): Uint8Array {
  if (p.is0()) return infinity(2 * G1_BYTES, 0);
  const { x, y } = p.toAffine();
  const out = new Uint8Array(2 * G1_BYTES);
  out.set(Fp.toBytes(x), 0);
  out.set(Fp.toBytes(y), G1_BYTES);
  return out;
}

/** 96-byte compressed G2: x as c1 ‖ c0, flags as for G1 with pg-curve's Fp2 ordering of y. */
export function encodeG2(p: G2): Uint8Array {
  if (p.is0()) return infinity(G2_BYTES, FLAG_COMPRESSED);
  const { x, y } = p.toAffine();
  const out = new Uint8Array(G2_BYTES);
  out.set(Fp.toBytes(x.c1), 0);
  out.set(Fp.toBytes(x.c0), G1_BYTES);
  out[0]! |= FLAG_COMPRESSED | (lexFp2(y) ? FLAG_Y_LARGEST : 0);
  return out;
}

function infinity(length: number, flags: number): Uint8Array {
  const out = new Uint8Array(length);
  out[0] = flags | FLAG_INFINITY;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Hashing

/** RPC(kk, c0) = wide(SHA3-512(kk ‖ uncompressed c0[0] ‖ uncompressed c0[1])). */
function rpc(kk: Uint8Array, c0: readonly [G1, G1]): bigint {
  const h = sha3_512.create();
  h.update(kk);
  h.update(encodeG1Uncompressed(c0[0]));
  h.update(encodeG1Uncompressed(c0[1]));
  return wideScalar(h.digest());
}

/** The 32-byte KEM secret: SHAKE256 of the compressed pairing value. */
const sharedSecret = (gt: ReturnType<typeof decompressGt>): Uint8Array => shake256(compressGt(gt), { dkLen: SS_BYTES });

function kemScalar(kemId: Uint8Array): bigint {
  if (!(kemId instanceof Uint8Array) || kemId.length !== KEM_ID_BYTES) {
    throw new InputError(ErrorCode.INVALID_POLICY, `KEM identity must be ${KEM_ID_BYTES} bytes`);
  }
  return wideScalar(kemId);
}

// ---------------------------------------------------------------------------------------------
// The WebAssembly pairing (lib/crypto/bls-wasm.ts): G2 decoding with its line coefficients and
// the multi-pairing and G1 work of decapsulation, 4-7x faster than BigInt arithmetic. Parsing and
// decapsulation are synchronous, so the backend is loaded ahead of time by
// `loadPairingAcceleration()` (unseal awaits it); until then, or where WebAssembly is
// unavailable, @noble/curves does the work. Both give identical results.

let pairingAccel: PairingWasm | undefined;
let pairingLoading: Promise<void> | undefined;

export function loadPairingAcceleration(): Promise<void> {
  pairingLoading ??= loadPairingWasm().then((wasm) => {
    pairingAccel ??= wasm;
  });
  return pairingLoading;
}

/** Which backend parses user secret keys and pairs: 'wasm' once loaded, else '@noble/curves'. */
export const pairingBackend = (): 'wasm' | '@noble/curves' => (pairingAccel ? 'wasm' : '@noble/curves');

/** For tests: run with the given backend (undefined: @noble/curves) and return the previous one. */
export function setPairingBackend(wasm: PairingWasm | undefined): PairingWasm | undefined {
  const previous = pairingAccel;
  pairingAccel = wasm;
  return previous;
}

// ---------------------------------------------------------------------------------------------
// Point decoding

function decodeG1(bytes: Uint8Array, offset: number): G1 | string {
  if (pairingAccel) {
    const a = pairingAccel.decodeG1(bytes, offset);
    if ('x' in a) return G1Point.fromAffine(a);
    return a.identity
      ? `G1 point at offset ${offset} is the identity`
      : `G1 point at offset ${offset} is invalid (${a.why})`;
  }
  let p: G1;
  try {
    p = G1Point.fromBytes(bytes.subarray(offset, offset + G1_BYTES));
  } catch (e) {
    return `G1 point at offset ${offset} is invalid (${(e as Error).message})`;
  }
  return p.is0() ? `G1 point at offset ${offset} is the identity` : p;
}

function decodeG2(bytes: Uint8Array, offset: number): G2 | string {
  let p: G2;
  try {
    p = G2Point.fromBytes(bytes.subarray(offset, offset + G2_BYTES));
  } catch (e) {
    return `G2 point at offset ${offset} is invalid (${(e as Error).message})`;
  }
  return p.is0() ? `G2 point at offset ${offset} is the identity` : p;
}

function decodePoints<T>(
  bytes: Uint8Array,
  count: number,
  size: number,
  decode: (b: Uint8Array, o: number) => T | string,
  fail: (why: string) => PostGuardError,
): T[] {
  const out: T[] = [];
  for (let i = 0; i < count; i++) {
    const p = decode(bytes, i * size);
    if (typeof p === 'string') throw fail(p);
    out.push(p);
  }
  return out;
}

function checkBytes(bytes: unknown, length: number, fail: (why: string) => PostGuardError): Uint8Array {
  if (!(bytes instanceof Uint8Array)) throw fail('expected a Uint8Array');
  if (bytes.length !== length) throw fail(`expected ${length} bytes, got ${bytes.length}`);
  return bytes;
}

// ---------------------------------------------------------------------------------------------
// Keys and ciphertexts. The exported types are opaque; the classes stay private to this module.

declare const opaque: unique symbol;

/** A parsed, validated master public key with what encapsulation needs precomputed. */
export interface MasterPublicKey {
  readonly [opaque]: 'MasterPublicKey';
  /** The 672-byte encoding it was parsed from. */
  readonly bytes: Uint8Array;
}

/** A parsed, validated user secret key with its pairing line coefficients precomputed. */
export interface UserSecretKey {
  readonly [opaque]: 'UserSecretKey';
  readonly bytes: Uint8Array;
}

/** A parsed 224-byte CGWKV ciphertext (points validated). */
export interface CgwkvCiphertext {
  readonly [opaque]: 'CgwkvCiphertext';
  readonly bytes: Uint8Array;
}

/** A parsed 284-byte multi-recipient capsule: CGWKV ciphertext plus the wrapped shared secret. */
export interface MkemCiphertext {
  readonly [opaque]: 'MkemCiphertext';
  readonly bytes: Uint8Array;
}

class Mpk {
  readonly kt: GtPowBase;
  private noble: { a: G1[][]; b: G1[][] } | undefined;
  private wasm: { engine: PairingWasm; a: Uint8Array[]; b: Uint8Array[]; kt: Uint8Array } | undefined;

  constructor(
    readonly bytes: Uint8Array,
    /** A[0], A[1], B0[0], B0[1], B1[0], B1[1], B'[0], B'[1]. */
    readonly points: G1[],
    kt: ReturnType<typeof decompressGt>,
  ) {
    this.kt = new GtPowBase(kt);
  }

  /** The bases of c0[j] = s·A[j] and of c1[j] = s·B0[j] + (s·x)·B1[j] + (s·x')·B'[j]. */
  private bases(): { a: G1[][]; b: G1[][] } {
    const [a0, a1, b00, b01, b10, b11, bp0, bp1] = this.points as [G1, G1, G1, G1, G1, G1, G1, G1];
    return {
      a: [[a0], [a1]],
      b: [
        [b00, b10, bp0],
        [b01, b11, bp1],
      ],
    };
  }

  /** Joint tables for @noble/curves (built on first use: a key may only ever meet the wasm path). */
  nobleTables(): { a: G1[][]; b: G1[][] } {
    if (!this.noble) {
      const { a, b } = this.bases();
      this.noble = { a: a.map(g1JointTable), b: b.map(g1JointTable) };
    }
    return this.noble;
  }

  /** The same tables and KT's in the wasm engine's form, built by it on first use. */
  wasmTables(engine: PairingWasm): { a: Uint8Array[]; b: Uint8Array[]; kt: Uint8Array } {
    if (this.wasm?.engine !== engine) {
      const { a, b } = this.bases();
      const table = (ps: G1[]) => engine.g1Table(ps.map((p) => p.toAffine()));
      this.wasm = { engine, a: a.map(table), b: b.map(table), kt: engine.gtTable(this.kt.entries) };
    }
    return this.wasm;
  }
}

class Usk {
  constructor(
    readonly bytes: Uint8Array,
    /**
     * Line coefficients of d0[0], d0[1], d1[0], d1[1], d2[0], d2[1]: noble's, or the wasm
     * backend's. A key parsed before the backend was loaded switches on its next use.
     */
    public lines: LinePrecompute[] | { wasm: PairingWasm; lines: Uint8Array },
  ) {}
}

class CgwkvCt {
  constructor(
    readonly bytes: Uint8Array,
    readonly c0: readonly [G1, G1],
    readonly c1: readonly [G1, G1],
    readonly kk: Uint8Array,
  ) {}
}

class MkemCt {
  constructor(
    readonly bytes: Uint8Array,
    readonly ct: CgwkvCt,
    /** AES-GCM ciphertext of the shared secret followed by its tag. */
    readonly wrap: Uint8Array,
    readonly nonce: Uint8Array,
  ) {}
}

function unwrap<T>(value: unknown, cls: new (...args: never[]) => T, what: string): T {
  if (!(value instanceof cls)) throw new TypeError(`expected a ${what} made by this module`);
  return value;
}

const mpkError = (why: string) => invalidKey(`master public key: ${why}`);
const mskError = (why: string) => invalidKey(`master secret key: ${why}`);
const uskError = (why: string) => invalidKey(`user secret key: ${why}`);
const ctError = (why: string) => malformed(`KEM ciphertext: ${why}`);

/**
 * Parses the 672-byte master public key: 8 G1 points and the Gt element KT, all checked to be
 * in their prime-order subgroups and not the identity. ibe 0.3.0 skips these checks; we apply
 * them (as ibe's later releases do, GHSA-25fp-2fjj-g84w) because a key outside the subgroups
 * or with KT = 1 would leak what is encrypted under it.
 */
export function parseMasterPublicKey(bytes: Uint8Array): MasterPublicKey {
  checkBytes(bytes, MPK_BYTES, mpkError);
  const copy = bytes.slice();
  const points = decodePoints(copy, 8, G1_BYTES, decodeG1, mpkError);
  let kt;
  try {
    kt = decompressGt(copy.subarray(8 * G1_BYTES));
  } catch (e) {
    throw mpkError((e as Error).message);
  }
  if (gtEquals(kt, GT_ONE)) throw mpkError('KT is the identity');
  return new Mpk(copy, points, kt) as unknown as MasterPublicKey;
}

/** Parses the 576-byte user secret key (6 G2 points, subgroup-checked, none the identity). */
export function parseUserSecretKey(bytes: Uint8Array): UserSecretKey {
  checkBytes(bytes, USK_BYTES, uskError);
  const copy = bytes.slice();
  const wasm = pairingAccel;
  if (wasm) {
    const lines = wasm.prepareG2(copy, 6);
    if (!(lines instanceof Uint8Array)) {
      const offset = lines.index * G2_BYTES;
      throw uskError(
        lines.identity
          ? `G2 point at offset ${offset} is the identity`
          : `G2 point at offset ${offset} is invalid (${lines.why})`,
      );
    }
    return new Usk(copy, { wasm, lines }) as unknown as UserSecretKey;
  }
  const points = decodePoints(copy, 6, G2_BYTES, decodeG2, uskError);
  const lines = points.map((q) => bls12_381.utils.calcPairingPrecomputes(q));
  return new Usk(copy, lines) as unknown as UserSecretKey;
}

function parseCt(bytes: Uint8Array): CgwkvCt {
  const points = decodePoints(bytes, 4, G1_BYTES, decodeG1, ctError) as [G1, G1, G1, G1];
  return new CgwkvCt(bytes, [points[0], points[1]], [points[2], points[3]], bytes.subarray(4 * G1_BYTES));
}

/** Parses a 224-byte CGWKV ciphertext; throws a FormatError (MALFORMED) on invalid points. */
export function parseCgwkvCiphertext(bytes: Uint8Array): CgwkvCiphertext {
  checkBytes(bytes, CGWKV_CT_BYTES, ctError);
  return parseCt(bytes.slice()) as unknown as CgwkvCiphertext;
}

/**
 * Parses a 284-byte multi-recipient capsule (as found in a header): the four G1 points are
 * decoded with subgroup checks, as the reference does while decoding a header.
 */
export function parseMkemCiphertext(bytes: Uint8Array): MkemCiphertext {
  checkBytes(bytes, MKEM_CT_BYTES, ctError);
  const copy = bytes.slice();
  const ct = parseCt(copy.subarray(0, CGWKV_CT_BYTES));
  const wrap = copy.subarray(CGWKV_CT_BYTES, CGWKV_CT_BYTES + WRAP_BYTES);
  const nonce = copy.subarray(CGWKV_CT_BYTES + WRAP_BYTES);
  return new MkemCt(copy, ct, wrap, nonce) as unknown as MkemCiphertext;
}

interface MasterSecret {
  b: [bigint, bigint];
  k: [bigint, bigint];
  w0: [[bigint, bigint], [bigint, bigint]];
  w1: [[bigint, bigint], [bigint, bigint]];
  wp: [[bigint, bigint], [bigint, bigint]];
}

/** 16 canonical little-endian scalars: b, k, then W0, W1, W' row by row. */
function parseMsk(bytes: Uint8Array): MasterSecret {
  checkBytes(bytes, MSK_BYTES, mskError);
  const s: bigint[] = [];
  for (let i = 0; i < 16; i++) {
    const k = scalarFromBytes(bytes.subarray(i * SCALAR_BYTES, (i + 1) * SCALAR_BYTES));
    if (k === undefined) throw mskError(`scalar ${i} is not below the group order`);
    s.push(k);
  }
  const at = (i: number) => s[i]!;
  const matrix = (o: number): [[bigint, bigint], [bigint, bigint]] => [
    [at(o), at(o + 1)],
    [at(o + 2), at(o + 3)],
  ];
  return { b: [at(0), at(1)], k: [at(2), at(3)], w0: matrix(4), w1: matrix(8), wp: matrix(12) };
}

function encodeMsk(m: MasterSecret): Uint8Array {
  const scalars = [...m.b, ...m.k, ...m.w0.flat(), ...m.w1.flat(), ...m.wp.flat()];
  const out = new Uint8Array(MSK_BYTES);
  scalars.forEach((k, i) => out.set(scalarToBytes(k), i * SCALAR_BYTES));
  return out;
}

/** Checks that a master secret key is well formed (16 canonical scalars); throws INVALID_KEY. */
export function validateMasterSecretKey(bytes: Uint8Array): void {
  parseMsk(bytes);
}

// ---------------------------------------------------------------------------------------------
// The scheme

/** Secret scalar times the G1 generator (noble's blinded fixed-base path); 0 gives the identity. */
function g1Base(k: bigint): G1 {
  return k === 0n ? G1Point.ZERO : G1Point.BASE.multiply(k);
}

let g2Generator: G2 | undefined;

/**
 * Secret scalar times the G2 generator; 0 gives the identity. Extraction (the PKG's hot path)
 * makes six of these, so a private copy of the generator carries a large fixed-base table
 * (window 8: 33 additions per multiple, built once per process in about 0.15 s, ~2.5 MB).
 */
function g2Base(k: bigint): G2 {
  if (!g2Generator) {
    g2Generator = G2Point.fromAffine(G2Point.BASE.toAffine());
    g2Generator.precompute(8, false);
  }
  return k === 0n ? G2Point.ZERO : g2Generator.multiply(k);
}

/** Fresh PKG master key pair: MPK 672 bytes, MSK 512 bytes. */
export function cgwkvSetup(): { mpk: Uint8Array; msk: Uint8Array } {
  const a: [bigint, bigint] = [randomScalar(), randomScalar()];
  const pair = (): [bigint, bigint] => [randomScalar(), randomScalar()];
  const m: MasterSecret = {
    b: pair(),
    k: pair(),
    w0: [pair(), pair()],
    w1: [pair(), pair()],
    wp: [pair(), pair()],
  };
  // [Wᵀa]₁: column j of W weighted by a.
  const wta = (w: MasterSecret['w0'], j: 0 | 1) => mod(w[0][j] * a[0] + w[1][j] * a[1]);
  const scalars = [a[0], a[1], wta(m.w0, 0), wta(m.w0, 1), wta(m.w1, 0), wta(m.w1, 1), wta(m.wp, 0), wta(m.wp, 1)];
  const mpk = new Uint8Array(MPK_BYTES);
  normalizeZ(G1Point, scalars.map(g1Base)).forEach((p, i) => mpk.set(encodeG1(p), i * G1_BYTES));
  const kt = gtGenerator().pow(mod(m.k[0] * a[0] + m.k[1] * a[1]));
  mpk.set(compressGt(kt), 8 * G1_BYTES);
  return { mpk, msk: encodeMsk(m) };
}

/** The 576-byte user secret key for a 64-byte KEM identity (lib/policy.ts kemIdentity). */
export function extractUsk(msk: Uint8Array, kemId: Uint8Array): Uint8Array {
  const m = parseMsk(msk);
  const x = kemScalar(kemId);
  const r = randomScalar();
  const beta: [bigint, bigint] = [mod(m.b[0] * r), mod(m.b[1] * r)];
  // Row i of W times β.
  const wb = (w: MasterSecret['w0'], i: 0 | 1) => w[i][0] * beta[0] + w[i][1] * beta[1];
  const scalars = [
    beta[0],
    beta[1],
    mod(m.k[0] - wb(m.w0, 0) - x * wb(m.w1, 0)),
    mod(m.k[1] - wb(m.w0, 1) - x * wb(m.w1, 1)),
    mod(-wb(m.wp, 0)),
    mod(-wb(m.wp, 1)),
  ];
  const usk = new Uint8Array(USK_BYTES);
  normalizeZ(G2Point, scalars.map(g2Base)).forEach((p, i) => usk.set(encodeG2(p), i * G2_BYTES));
  return usk;
}

/** Single-recipient encapsulation: a 224-byte ciphertext and its 32-byte secret. */
export function encaps(mpk: MasterPublicKey, kemId: Uint8Array): { ct: Uint8Array; ss: Uint8Array } {
  const key = unwrap(mpk, Mpk, 'MasterPublicKey');
  return encapsWith(key, kemScalar(kemId), randomScalar(), randomBytes(KK_BYTES), pairingAccel);
}

/** Encapsulation with its randomness given (s, kk), on the wasm engine when one is given. */
function encapsWith(
  key: Mpk,
  x: bigint,
  s: bigint,
  kk: Uint8Array,
  engine: PairingWasm | undefined,
): { ct: Uint8Array; ss: Uint8Array } {
  let sum: (j: number, which: 'a' | 'b', scalars: bigint[]) => G1;
  let pow: (k: bigint) => ReturnType<typeof decompressGt>;
  if (engine) {
    const tables = key.wasmTables(engine);
    sum = (j, which, scalars) => {
      const p = engine.g1MulSum(tables[which][j]!, g1SumDigits(scalars));
      return p ? G1Point.fromAffine(p) : G1Point.ZERO;
    };
    pow = (k) => engine.gtPow(tables.kt, key.kt.digits(k));
  } else {
    const tables = key.nobleTables();
    sum = (j, which, scalars) => g1MulSum(tables[which][j]!, scalars);
    pow = (k) => key.kt.pow(k);
  }
  // Affine once for both points: encoding needs affine coordinates, and an inversion costs
  // about as much as a third of a scalar multiplication (the wasm sums are affine already).
  const c0 = normalizeZ(G1Point, [sum(0, 'a', [s]), sum(1, 'a', [s])]) as [G1, G1];
  const xPrime = rpc(kk, c0);
  const sx = mod(s * x);
  const sxPrime = mod(s * xPrime);
  const c1 = normalizeZ(G1Point, [sum(0, 'b', [s, sx, sxPrime]), sum(1, 'b', [s, sx, sxPrime])]);
  const ct = new Uint8Array(CGWKV_CT_BYTES);
  [...c0, ...c1].forEach((p, i) => ct.set(encodeG1(p), i * G1_BYTES));
  ct.set(kk, 4 * G1_BYTES);
  return { ct, ss: sharedSecret(pow(s)) };
}

/** For tests: encapsulation with given randomness on a given backend (undefined: @noble/curves). */
export function encapsDeterministic(
  mpk: MasterPublicKey,
  kemId: Uint8Array,
  s: bigint,
  kk: Uint8Array,
  engine: PairingWasm | undefined,
): { ct: Uint8Array; ss: Uint8Array } {
  return encapsWith(unwrap(mpk, Mpk, 'MasterPublicKey'), kemScalar(kemId), s, kk, engine);
}

/**
 * Decapsulation never fails by itself (a wrong key gives an unrelated secret); the
 * multi-recipient wrap detects that. Instead of the reference's e(c0[j], d1[j] + y'·d2[j]),
 * which needs two G2 multiplications and fresh line coefficients per ciphertext, we compute
 * e(c0[j], d1[j])·e(y'·c0[j], d2[j]): six pairs over the key's precomputed lines and two
 * cheap G1 multiplications, with one final exponentiation.
 */
export function decaps(usk: UserSecretKey, ct: CgwkvCiphertext | Uint8Array): Uint8Array {
  const key = unwrap(usk, Usk, 'UserSecretKey');
  const c =
    ct instanceof Uint8Array ? unwrap(parseCgwkvCiphertext(ct), CgwkvCt, '') : unwrap(ct, CgwkvCt, 'CgwkvCiphertext');
  return decapsParsed(key, c);
}

function decapsParsed(key: Usk, c: CgwkvCt): Uint8Array {
  const yPrime = rpc(c.kk, c.c0);
  // Pairs in the order of the key's lines: (d0[j], c1[j]), (d1[j], c0[j]), (d2[j], y'·c0[j]).
  const points: G1[] = [c.c1[0], c.c1[1], c.c0[0], c.c0[1]];
  // y' = 0 makes the last pairs trivial (pairing with the identity is 1).
  if (yPrime !== 0n) {
    const [p0, p1] = normalizeZ(G1Point, [g1MulPublic(c.c0[0], yPrime), g1MulPublic(c.c0[1], yPrime)]);
    points.push(p0!, p1!);
  }
  const affine = points.map((p) => p.toAffine());
  if (Array.isArray(key.lines) && pairingAccel) {
    // Validated when parsed: this cannot fail.
    const lines = pairingAccel.prepareG2(key.bytes, 6);
    if (lines instanceof Uint8Array) key.lines = { wasm: pairingAccel, lines };
  }
  if (!Array.isArray(key.lines)) {
    return sharedSecret(key.lines.wasm.pairing(key.lines.lines, affine));
  }
  const lines = key.lines;
  const pairs = affine.map(({ x, y }, i): [LinePrecompute, bigint, bigint] => [lines[i]!, x, y]);
  return sharedSecret(bls12_381.fields.Fp12.finalExponentiate(bls12_381.millerLoopBatch(pairs)));
}

/**
 * Encapsulates one fresh 32-byte secret for every identity: a 284-byte capsule per identity,
 * in order (CGWKV ciphertext ‖ AES-128-GCM(kek[0..16], nonce, secret) ‖ tag ‖ nonce).
 */
export async function multiEncaps(
  mpk: MasterPublicKey,
  kemIds: Uint8Array[],
): Promise<{ ss: Uint8Array; cts: Uint8Array[] }> {
  unwrap(mpk, Mpk, 'MasterPublicKey');
  const ss = randomBytes(SS_BYTES);
  const cts = await Promise.all(
    kemIds.map(async (id) => {
      const { ct, ss: kek } = encaps(mpk, id);
      const nonce = randomBytes(GCM_IV_BYTES);
      const wrap = await aesGcmSeal(await importAesKey(kek.subarray(0, AES_KEY_BYTES)), nonce, ss);
      const out = new Uint8Array(MKEM_CT_BYTES);
      out.set(ct, 0);
      out.set(wrap, CGWKV_CT_BYTES);
      out.set(nonce, CGWKV_CT_BYTES + WRAP_BYTES);
      return out;
    }),
  );
  return { ss, cts };
}

/** The shared secret in a capsule; AuthenticationError WRONG_KEY when the key does not open it. */
export async function multiDecaps(usk: UserSecretKey, ct: MkemCiphertext): Promise<Uint8Array> {
  const key = unwrap(usk, Usk, 'UserSecretKey');
  const c = unwrap(ct, MkemCt, 'MkemCiphertext');
  const kek = decapsParsed(key, c.ct);
  const ss = await aesGcmOpen(await importAesKey(kek.subarray(0, AES_KEY_BYTES)), c.nonce, c.wrap);
  if (!ss) {
    throw new AuthenticationError(
      ErrorCode.WRONG_KEY,
      'the user secret key does not open this capsule (wrong key, policy or timestamp)',
    );
  }
  return ss;
}

/**
 * Whether a master public key belongs to a master secret key: MPK.B0 = [W0ᵀa]₁ etc. can be
 * checked from A and the W matrices, and KT = e(k0·A[0] + k1·A[1], g2). For the PKG, to refuse
 * a mismatched pair of key files at startup.
 */
export function kemKeysMatch(mpk: MasterPublicKey, msk: Uint8Array): boolean {
  const key = unwrap(mpk, Mpk, 'MasterPublicKey');
  const m = parseMsk(msk);
  const a = [key.points[0]!, key.points[1]!] as [G1, G1];
  const points = decodePoints(key.bytes, 8, G1_BYTES, decodeG1, mpkError);
  // MSK scalars are secret: constant-time multiplications only.
  const mul = (p: G1, k: bigint) => (k === 0n ? G1Point.ZERO : p.multiply(k));
  const wta = (w: MasterSecret['w0'], j: 0 | 1) => mul(a[0], w[0][j]).add(mul(a[1], w[1][j]));
  const expected = [wta(m.w0, 0), wta(m.w0, 1), wta(m.w1, 0), wta(m.w1, 1), wta(m.wp, 0), wta(m.wp, 1)];
  if (!expected.every((p, i) => p.equals(points[i + 2]!))) return false;
  const ka = mul(a[0], m.k[0]).add(mul(a[1], m.k[1]));
  const kt = ka.is0() ? GT_ONE : bls12_381.pairing(ka, G2Point.BASE);
  return gtEquals(kt, key.kt.base);
}
