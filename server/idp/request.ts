import { PkgError } from '../errors.js';
import { refuseDemoTypes } from './schemes.js';
import { LIMITS, attributeSchema, timestampSchema } from '../schemas.js';

/**
 * POST start: what a client asks the person to disclose, translated into the extended Yivi
 * disclosure request the PKG posts to `{IDENTITY_SERVER}/session`. Two request shapes:
 *
 * - PostGuard's `{con: [...], validity?}`: each element of `con` is one disjunction. A single
 *   attribute `{t, v?, optional?}` becomes a disjunction with one alternative (plus the empty
 *   alternative, last, when optional); an array of arrays is a disjunction given in full (Yivi's
 *   "discon"), where an empty inner array makes it optional.
 * - The spec's `{attr: {<recipient key>: {t: <timestamp>, con: [...]}}}`: with one recipient, each of
 *   its attributes is a disjunction of its own; with several, one disjunction whose alternatives
 *   are the recipients' conjunctions (the person proves to be one of them). The timestamps are the
 *   key timestamps a client later asks for; the session itself does not need them.
 */

export const DEFAULT_VALIDITY = 300;
export const MAX_VALIDITY = 86_400;
export const DISCLOSURE_CONTEXT = 'https://irma.app/ld/request/disclosure/v2';

export interface StartAttribute {
  t: string;
  v?: string | null;
  optional?: boolean;
}

export type ConItem = StartAttribute | StartAttribute[][];

export interface RecipientEntry {
  t: number;
  con: Array<{ t: string; v?: string | null }>;
}

export interface StartBody {
  con?: ConItem[];
  attr?: Record<string, RecipientEntry>;
  validity?: number;
}

/** One attribute as Yivi's AttributeRequest object: value only when the client fixed one. */
export interface AttributeRequest {
  type: string;
  value?: string;
  notNull: true;
}

export type Disjunction = AttributeRequest[][];

export interface ExtendedDisclosureRequest {
  validity: number;
  request: { '@context': typeof DISCLOSURE_CONTEXT; disclose: Disjunction[] };
}

const startAttributeSchema = {
  ...attributeSchema,
  properties: { ...attributeSchema.properties, optional: { type: 'boolean' } },
} as const;

const disjunctionSchema = {
  type: 'array',
  minItems: 1,
  maxItems: LIMITS.alternatives,
  items: { type: 'array', maxItems: LIMITS.attributes, items: startAttributeSchema },
} as const;

export const startBodySchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    // No minItems on either `con`: an empty one is EMPTY_IDENTITY (disclosureRequest), not a schema error.
    con: {
      type: 'array',
      maxItems: LIMITS.attributes,
      // Decided by shape, as pg-pkg does: an array is a disjunction, anything else an attribute.
      items: { if: { type: 'array' }, then: disjunctionSchema, else: startAttributeSchema },
    },
    attr: {
      type: 'object',
      minProperties: 1,
      maxProperties: LIMITS.recipients,
      propertyNames: { maxLength: LIMITS.valueLength },
      additionalProperties: {
        type: 'object',
        required: ['t', 'con'],
        additionalProperties: false,
        properties: {
          t: timestampSchema,
          con: { type: 'array', maxItems: LIMITS.attributes, items: attributeSchema },
        },
      },
    },
    validity: { type: 'integer', minimum: 0 },
  },
} as const;

function attributeRequest(a: { t: string; v?: string | null }): AttributeRequest {
  // An empty value means "any value", as in pg-pkg.
  return a.v === undefined || a.v === null || a.v === ''
    ? { type: a.t, notNull: true }
    : { type: a.t, value: a.v, notNull: true };
}

function fromConItem(item: ConItem): Disjunction {
  if (Array.isArray(item)) return item.map((alternative) => alternative.map(attributeRequest));
  const alternative = [attributeRequest(item)];
  // The empty (skip) alternative goes last: Yivi apps render an empty first option badly.
  return item.optional === true ? [alternative, []] : [alternative];
}

const credentialOf = (type: string): string => type.split('.').slice(0, 3).join('.');

/**
 * Yivi wants attributes of one credential next to each other inside a conjunction. A stable sort by
 * first appearance of each credential keeps the client's order otherwise (order does not change the
 * identity: the PKG derives it from the sorted attributes).
 */
function groupByCredential(con: AttributeRequest[]): AttributeRequest[] {
  const order = new Map<string, number>();
  for (const a of con) if (!order.has(credentialOf(a.type))) order.set(credentialOf(a.type), order.size);
  return con
    .map((a, i) => ({ a, i }))
    .sort((x, y) => order.get(credentialOf(x.a.type))! - order.get(credentialOf(y.a.type))! || x.i - y.i)
    .map(({ a }) => a);
}

function fromRecipients(attr: Record<string, RecipientEntry>): Disjunction[] {
  const entries = Object.values(attr);
  if (entries.length === 1) return entries[0]!.con.map((a) => [[attributeRequest(a)]]);
  return [entries.map((entry) => groupByCredential(entry.con.map(attributeRequest)))];
}

export interface DisclosureOptions {
  /** Refuse a request that asks for any attribute of a demo scheme (DEMO_SCHEME_REFUSED). */
  refuseDemoSchemes?: boolean;
}

/** The extended disclosure request for a (schema-valid) start body. */
export function disclosureRequest(body: StartBody, options: DisclosureOptions = {}): ExtendedDisclosureRequest {
  const validity = body.validity ?? DEFAULT_VALIDITY;
  if (validity > MAX_VALIDITY) throw new PkgError('VALIDITY');
  if ((body.con === undefined) === (body.attr === undefined)) {
    throw new PkgError('BAD_REQUEST', 'body must have exactly one of "con" and "attr"');
  }
  // A key for no attributes would open anything sealed for "nobody in particular": such a session is
  // refused up front, as a key for an empty disclosure is refused later (routes/keys.ts).
  if (body.con !== undefined && body.con.length === 0) throw new PkgError('EMPTY_IDENTITY', 'con is empty');
  if (body.attr !== undefined && Object.values(body.attr).some((entry) => entry.con.length === 0)) {
    throw new PkgError('EMPTY_IDENTITY', 'a recipient has an empty con');
  }
  const disclose = body.con !== undefined ? body.con.map(fromConItem) : fromRecipients(body.attr!);
  if (!disclose.some((discon) => discon.some((alternative) => alternative.length > 0))) {
    throw new PkgError('EMPTY_IDENTITY', 'the request asks for no attribute');
  }
  // Any alternative counts: the person could pick the demo one, and get a key for it later.
  if (options.refuseDemoSchemes === true)
    refuseDemoTypes(disclose.flatMap((discon) => discon.flatMap((alternative) => alternative.map((a) => a.type))));
  return { validity, request: { '@context': DISCLOSURE_CONTEXT, disclose } };
}
