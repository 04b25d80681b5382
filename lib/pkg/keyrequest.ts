import type { Attribute, Policy } from '../policy.js';
import { invalidArgument } from './errors.js';

/**
 * What to ask a recipient to disclose, from the hidden policy a ciphertext's header shows for them
 * (docs/format.md, "policies"; lib/policy.ts hidePolicy). The header hides attribute values (""
 * for a fixed value; hint types keep all but their last four bytes, starred), so the request names
 * the types and fixes only values the client knows: the recipient id itself for e-mail attributes
 * (recipient ids are e-mail addresses by convention), its domain for e-mail-domain attributes, and
 * whatever the caller supplies. The person's wallet discloses the real values; the key only opens
 * the ciphertext if they are the ones it was sealed for.
 */

/** One attribute a session asks for. */
export interface DisclosureAttribute {
  /** The attribute type, e.g. "pbdf.sidn-pbdf.email.email". */
  t: string;
  /** The value it must have; absent, the user discloses whatever value they have. */
  v?: string;
  /** Whether the user may leave it out. */
  optional?: boolean;
}

/** A disjunction given in full: one of these conjunctions. */
export type ConItem = DisclosureAttribute | DisclosureAttribute[][];

/** Attribute types whose value a key request fixes to the recipient id (an e-mail address). */
export const EMAIL_TYPES: ReadonlySet<string> = new Set([
  'pbdf.sidn-pbdf.email.email',
  'irma-demo.sidn-pbdf.email.email',
]);
/** Attribute types whose value a key request fixes to the recipient id's domain. */
export const DOMAIN_TYPES: ReadonlySet<string> = new Set([
  'pbdf.sidn-pbdf.email.domain',
  'irma-demo.sidn-pbdf.email.domain',
]);

/** How `keyRequestCon` (and `decryptionKey`) fill in the values a hidden policy blanks. */
export interface KeyRequestOptions {
  /** Values the client knows, by attribute type; they win over the e-mail rules. */
  values?: Readonly<Record<string, string>>;
  /** Types whose value is the recipient id; default {@link EMAIL_TYPES}. */
  emailTypes?: ReadonlySet<string>;
  /** Types whose value is the recipient id's domain; default {@link DOMAIN_TYPES}. */
  domainTypes?: ReadonlySet<string>;
}

const byCodeUnits = (a: DisclosureAttribute, b: DisclosureAttribute): number => (a.t < b.t ? -1 : a.t > b.t ? 1 : 0);

/** The `con` of the key request for `recipientId`, sorted by type so equal requests compare equal. */
export function keyRequestCon(
  recipientId: string,
  hidden: Policy,
  options: KeyRequestOptions = {},
): DisclosureAttribute[] {
  if (typeof recipientId !== 'string') throw invalidArgument('recipientId must be a string');
  if (typeof hidden !== 'object' || hidden === null || !Array.isArray(hidden.con)) {
    throw invalidArgument('policy must be the {ts, con} the header shows for this recipient');
  }
  const emailTypes = options.emailTypes ?? EMAIL_TYPES;
  const domainTypes = options.domainTypes ?? DOMAIN_TYPES;
  const at = recipientId.indexOf('@');
  return hidden.con
    .map(({ t }: Attribute): DisclosureAttribute => {
      if (typeof t !== 'string' || t.length === 0) throw invalidArgument('every attribute of the policy needs a type');
      const known = options.values?.[t];
      if (known !== undefined) return { t, v: known };
      if (emailTypes.has(t) && at > 0) return { t, v: recipientId };
      if (domainTypes.has(t) && at >= 0) return { t, v: recipientId.slice(at + 1) };
      return { t };
    })
    .sort(byCodeUnits);
}

/** The timestamp to ask the key for: the one the recipient's policy was sealed with. */
export function keyTimestamp(hidden: Policy): number {
  const ts = hidden.ts;
  if (!Number.isSafeInteger(ts) || ts < 0) throw invalidArgument('the policy timestamp must be a non-negative integer');
  return ts;
}

export const MAX_VALIDITY = 86_400;

/**
 * Seconds until the next 04:00 local time (pg-js's validity for decryption sessions: one scan
 * serves the rest of the day), at least a minute and at most the PKG's maximum of a day.
 */
export function validityUntil4am(now: Date = new Date()): number {
  const next = new Date(now.getTime());
  next.setHours(4, 0, 0, 0);
  if (next.getTime() <= now.getTime()) next.setDate(next.getDate() + 1);
  const seconds = Math.floor((next.getTime() - now.getTime()) / 1000);
  return Math.min(MAX_VALIDITY, Math.max(60, seconds));
}
