import { defaultStore, type KeyValueStore } from '../lib/pkg/index.js';
import type { FileListLike } from '../lib/web-types.js';
import { resolveConfig, type PostGuardConfig, type ResolvedConfig } from './config.js';
import { defaultEngine, type CryptoEngine } from './engine.js';
import { ClientError, ClientErrorCode, invalidInput } from './errors.js';
import { isBrowser } from './host.js';
import { memoryKeeper, type UploadKeeper } from './keeper.js';
import { Opened, type OpenInput } from './opened.js';
import { ClientPkg } from './pkg.js';
import { emailDomainRecipient, emailRecipient, isRecipient, type RecipientBuilder } from './recipients.js';
import { lostUploads, PendingUpload, type LostUpload } from './resume.js';
import { Sealed, type SealedInput } from './sealed.js';
import {
  apiKeySign,
  isSignMethod,
  sessionSign,
  yiviSign,
  type ApiKeySign,
  type SessionCallback,
  type SessionSign,
  type SignMethod,
  type YiviSign,
  type YiviSignOptions,
} from './sign.js';
import type { SigningKeys } from './pkg.js';
import { StorageClient, type StorageLimits } from './storage.js';
import { zipEntries, type PgFile } from './zip.js';

/** What `encrypt` seals: files or bytes, who may open them, and how the sender signs. */
export interface EncryptInput {
  /** Files, bundled into one ZIP inside the ciphertext: `File`s, a `FileList`, or `{ name, content }`. */
  files?: readonly (PgFile | File)[] | FileListLike;
  /** Or bytes, sealed as they are (give `files` or `data`). */
  data?: Uint8Array | ReadableStream<Uint8Array>;
  /** At least one recipient, from `pg.recipient.email()` or `pg.recipient.emailDomain()`. */
  recipients: readonly RecipientBuilder[];
  /** How the sender signs: `pg.sign.yivi()`, `pg.sign.session()` or (Node) `pg.sign.apiKey()`. */
  sign: SignMethod;
  /** Signing keys got earlier (e.g. from another message of the same sender): no new session. */
  signingKeys?: SigningKeys;
}

/** The client's options beyond the services' configuration. */
export interface PostGuardOptions extends PostGuardConfig {
  /**
   * Where sealing and opening run. Default: the crypto worker in a page (started on first use),
   * the library inline elsewhere. Pass a `PostGuardWorker` to share one, or the `postguard-ts`
   * module itself for this thread.
   */
  engine?: CryptoEngine;
  /**
   * Where unfinished uploads are kept so they can be resumed. Default: the browser's Origin
   * Private File System (else IndexedDB) in a page, memory elsewhere (`@postguard-ts/sdk` has a
   * folder on disk).
   */
  keeper?: UploadKeeper;
  /**
   * The decrypting service worker's script (postguard-ts/sw/script, built as postguard-sw.js):
   * `decrypt()` saves files through it, straight to disk. Registered on first use.
   */
  serviceWorker?: string | URL;
  /** Where the PKG client caches public keys and (with `enableCache`) decryption keys. Default IndexedDB in a page, memory elsewhere. */
  keyStore?: KeyValueStore;
}

/** An upload id as the storage service gives it (Cryptify: a UUID). */
const UPLOAD_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The storage service's limits, before anything is sealed (`GET /limits`). */
export type { StorageLimits };

/**
 * The client of pg-js 2.x, for browsers and Node: seal files for people named by their e-mail
 * address, sign as a sender proved with Yivi, upload them to a Cryptify-style storage service, and
 * open them again by their upload id, a URL, a Blob or bytes. Make one per PKG and storage service
 * and reuse it.
 *
 * ```ts
 * const pg = new PostGuard({ pkgUrl, cryptifyUrl });
 * const { uuid } = await pg
 *   .encrypt({ files, recipients: [pg.recipient.email('bob@example.com')], sign: pg.sign.yivi({ element: '#qr' }) })
 *   .upload({ notify: { recipients: true } });
 * await pg.open({ uuid }).decrypt({ element: '#qr' });
 * ```
 */
export class PostGuard {
  /** @internal */
  readonly config: ResolvedConfig;
  private readonly pkg: ClientPkg;
  private readonly engine: () => CryptoEngine;
  private readonly keeper: () => Promise<UploadKeeper>;
  private readonly serviceWorker: string | URL | undefined;

  /** Ways to sign a message, for `EncryptInput.sign`. */
  readonly sign = {
    /** Sign with an organisation API key (`PG-…`); on a server only: a browser gets `API_KEY_IN_BROWSER`. */
    apiKey: (apiKey: string): ApiKeySign => apiKeySign(apiKey),
    /** Sign as what the sender proves with the Yivi app, in a session shown in `element` (or by `onSession`). */
    yivi: (options: YiviSignOptions): YiviSign => yiviSign(options),
    /** Sign with a session the app runs itself: `callback` gets what to disclose and returns the session's JWT. */
    session: (callback: SessionCallback, options: { senderEmail?: string } = {}): SessionSign =>
      sessionSign(callback, options),
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
  constructor(options: PostGuardOptions) {
    this.config = resolveConfig(options);
    const browser = isBrowser();
    // The PKG client's default in a page: IndexedDB, or memory where it does not open (a private window).
    this.pkg = new ClientPkg(this.config, options.keyStore ?? (browser ? defaultStore() : undefined));
    this.engine = options.engine === undefined ? defaultEngine() : () => options.engine!;
    let keeper: Promise<UploadKeeper> | undefined =
      options.keeper === undefined ? undefined : Promise.resolve(options.keeper);
    // The browser's keeper (OPFS, IndexedDB) is loaded with the first upload, not with the page.
    this.keeper = () =>
      (keeper ??= browser
        ? import('./keeper-browser.js').then(({ browserKeeper }) => browserKeeper())
        : Promise.resolve(memoryKeeper()));
    this.serviceWorker = options.serviceWorker;
  }

  /** Checks the input now and returns a lazy sealed message: nothing is fetched or read until toBytes(), stream() or upload(). */
  encrypt(input: EncryptInput): Sealed {
    if (typeof input !== 'object' || input === null)
      throw invalidInput('encrypt: expected {files or data, recipients, sign}');
    let sealed: SealedInput;
    if (input.files !== undefined && input.data !== undefined)
      throw invalidInput('encrypt: give files or data, not both');
    if (input.data !== undefined) {
      if (!(input.data instanceof Uint8Array) && !(input.data instanceof ReadableStream))
        throw invalidInput('data: expected a Uint8Array or a ReadableStream');
      sealed = { kind: 'data', data: input.data };
    } else {
      sealed = { kind: 'files', entries: zipEntries(input.files) };
    }
    if (!Array.isArray(input.recipients) || input.recipients.length === 0)
      throw invalidInput('recipients: give at least one recipient');
    const seen = new Set<string>();
    input.recipients.forEach((r: unknown, i) => {
      if (!isRecipient(r))
        throw invalidInput(`recipients[${i}]: use pg.recipient.email() or pg.recipient.emailDomain()`);
      if (seen.has(r.email)) throw invalidInput(`recipients[${i}]: duplicate recipient ${JSON.stringify(r.email)}`);
      seen.add(r.email);
    });
    if (!isSignMethod(input.sign))
      throw invalidInput('sign: use pg.sign.yivi(), pg.sign.session() or pg.sign.apiKey()');
    return new Sealed({
      config: this.config,
      pkg: this.pkg,
      engine: this.engine,
      keeper: this.keeper,
      input: sealed,
      recipients: [...input.recipients],
      sign: input.sign,
      signingKeys: input.signingKeys,
    });
  }

  /** The storage service's upload limits (`GET /limits`); undefined from a service that does not say. */
  limits(options: { signal?: AbortSignal } = {}): Promise<StorageLimits | undefined> {
    return this.storage().limits(options.signal);
  }

  /**
   * The uploads that did not finish (a reload, a crash, a lost connection), oldest first. Each
   * can be continued from where the storage service stopped (`resume()`), sending the very bytes
   * sealed before, or dropped (`discard()`).
   */
  async resumeUploads(): Promise<PendingUpload[]> {
    const storage = this.storage();
    const keeper = await this.keeper();
    const records = await keeper.list();
    return records
      .filter((r) => r.uuid !== undefined)
      .map((record) => new PendingUpload(record, keeper, storage, this.config.timeouts.uploadMs));
  }

  /**
   * The sends a reload or a closed tab cut off while they were being sealed: nothing of them can
   * be resumed or is kept any more (each is removed as it is reported, so it is reported once), and
   * no recipient was mailed. Tell the person, and offer to send the files again. Where a page cannot
   * tell a send still being sealed in another tab from one that was cut off (no Web Locks; Node),
   * this is empty.
   */
  async lostUploads(): Promise<LostUpload[]> {
    return lostUploads(await this.keeper());
  }

  /**
   * A ciphertext to open: by upload id at the storage service, by URL, or from a Blob/File or
   * bytes. Nothing is fetched until inspect() or decrypt().
   */
  open(input: OpenInput): Opened {
    if (typeof input !== 'object' || input === null)
      throw invalidInput('open: expected {uuid}, {url}, {blob} or {data}');
    if ('uuid' in input && this.config.storageUrl === '')
      throw new ClientError(ClientErrorCode.NO_STORAGE, 'open({uuid}): configure cryptifyUrl, the storage service');
    return new Opened(input, {
      config: this.config,
      pkg: this.pkg,
      engine: this.engine,
      serviceWorker: this.serviceWorker,
    });
  }

  /**
   * The link that opens an upload on your receive page: `receiveUrl` (the config) with
   * `?uuid=…` added, and `&recipient=…` when given (the page can then say whom the file is for).
   * The page reads them back with `new URL(location.href).searchParams` and opens the file with
   * `pg.open({ uuid })`.
   *
   * ```ts
   * const { uuid } = await sealed.upload();
   * const link = pg.receiveLink({ uuid }, 'bob@example.com');
   * ```
   *
   * @throws ClientError INVALID_INPUT without a `receiveUrl`, or for an upload id that is not one
   */
  receiveLink(upload: { uuid: string }, recipient?: string): string {
    if (this.config.receiveUrl === '')
      throw invalidInput(
        'receiveLink: configure receiveUrl, the page recipients open (e.g. https://app.example/receive.html)',
      );
    const uuid = typeof upload === 'object' && upload !== null ? upload.uuid : undefined;
    if (typeof uuid !== 'string' || !UPLOAD_ID.test(uuid))
      throw invalidInput(`receiveLink: ${JSON.stringify(uuid)} is not an upload id (upload() gives { uuid })`);
    if (recipient !== undefined && (typeof recipient !== 'string' || recipient === ''))
      throw invalidInput('receiveLink: recipient must be a non-empty string');
    const url = new URL(this.config.receiveUrl);
    url.searchParams.set('uuid', uuid);
    if (recipient !== undefined) url.searchParams.set('recipient', recipient);
    return url.href;
  }

  private storage(): StorageClient {
    if (this.config.storageUrl === '')
      throw new ClientError(ClientErrorCode.NO_STORAGE, 'configure cryptifyUrl, the storage service');
    return new StorageClient(this.config);
  }
}
