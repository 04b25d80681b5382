import { Reader, Writer, utf8 } from './bincode.js';
import { invalidPolicy } from './errors.js';

/**
 * Policies: who a message is for (encryption) or who signed it (signing), and the
 * identities derived from them. Wire names are the reference's serde names: ts, con, t, v.
 */

/** One attribute of an identity: a Yivi attribute type and, usually, its value. */
export interface Attribute {
  /** Attribute type, e.g. "pbdf.sidn-pbdf.email.email". */
  t: string;
  /** Attribute value; absent means "any value" (and is distinct from ""). */
  v?: string | undefined;
}

/** An identity at a moment: the attributes to prove, and when (keys are issued per timestamp). */
export interface Policy {
  /** Unix seconds. */
  ts: number;
  /** The attributes, all of which the identity must have (a conjunction). */
  con: Attribute[];
}

/** Recipient id (e.g. an e-mail address) to that recipient's policy. */
export type EncryptionPolicy = Record<string, Policy> | Map<string, Policy>;

/** Attribute types whose hidden form keeps all but the last four bytes of the value. */
export const HINT_TYPES: ReadonlySet<string> = new Set([
  'pbdf.sidn-pbdf.mobilenumber.mobilenumber',
  'pbdf.pbdf.surfnet-2.id',
  'pbdf.nuts.agb.agbcode',
  'irma-demo.sidn-pbdf.mobilenumber.mobilenumber',
  'irma-demo.nuts.agb.agbcode',
]);

const MAX_U64 = (1n << 64n) - 1n; // timestamps are u64 on the wire

function normalizeTimestamp(raw: unknown, where: string): number {
  if (typeof raw === 'bigint') {
    if (raw < 0n || raw > MAX_U64) throw invalidPolicy(`${where}: timestamp out of range`);
    if (raw > BigInt(Number.MAX_SAFE_INTEGER)) throw invalidPolicy(`${where}: timestamp above 2^53-1`);
    return Number(raw);
  }
  if (typeof raw !== 'number' || !Number.isSafeInteger(raw) || raw < 0) {
    throw invalidPolicy(`${where}: ts must be a non-negative safe integer (Unix seconds)`);
  }
  return raw;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * A string that has no UTF-8 form: a lone surrogate becomes U+FFFD when encoded, so two different
 * ids (or values) would become the same bytes, and the one given could never be looked up again.
 */
function requireWellFormed(value: string, what: string): void {
  if (LONE_SURROGATE.test(value))
    throw invalidPolicy(`${what} contains a lone surrogate (not valid Unicode): ${JSON.stringify(value)}`);
}

function normalizeAttribute(raw: unknown, where: string): Attribute {
  if (typeof raw !== 'object' || raw === null) throw invalidPolicy(`${where}: attribute must be an object`);
  const { t, v } = raw as { t?: unknown; v?: unknown };
  if (typeof t !== 'string') throw invalidPolicy(`${where}: attribute type t must be a string`);
  requireWellFormed(t, `${where}: attribute type`);
  if (v === undefined || v === null) return { t };
  if (typeof v !== 'string') throw invalidPolicy(`${where}: attribute value v must be a string`);
  requireWellFormed(v, `${where}: attribute value`);
  return { t, v };
}

/**
 * Validates a policy given by a caller and returns a clean copy. Accepts the spec's `t`
 * as an alias of `ts` ({t, con}) and a BigInt timestamp, as pg-wasm does.
 */
export function normalizePolicy(raw: unknown, where = 'policy'): Policy {
  if (typeof raw !== 'object' || raw === null) throw invalidPolicy(`${where}: expected {ts, con}`);
  const obj = raw as { ts?: unknown; t?: unknown; con?: unknown };
  const ts = obj.ts !== undefined ? obj.ts : obj.t;
  if (ts === undefined) throw invalidPolicy(`${where}: missing field ts`);
  if (!Array.isArray(obj.con)) throw invalidPolicy(`${where}: con must be an array of attributes`);
  return {
    ts: normalizeTimestamp(ts, where),
    con: obj.con.map((a, i) => normalizeAttribute(a, `${where}.con[${i}]`)),
  };
}

/**
 * Entries of an encryption policy (plain object or Map), validated, in caller order. Refused, since
 * they would seal a file nobody can open as intended: no recipients; an Array (its indices would
 * become recipient ids); an id or attribute that is not valid Unicode; a recipient without
 * attributes (the empty identity, whose key nobody should hold); an attribute with an empty type
 * (no credential has one); an attribute without a value (a PKG issues keys for the values a
 * disclosure proved, so no key names "no value": such a file could not be opened).
 */
export function normalizeEncryptionPolicy(raw: unknown): Array<[string, Policy]> {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw invalidPolicy('policy: expected a map (object or Map) of recipient id to policy');
  }
  const entries: Array<[unknown, unknown]> =
    raw instanceof Map ? [...raw.entries()] : Object.entries(raw as Record<string, unknown>);
  if (entries.length === 0) throw invalidPolicy('policy: no recipients (nobody could open the file)');
  const seen = new Set<string>();
  return entries.map(([id, p]) => {
    if (typeof id !== 'string') throw invalidPolicy('policy: recipient ids must be strings');
    requireWellFormed(id, 'policy: recipient id');
    if (seen.has(id)) throw invalidPolicy(`policy: duplicate recipient id ${JSON.stringify(id)}`);
    seen.add(id);
    const where = `policy[${JSON.stringify(id)}]`;
    const policy = normalizePolicy(p, where);
    if (policy.con.length === 0) {
      throw invalidPolicy(`${where}: no attributes (the empty identity: nobody should hold its key)`);
    }
    policy.con.forEach(({ t, v }, i) => {
      if (t === '') throw invalidPolicy(`${where}.con[${i}]: empty attribute type`);
      if (v === undefined) {
        throw invalidPolicy(
          `${where}.con[${i}]: ${t} has no value; keys are issued for disclosed values, so nobody could open the file`,
        );
      }
    });
    return [id, policy];
  });
}

/** Rust `String` ordering: byte-wise on UTF-8, which differs from JS `<` on UTF-16. */
export function compareUtf8(a: string, b: string): number {
  if (a === b) return 0;
  return compareBytes(utf8(a), utf8(b));
}

export function compareBytes(x: Uint8Array, y: Uint8Array): number {
  const n = Math.min(x.length, y.length);
  for (let i = 0; i < n; i++) if (x[i] !== y[i]) return x[i]! - y[i]!;
  return x.length - y.length;
}

/**
 * What the header reveals about a recipient's policy: types in the sender's order, values
 * removed, except hint types, which keep all but their last four bytes.
 */
export function hidePolicy(policy: Policy): Policy {
  return {
    ts: policy.ts,
    con: policy.con.map(({ t, v }) => {
      if (v === undefined) return { t };
      if (!HINT_TYPES.has(t)) return { t, v: '' };
      const bytes = utf8(v);
      const keep = bytes.length - Math.min(4, bytes.length);
      // The reference cuts at a byte offset and panics when that splits a character; we
      // refuse such values instead of writing a header the reference cannot produce.
      let head: string;
      try {
        head = new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(0, keep));
      } catch {
        throw invalidPolicy(`hint value for ${t} must not split a multi-byte character at its last four bytes`);
      }
      return { t, v: head + '*'.repeat(bytes.length - keep) };
    }),
  };
}

/** bincode(Policy): ts, then the attribute list with optional values. */
export function writePolicy(w: Writer, policy: Policy): Writer {
  w.u64(policy.ts).u64(policy.con.length);
  for (const a of policy.con) {
    w.string(a.t);
    w.option(a.v, (v) => w.string(v));
  }
  return w;
}

export const encodePolicy = (policy: Policy): Uint8Array => writePolicy(new Writer(), policy).finish();

/** Smallest bincode attribute: empty type (8) + None tag (1). */
const MIN_ATTRIBUTE_BYTES = 9;

export function readPolicy(r: Reader): Policy {
  const ts = r.safeU64('policy timestamp');
  const n = r.length('attribute count', MIN_ATTRIBUTE_BYTES);
  const con: Attribute[] = [];
  for (let i = 0; i < n; i++) {
    const t = r.string('attribute type');
    const v = r.option('attribute value', () => r.string('attribute value'));
    con.push(v === undefined ? { t } : { t, v });
  }
  return { ts, con };
}

/** Structural equality as the reference decides `private` (same ts, same list, same order). */
export function policiesEqual(a: Policy, b: Policy): boolean {
  return (
    a.ts === b.ts && a.con.length === b.con.length && a.con.every((x, i) => x.t === b.con[i]!.t && x.v === b.con[i]!.v)
  );
}

/** The JS shape pg-wasm returns: `v` present but undefined when the value is absent. */
export const policyToJs = (p: Policy): Policy => ({
  ts: p.ts,
  con: p.con.map((a) => ({ t: a.t, v: a.v })),
});
