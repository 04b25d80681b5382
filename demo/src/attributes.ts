import { attributeName, type Attribute, type Policy } from 'postguard-ts';

/**
 * The attribute types the demo offers, with names people read. Recipients are addressed by
 * e-mail (the PKG's e-mail attribute); extra attributes narrow who can open a file.
 */

export const EMAIL = 'pbdf.sidn-pbdf.email.email';
export const EMAIL_DOMAIN = 'pbdf.sidn-pbdf.email.domain';
export const MOBILE = 'pbdf.sidn-pbdf.mobilenumber.mobilenumber';

export interface AttributeKind {
  type: string;
  label: string;
  /** Input type and autocomplete hint for forms. */
  input: 'email' | 'tel' | 'text' | 'date';
  autocomplete?: string;
  example: string;
}

/** Extra attributes a sender can require of a recipient. */
export const EXTRA_ATTRIBUTES: readonly AttributeKind[] = [
  { type: MOBILE, label: 'Mobile number', input: 'tel', autocomplete: 'tel', example: '+31612345678' },
  {
    type: 'pbdf.gemeente.personalData.surname',
    label: 'Surname',
    input: 'text',
    autocomplete: 'family-name',
    example: 'Jansen',
  },
  {
    type: 'pbdf.gemeente.personalData.dateofbirth',
    label: 'Date of birth',
    input: 'text',
    autocomplete: 'bday',
    example: '01-01-1990',
  },
];

/**
 * A readable name for an attribute type: the library's (postguard-ts `attributeName`), which every
 * surface shares; a demo-scheme type says so ("E-mail address (demo credential)").
 */
export const attributeLabel = (type: string): string => attributeName(type);

export const isEmailType = (type: string): boolean => type.endsWith('.email.email');

/** One line per attribute of a sender identity: "E-mail address: alice@example.org". */
export function identityLines(policy: Policy | undefined): Array<{ label: string; value: string }> {
  if (policy === undefined) return [];
  return policy.con.map((a: Attribute) => ({ label: attributeLabel(a.t), value: a.v ?? '(no value)' }));
}
