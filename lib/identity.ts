import { sha3_256, sha3_512 } from '@noble/hashes/sha3.js';
import { utf8 } from './bincode.js';
import { ErrorCode, FormatError } from './errors.js';
import { compareBytes, type Attribute, type Policy } from './policy.js';

/**
 * Identities: how a policy becomes the bytes both key schemes derive keys from, and the canonical
 * spelling of the attribute values that current PostGuard (pg-core 0.6.5+, upstream #335) derives
 * them from, so `Alice@Example.com ` and `alice@example.com` are one identity.
 *
 * Canonical values keep their exact bytes, so every identity that was canonical before still
 * derives the same keys. Types are matched by the end of their name in any scheme (`pbdf.`,
 * `irma-demo.`, …), with a `.` before the tail.
 */

const EMAIL_TAIL = '.sidn-pbdf.email.email';
const MOBILE_TAIL = '.sidn-pbdf.mobilenumber.mobilenumber';

/** One Unicode White_Space character (the property Rust's `str::trim` uses). */
const WHITE_SPACE = /^\p{White_Space}$/u;
/** Separators people type in phone numbers: space, no-break spaces, hyphens, dashes, brackets, dots, slashes. */
const PHONE_SEPARATORS = /[ \u00A0\u202F\-\u2011\u2013()./]/g;
const E164 = /^\+[1-9]\d{0,14}$/;

const isEmailType = (type: string) => type.endsWith(EMAIL_TAIL) && type.length > EMAIL_TAIL.length;
const isMobileType = (type: string) => type.endsWith(MOBILE_TAIL) && type.length > MOBILE_TAIL.length;

/**
 * `value` without the Unicode whitespace at its ends, in time linear in its length: each end is
 * walked inwards once. (A regex trim such as `^\s+|\s+$` retries its second branch at every
 * position of a long inner run of whitespace, which is quadratic: a signer policy read from an
 * unauthenticated header could hold such a run.) Every White_Space code point lies in the BMP, so
 * testing one UTF-16 unit at a time is testing code points; a surrogate is never whitespace.
 */
export function trimWhiteSpace(value: string): string {
  let start = 0;
  let end = value.length;
  while (start < end && WHITE_SPACE.test(value[start]!)) start++;
  while (end > start && WHITE_SPACE.test(value[end - 1]!)) end--;
  return start === 0 && end === value.length ? value : value.slice(start, end);
}

/**
 * The canonical form of an attribute value. E-mail: Unicode whitespace trimmed at both ends, then
 * lower-cased. Mobile number: every `(0)` removed, separators dropped, a leading `00` made `+`.
 * Any other type: the value unchanged. Total and idempotent.
 */
export function canonicalize(type: string, value: string): string {
  if (isEmailType(type)) return trimWhiteSpace(value).toLowerCase();
  if (isMobileType(type)) {
    const digits = value.replaceAll('(0)', '').replace(PHONE_SEPARATORS, '');
    return digits.startsWith('00') ? `+${digits.slice(2)}` : digits;
  }
  return value;
}

/** True when `value` is already canonical and, for a mobile number, also E.164 (`+`, 1–15 digits, no leading 0). */
export function isCanonical(type: string, value: string): boolean {
  if (canonicalize(type, value) !== value) return false;
  return isMobileType(type) ? E164.test(value) : true;
}

/** The policy with every value in its canonical form (the same object when nothing changes). */
export function canonicalPolicy(policy: Policy): Policy {
  let changed = false;
  const con = policy.con.map((a): Attribute => {
    if (a.v === undefined) return a;
    const v = canonicalize(a.t, a.v);
    if (v === a.v) return a;
    changed = true;
    return { t: a.t, v };
  });
  return changed ? { ts: policy.ts, con } : policy;
}

/** An attribute as UTF-8, encoded once: sorting compares these bytes, hashing reads them. */
interface EncodedAttribute {
  t: Uint8Array;
  v: Uint8Array | undefined;
}

/** Derived `Ord` of the reference's Attribute: by type, then absent value before any value. */
function compareAttributes(a: EncodedAttribute, b: EncodedAttribute): number {
  const byType = compareBytes(a.t, b.t);
  if (byType !== 0) return byType;
  if (a.v === undefined) return b.v === undefined ? 0 : -1;
  if (b.v === undefined) return 1;
  return compareBytes(a.v, b.v);
}

const be64 = (v: number | bigint): Uint8Array => {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, BigInt(v), false);
  return out;
};

const UNSET = be64((1n << 64n) - 1n);

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/**
 * The 64-byte digest D of a policy exactly as written:
 * SHA3-512(0x00 ‖ f_0 ‖ f'_0 ‖ … ‖ BE64(ts)) over the attributes in canonical order.
 */
export function rawPolicyDigest(policy: Policy): Uint8Array {
  // Each string is encoded once, not once per comparison: a sort compares O(n log n) times.
  const encoded = policy.con.map((a): EncodedAttribute => ({
    t: utf8(a.t),
    v: a.v === undefined ? undefined : utf8(a.v),
  }));
  encoded.sort(compareAttributes);
  const parts: Uint8Array[] = [new Uint8Array([0])];
  encoded.forEach(({ t, v }, i) => {
    parts.push(sha3_512(concat([be64(2 * i + 1), be64(t.length), t])));
    if (v === undefined) parts.push(sha3_512(concat([be64(2 * i + 2), UNSET])));
    else parts.push(sha3_512(concat([be64(2 * i + 2), be64(v.length), v])));
  });
  parts.push(be64(policy.ts));
  return sha3_512(concat(parts));
}

/** The digest both key schemes derive identities from: of the canonical policy. */
export const policyDigest = (policy: Policy): Uint8Array => rawPolicyDigest(canonicalPolicy(policy));

/** The 64-byte CGWKV (KEM) identity of a policy. */
export const kemIdentity = (policy: Policy): Uint8Array => sha3_512(policyDigest(policy));

/** The 32-byte GG (signature) identity of a policy. */
export const signingIdentity = (policy: Policy): Uint8Array => sha3_256(policyDigest(policy));

/**
 * Most attributes a signer's policy may have for a reader to derive its identity. A reader derives
 * it from the header signature before anything is authenticated, and the derivation hashes every
 * attribute twice and then 128 bytes per attribute again: a 1 MiB header signature packed with
 * 9-byte attributes (116 000 of them) would cost some thirty times what one 1 MiB value costs. A
 * PKG issues signing keys for what a disclosure proved, a handful of attributes (ours refuses
 * sessions that disclose more than 256), so no key exists for a policy this long.
 */
export const MAX_SIGNER_ATTRIBUTES = 1024;

/**
 * The signature identities a reader accepts for a signer's policy as written: the canonical one
 * first, then (if different) the raw spelling's, for keys an older PKG issued for it. A policy of
 * more than MAX_SIGNER_ATTRIBUTES attributes is MALFORMED. Each value is canonicalised once.
 */
export function signingIdentityCandidates(policy: Policy): Uint8Array[] {
  if (policy.con.length > MAX_SIGNER_ATTRIBUTES) {
    throw new FormatError(
      ErrorCode.MALFORMED,
      `the signer's policy has ${policy.con.length} attributes, over the ${MAX_SIGNER_ATTRIBUTES} a reader derives an identity for`,
    );
  }
  const canonical = canonicalPolicy(policy);
  const ids = [sha3_256(rawPolicyDigest(canonical))];
  if (canonical !== policy) ids.push(sha3_256(rawPolicyDigest(policy)));
  return ids;
}
