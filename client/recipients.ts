import { invalidInput } from './errors.js';

/**
 * Recipients and the encryption policy built from them. Each recipient is keyed by the address
 * given (the key the recipient's client looks for); its policy is one base attribute (the whole
 * e-mail address, or the e-mail domain) plus any extra attributes the recipient must also prove.
 */

/** How a recipient is identified: by the whole e-mail address, or by its domain. */
export type RecipientKind = 'email' | 'emailDomain';

/** No surrounding or inner whitespace, no control characters, exactly one `@` with text on both sides. */
const ADDRESS = /^[^\s@\p{Cc}]+@[^\s@\p{Cc}]+$/u;
/** A bare domain for emailDomain(): labels without whitespace or `@`. */
const DOMAIN = /^[^\s@\p{Cc}.]+(?:\.[^\s@\p{Cc}.]+)*$/u;

const RECIPIENT = Symbol('postguard-ts recipient');

/**
 * One recipient of a message: who must prove what to open it. Made by `pg.recipient.email()` or
 * `pg.recipient.emailDomain()`; `extraAttribute` adds attributes they must prove as well.
 */
export class RecipientBuilder {
  /** @internal */
  readonly [RECIPIENT] = true;
  private readonly extras: Array<{ t: string; v: string }> = [];

  /** Use `pg.recipient.email()` or `pg.recipient.emailDomain()`. */
  constructor(
    /** The recipient's key in the ciphertext header (the address given). */
    readonly email: string,
    /** Whether the whole address or only its domain must be proved. */
    readonly kind: RecipientKind,
  ) {}

  /** Also require the attribute `type` with `value` (chainable). */
  extraAttribute(type: string, value: string): this {
    if (typeof type !== 'string' || !/^[^\s.]+(?:\.[^\s.]+)+$/.test(type)) {
      throw invalidInput(
        `extraAttribute: ${JSON.stringify(type)} is not an attribute type such as pbdf.gemeente.personalData.surname`,
      );
    }
    if (typeof value !== 'string' || value === '')
      throw invalidInput(`extraAttribute(${type}): the value must be a non-empty string`);
    this.extras.push({ t: type, v: value });
    return this;
  }

  /** @internal The policy's attribute list, under the configured attribute types. */
  attributes(types: { email: string; domain: string }): Array<{ t: string; v: string }> {
    // As the .NET SDK: a domain recipient given as an address is keyed by the address and
    // bound to the text after its '@'; given as a bare domain, to that domain.
    const base =
      this.kind === 'email'
        ? { t: types.email, v: this.email }
        : { t: types.domain, v: this.email.includes('@') ? this.email.slice(this.email.indexOf('@') + 1) : this.email };
    return [base, ...this.extras.map((e) => ({ ...e }))];
  }
}

export const isRecipient = (value: unknown): value is RecipientBuilder =>
  typeof value === 'object' && value !== null && RECIPIENT in value;

export function emailRecipient(address: unknown): RecipientBuilder {
  if (typeof address !== 'string' || !ADDRESS.test(address)) {
    throw invalidInput(`recipient.email: ${JSON.stringify(address)} is not an e-mail address`);
  }
  return new RecipientBuilder(address, 'email');
}

/** `alice@example.com` (keyed by the address, for everyone at example.com) or a bare `example.com`. */
export function emailDomainRecipient(addressOrDomain: unknown): RecipientBuilder {
  if (typeof addressOrDomain !== 'string' || !(ADDRESS.test(addressOrDomain) || DOMAIN.test(addressOrDomain))) {
    throw invalidInput(
      `recipient.emailDomain: ${JSON.stringify(addressOrDomain)} is neither an e-mail address nor a domain`,
    );
  }
  return new RecipientBuilder(addressOrDomain, 'emailDomain');
}

/** The encryption policy: recipient key → {ts, con}. Duplicate keys are refused (one would silently replace the other). */
export function buildPolicy(
  recipients: readonly RecipientBuilder[],
  ts: number,
  types: { email: string; domain: string },
): Record<string, { ts: number; con: Array<{ t: string; v: string }> }> {
  const policy: Record<string, { ts: number; con: Array<{ t: string; v: string }> }> = Object.create(null);
  for (const r of recipients) {
    if (Object.hasOwn(policy, r.email)) throw invalidInput(`duplicate recipient ${JSON.stringify(r.email)}`);
    policy[r.email] = { ts, con: r.attributes(types) };
  }
  return policy;
}
