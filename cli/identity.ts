import type { Attribute, Policy } from 'postguard-ts';
import { HINT_TYPES, isDemoCredential } from 'postguard-ts';
import { DOMAIN_TYPES, EMAIL_TYPES, type DisclosureAttribute } from 'postguard-ts/pkg';
import { usage } from './exit.js';

/**
 * What the command line says about identities, checked strictly: a misspelled field ("vaule")
 * would otherwise seal for "any value" or ask the PKG for something nobody meant.
 *
 *   -i / --identity     recipient id → [{t, v?}]  (pg-cli's shape), or → {t, con: [{t, v?}]} (the spec's)
 *   --pub-sign-id, --priv-sign-id   [{t}]: attribute types the sender discloses to sign
 *   --attr type=value   values for a recipient's hidden policy when decrypting
 */

type Json = unknown;

const describe = (value: Json): string =>
  value === null
    ? 'null'
    : value === undefined
      ? 'nothing'
      : Array.isArray(value)
        ? 'an array'
        : typeof value === 'object'
          ? 'an object'
          : `a ${typeof value}`;

export function parseJsonArgument(flag: string, text: string): Json {
  try {
    return JSON.parse(text) as Json;
  } catch (cause) {
    const reason = cause instanceof SyntaxError ? cause.message : String(cause);
    throw usage(`${flag}: not valid JSON (${reason})`);
  }
}

function onlyKeys(flag: string, where: string, value: object, allowed: readonly string[]): void {
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key))
      throw usage(`${flag}: ${where} has an unknown field ${JSON.stringify(key)} (allowed: ${allowed.join(', ')})`);
  }
}

function attributeType(flag: string, where: string, t: Json): string {
  if (typeof t !== 'string' || t.length === 0) throw usage(`${flag}: ${where} needs "t", a non-empty attribute type`);
  return t;
}

function attribute(flag: string, where: string, value: Json): Attribute {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw usage(`${flag}: ${where} must be an object {"t": type, "v": value}, not ${describe(value)}`);
  }
  onlyKeys(flag, where, value, ['t', 'v']);
  const { t, v } = value as { t?: Json; v?: Json };
  const type = attributeType(flag, where, t);
  // The library refuses these (INVALID_POLICY): the PKG issues keys for disclosed values, so no key
  // it hands out opens a file sealed for "any value". Said here, before the file is read.
  if (v === undefined) {
    throw usage(`${flag}: ${where} needs "v": no key the PKG issues opens a file sealed for any value of ${type}`);
  }
  if (typeof v !== 'string') throw usage(`${flag}: ${where}: "v" must be a string`);
  return { t: type, v };
}

function conjunction(flag: string, where: string, value: Json): Attribute[] {
  if (!Array.isArray(value)) throw usage(`${flag}: ${where} must be an array of attributes, not ${describe(value)}`);
  return value.map((entry, i) => attribute(flag, `${where}[${i}]`, entry));
}

export interface Recipients {
  /** Recipient id → the attributes it must disclose (the timestamp is added when sealing). */
  policies: Map<string, Attribute[]>;
}

/** `-i`: {"bob@example.org": [{"t": "…email.email", "v": "bob@example.org"}]} or {…: {"t": 0, "con": […]}}. */
export function parseRecipients(text: string, flag = '--identity'): Recipients {
  const value = parseJsonArgument(flag, text);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw usage(`${flag}: must be a JSON object mapping recipient ids to attribute arrays, not ${describe(value)}`);
  }
  const entries = Object.entries(value);
  if (entries.length === 0) throw usage(`${flag}: names no recipient`);
  const policies = new Map<string, Attribute[]>();
  for (const [id, entry] of entries) {
    const where = `recipient ${JSON.stringify(id)}`;
    let con: Attribute[];
    if (Array.isArray(entry)) {
      con = conjunction(flag, where, entry);
    } else if (typeof entry === 'object' && entry !== null) {
      onlyKeys(flag, where, entry, ['t', 'con']);
      const { t, con: raw } = entry as { t?: Json; con?: Json };
      // The spec's entry carries a timestamp; pg-cli always seals at the current time, and so do we.
      if (t !== undefined && !(typeof t === 'number' && Number.isSafeInteger(t) && t >= 0)) {
        throw usage(`${flag}: ${where}: "t" must be a Unix timestamp in seconds`);
      }
      if (raw === undefined) throw usage(`${flag}: ${where} needs "con", an array of attributes`);
      con = conjunction(flag, `${where}.con`, raw);
    } else {
      throw usage(`${flag}: ${where} must be an array of attributes, not ${describe(entry)}`);
    }
    if (con.length === 0)
      throw usage(`${flag}: ${where} has no attributes: name at least one (e.g. an e-mail address)`);
    policies.set(id, con);
  }
  return { policies };
}

/** `--pub-sign-id` / `--priv-sign-id`: [{"t": type}]. A value would never match (the PKG takes values from the disclosure). */
export function parseSignId(text: string, flag: string): Array<{ t: string }> {
  const value = parseJsonArgument(flag, text);
  if (!Array.isArray(value)) throw usage(`${flag}: must be a JSON array of {"t": type}, not ${describe(value)}`);
  const seen = new Set<string>();
  return value.map((entry, i) => {
    const where = `entry ${i}`;
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
      throw usage(`${flag}: ${where} must be an object {"t": type}, not ${describe(entry)}`);
    }
    if ('v' in entry) throw usage(`${flag}: ${where}: give only the type; the value comes from what you disclose`);
    onlyKeys(flag, where, entry, ['t']);
    const t = attributeType(flag, where, (entry as { t?: Json }).t);
    if (seen.has(t)) throw usage(`${flag}: ${t} is listed twice`);
    seen.add(t);
    return { t };
  });
}

/** What the sender's session asks for: every signing type once, with no value (the wallet fills it in). */
export function signingDisclosure(
  pub: ReadonlyArray<{ t: string }>,
  priv: ReadonlyArray<{ t: string }>,
): DisclosureAttribute[] {
  const types = new Set([...pub, ...priv].map(({ t }) => t));
  return [...types].map((t) => ({ t }));
}

/** `--attr type=value` (repeatable). */
export function parseAttrs(values: readonly string[]): Map<string, string> {
  const attrs = new Map<string, string>();
  for (const item of values) {
    const eq = item.indexOf('=');
    if (eq <= 0) throw usage(`--attr: expected type=value, got ${JSON.stringify(item)}`);
    const t = item.slice(0, eq);
    if (attrs.has(t)) throw usage(`--attr: ${t} is given twice`);
    attrs.set(t, item.slice(eq + 1));
  }
  return attrs;
}

/**
 * How the header shows a hidden attribute: absent (any value was sealed), "" (a value the header
 * does not reveal), or for hint types the value with its last (up to) four bytes starred out.
 */
export type HiddenValue = { kind: 'any' } | { kind: 'hidden' } | { kind: 'hint'; visible: string; starred: number };

export function hiddenValue(attr: Attribute): HiddenValue {
  if (attr.v === undefined) return { kind: 'any' };
  if (attr.v === '' || !HINT_TYPES.has(attr.t)) return { kind: 'hidden' };
  const stars = /\*{0,4}$/.exec(attr.v)?.[0].length ?? 0;
  return { kind: 'hint', visible: attr.v.slice(0, attr.v.length - stars), starred: stars };
}

const utf8Length = (s: string): number => new TextEncoder().encode(s).length;

/** Whether `value` could be the one behind a hint (same visible head, same byte length). */
export function matchesHint(value: string, hint: { visible: string; starred: number }): boolean {
  return value.startsWith(hint.visible) && utf8Length(value) === utf8Length(hint.visible) + hint.starred;
}

/** A value we can fill in without asking: the recipient id for e-mail types, its domain for domain types. */
export function defaultValue(recipientId: string, t: string): string | undefined {
  const at = recipientId.indexOf('@');
  if (EMAIL_TYPES.has(t) && at > 0) return recipientId;
  if (DOMAIN_TYPES.has(t) && at >= 0) return recipientId.slice(at + 1);
  return undefined;
}

/** A readable one-liner for a policy, e.g. `irma-demo.sidn-pbdf.email.email = "bob@x"`. */
export function describePolicy(policy: Policy): string {
  if (policy.con.length === 0) return '(no attributes)';
  return policy.con
    .map(({ t, v }) => {
      // A demo-scheme credential is self-issued: it must never read like the real one.
      const type = isDemoCredential(t) ? `${t} (demo credential)` : t;
      if (v === undefined) return `${type} (any value)`;
      const hidden = hiddenValue({ t, v });
      if (hidden.kind === 'hidden' && v === '') return `${type} = (hidden)`;
      return `${type} = ${JSON.stringify(v)}`;
    })
    .join(', ');
}
