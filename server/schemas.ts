import { PROOF_STATUSES, SESSION_STATUSES } from 'postguard-ts/pkg';

/**
 * JSON Schemas shared by the routes. Every object schema closes itself (additionalProperties: false),
 * and the app's Ajv neither coerces types nor strips unknown fields, so a misspelled field is a 400
 * instead of being silently ignored.
 */

/** A Yivi attribute type id, `scheme.issuer.credential.attribute` (or a 3-part credential id). */
export const ATTRIBUTE_TYPE_PATTERN = '^[A-Za-z0-9_-]+(\\.[A-Za-z0-9_-]+){2,3}$';

/** Bounds that keep one request's work small: no real policy comes near them. */
export const LIMITS = {
  typeLength: 255,
  valueLength: 1024,
  attributes: 64,
  alternatives: 16,
  recipients: 64,
} as const;

export const attributeTypeSchema = {
  type: 'string',
  minLength: 1,
  maxLength: LIMITS.typeLength,
  pattern: ATTRIBUTE_TYPE_PATTERN,
} as const;

/** `{t, v?}`: the Attribute of the spec (a null `v` means no value, as serde's Option does). */
export const attributeSchema = {
  type: 'object',
  required: ['t'],
  additionalProperties: false,
  properties: {
    t: attributeTypeSchema,
    v: { type: ['string', 'null'], maxLength: LIMITS.valueLength },
  },
} as const;

/** Unix seconds that fit pg-pkg's u64 and our safe integers. */
export const timestampSchema = { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER } as const;

export const policySchema = {
  type: 'object',
  required: ['ts', 'con'],
  additionalProperties: false,
  properties: {
    ts: timestampSchema,
    con: {
      type: 'array',
      items: {
        type: 'object',
        required: ['t'],
        additionalProperties: false,
        properties: { t: { type: 'string' }, v: { type: ['string', 'null'] } },
      },
    },
  },
} as const;

export const sessionStatusSchema = {
  type: 'string',
  enum: [...SESSION_STATUSES],
} as const;

export const proofStatusSchema = {
  type: 'string',
  enum: [...PROOF_STATUSES],
} as const;
