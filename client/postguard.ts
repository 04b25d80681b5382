import { resolveConfig, type PostGuardConfig, type ResolvedConfig } from './config.js';
import { invalidInput } from './errors.js';
import { ClientPkg } from './pkg.js';
import { emailDomainRecipient, emailRecipient, isRecipient, type RecipientBuilder } from './recipients.js';
import { Sealed } from './sealed.js';
import { apiKeySign, isSignMethod, type ApiKeySign, type SignMethod } from './sign.js';
import { zipEntries, type PgFile } from './zip.js';

/** What `encrypt` seals: the files, who may open them, and how the sender signs. */
export interface EncryptInput {
  /** The files, bundled into one ZIP inside the ciphertext. */
  files: readonly PgFile[];
  /** At least one recipient, from `pg.recipient.email()` or `pg.recipient.emailDomain()`. */
  recipients: readonly RecipientBuilder[];
  /** How the sender signs: `pg.sign.apiKey(key)`. */
  sign: SignMethod;
}

/**
 * The sending-side client: encrypt files for recipients identified by e-mail address or domain,
 * signed with an organisation's API key, and upload them to a Cryptify-style storage service.
 * Make one per PKG and storage service and reuse it for every message.
 *
 * ```ts
 * const pg = new PostGuard({ pkgUrl, storageUrl });
 * const { uuid } = await pg
 *   .encrypt({ files: [{ name: 'report.pdf', content: bytes }], recipients: [pg.recipient.email('a@b.nl')], sign: pg.sign.apiKey(key) })
 *   .upload();
 * ```
 */
export class PostGuard {
  /** @internal */
  readonly config: ResolvedConfig;
  private readonly pkg: ClientPkg;

  /** Ways to sign a message, for `EncryptInput.sign`. */
  readonly sign = {
    /** Sign with an organisation API key (`PG-…`). The key is checked for its form here and by the PKG when used. */
    apiKey: (apiKey: string): ApiKeySign => apiKeySign(apiKey),
  };

  /** Ways to name a recipient, for `EncryptInput.recipients`. */
  readonly recipient = {
    /** Only the holder of this e-mail address can decrypt. */
    email: (address: string): RecipientBuilder => emailRecipient(address),
    /**
     * Anyone who proves an e-mail address at this domain can decrypt. Given an address
     * (`alice@example.com`) the recipient is keyed by it and bound to `example.com`; a bare domain
     * is also accepted (but cannot be used with upload(), which needs an address to notify).
     */
    emailDomain: (addressOrDomain: string): RecipientBuilder => emailDomainRecipient(addressOrDomain),
  };

  /** Throws a TypeError naming the field if the configuration is unusable. */
  constructor(config: PostGuardConfig) {
    this.config = resolveConfig(config);
    this.pkg = new ClientPkg(this.config);
  }

  /** Checks the input now and returns a lazy sealed message: nothing is fetched or read until toBytes() or upload(). */
  encrypt(input: EncryptInput): Sealed {
    if (typeof input !== 'object' || input === null) throw invalidInput('encrypt: expected {files, recipients, sign}');
    const entries = zipEntries(input.files);
    if (!Array.isArray(input.recipients) || input.recipients.length === 0)
      throw invalidInput('recipients: give at least one recipient');
    const seen = new Set<string>();
    input.recipients.forEach((r: unknown, i) => {
      if (!isRecipient(r))
        throw invalidInput(`recipients[${i}]: use pg.recipient.email() or pg.recipient.emailDomain()`);
      if (seen.has(r.email)) throw invalidInput(`recipients[${i}]: duplicate recipient ${JSON.stringify(r.email)}`);
      seen.add(r.email);
    });
    if (!isSignMethod(input.sign)) throw invalidInput('sign: use pg.sign.apiKey()');
    return new Sealed({
      config: this.config,
      pkg: this.pkg,
      entries,
      recipients: [...input.recipients],
      sign: input.sign,
    });
  }
}
