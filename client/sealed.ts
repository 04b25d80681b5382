import { PostGuardError } from '../lib/errors.js';
import type { Policy } from '../lib/policy.js';
import type { SealOptions } from '../lib/seal.js';
import type { ResolvedConfig } from './config.js';
import type { CryptoEngine } from './engine.js';
import { ClientError, ClientErrorCode, invalidInput } from './errors.js';
import { aborted, throwIfAborted } from './http.js';
import { holdSealingLock, type UploadKeeper, type UploadRecord } from './keeper.js';
import { isKeyedUploadId, keyedState, keyedUploadId } from './keyed.js';
import type { ClientPkg, SigningKeys } from './pkg.js';
import { buildPolicy, emailRecipient, type RecipientBuilder } from './recipients.js';
import { PendingUpload } from './resume.js';
import type { SignMethod } from './sign.js';
import { StorageClient, type StorageLimits, type UploadSession } from './storage.js';
import { ChunkFeed, checkLimits, located, uploadCiphertext } from './upload.js';
import { withinUploadDeadline } from './upload-deadline.js';
import { plainLength, zipStream, type ZipEntry } from './zip.js';

/** Whom the storage service mails about an upload, and what it says. */
export interface NotifyOptions {
  /** The storage service mails each recipient a download link. Default false. */
  recipients?: boolean;
  /** The storage service mails the sender a confirmation. Default false. */
  sender?: boolean;
  /** Text included in those mails. Default none. */
  message?: string;
  /** Language of those mails. Default 'EN'. */
  language?: 'EN' | 'NL';
}

/** How `upload` runs: notifications, abort and progress. */
export interface UploadOptions {
  /** Without it (or with everything false) the upload is silent: nobody is mailed. */
  notify?: NotifyOptions;
  /**
   * Aborts the upload (`ABORTED`). A kept upload stays resumable (`pg.resumeUploads()`) once its
   * sealing ended; aborted while still sealing, nothing of it is kept.
   */
  signal?: AbortSignal;
  /**
   * Called after each chunk the storage service confirmed, with the ciphertext bytes stored so far
   * and the total. (pg-js reports a percentage of the plaintext instead; the bytes say more.)
   */
  onProgress?: (uploadedBytes: number, totalBytes: number | undefined) => void;
  /**
   * Called as sealing goes on, with the ciphertext bytes sealed so far and the total (undefined
   * for a stream of unknown length). Sealing and uploading run side by side: in a browser the
   * sealed bytes are kept first, so sealing may run ahead of the upload.
   */
  onSealProgress?: (sealedBytes: number, totalBytes: number | undefined) => void;
  /** Called once the storage service assigned the upload its id, before the first chunk. */
  onUploadInit?: (upload: { uuid: string }) => void;
  /** What `pg.resumeUploads()` shows for this upload. Default: the file names. */
  label?: string;
  /**
   * The caller's key for this upload (a batch id, or a digest of the files and the recipients),
   * for a script that may run again after a crash: with a keeper that remembers sent uploads
   * (`@postguard-ts/sdk`'s fileKeeper; any other is INVALID_INPUT), an upload is sent once under
   * its key however often it runs. A key already sent resolves with that upload's uuid and sends
   * nothing; one kept unfinished (a crash mid-upload, or after finalize before its record was
   * cleared) is resumed from its kept bytes, not sealed again. Either way these inputs are not read.
   */
  key?: string;
}

/** How `toBytes` and `stream` run. */
export interface ToBytesOptions {
  /** Aborts the sealing (`ABORTED`). */
  signal?: AbortSignal;
}

/** What a finished upload resolves with. */
export interface UploadResult {
  /** The upload's id at the storage service: recipients download it by this. */
  uuid: string;
}

/** What a message seals: files bundled as a ZIP, or bytes as they are. */
export type SealedInput =
  { kind: 'files'; entries: readonly ZipEntry[] } | { kind: 'data'; data: Uint8Array | ReadableStream<Uint8Array> };

export interface SealedParts {
  config: ResolvedConfig;
  pkg: ClientPkg;
  engine: () => CryptoEngine;
  keeper: () => Promise<UploadKeeper>;
  input: SealedInput;
  recipients: readonly RecipientBuilder[];
  sign: SignMethod;
  signingKeys?: SigningKeys | undefined;
}

/**
 * The library's size arithmetic and the upload's proof of possession, loaded when an upload or
 * size() needs them: the crypto modules they sit beside stay out of a page's first chunk (the
 * sealing itself runs in the engine, in the crypto worker in a page).
 */
const library = () =>
  Promise.all([import('../lib/seal.js'), import('../lib/challenge.js'), import('../lib/base64.js')]).then(
    ([seal, challenge, base64]) => ({ ...seal, ...challenge, ...base64 }),
  );

/** Longest notification message we send (Cryptify has no limit of its own; this keeps requests sane). */
const MAX_MESSAGE_CHARS = 100_000;
/** The longest e-mail address (RFC 5321's path limit): the size bound when the sender's is not known yet. */
const LONGEST_EMAIL = 254;

function notifySettings(notify: unknown): Required<NotifyOptions> {
  if (notify === undefined) return { recipients: false, sender: false, message: '', language: 'EN' };
  if (typeof notify !== 'object' || notify === null) throw invalidInput('notify: expected an object');
  const n = notify as NotifyOptions;
  for (const flag of ['recipients', 'sender'] as const) {
    if (n[flag] !== undefined && typeof n[flag] !== 'boolean') throw invalidInput(`notify.${flag}: expected a boolean`);
  }
  if (n.message !== undefined && (typeof n.message !== 'string' || n.message.length > MAX_MESSAGE_CHARS)) {
    throw invalidInput(`notify.message: expected a string of at most ${MAX_MESSAGE_CHARS} characters`);
  }
  if (n.language !== undefined && n.language !== 'EN' && n.language !== 'NL')
    throw invalidInput('notify.language: expected "EN" or "NL"');
  return {
    recipients: n.recipients ?? false,
    sender: n.sender ?? false,
    message: n.message ?? '',
    language: n.language ?? 'EN',
  };
}

/** Errors out of the sealer, translated: what a sink threw passes through, input failures get their own code. */
function sealFailure(error: unknown, signal: AbortSignal | undefined): unknown {
  if (signal?.aborted) return aborted(signal.reason);
  if (error instanceof ClientError) return error;
  if (error instanceof PostGuardError) {
    if (error.code === 'SINK_FAILED' && error.cause instanceof ClientError) return error.cause;
    if (error.code === 'SOURCE_FAILED') {
      return new ClientError(ClientErrorCode.INPUT_FAILED, `reading a file failed: ${String(error.cause)}`, {
        cause: error.cause,
      });
    }
    if (error.code === 'INVALID_KEY') {
      return new ClientError(ClientErrorCode.PKG_BAD_RESPONSE, `the PKG's keys cannot be used: ${error.message}`, {
        cause: error,
      });
    }
  }
  return new ClientError(
    ClientErrorCode.SEAL_FAILED,
    `sealing failed: ${error instanceof Error ? error.message : String(error)}`,
    { cause: error },
  );
}

/** The stream, cut off with the abort reason if the signal fires. */
function abortable(readable: ReadableStream<Uint8Array>, signal: AbortSignal | undefined): ReadableStream<Uint8Array> {
  if (signal === undefined) return readable;
  return readable.pipeThrough(new TransformStream<Uint8Array, Uint8Array>(), { signal });
}

/** What else {@link chunkingSink} does. */
export interface ChunkingOptions {
  /** A new buffer for each chunk, so `deliver` may keep the chunks it is given. Default false: one buffer, reused. */
  fresh?: boolean;
  /** After the last chunk was delivered, when the writable closes. */
  close?: () => Promise<void>;
  /** When the writable is aborted. */
  abort?: (reason: unknown) => Promise<void>;
}

/**
 * A writable that hands on exactly `size` bytes at a time (the last piece may be shorter and is
 * never empty). write() resolves only after `deliver` did, so the sealer waits while a chunk
 * uploads. Unless `fresh`, the one buffer is reused: `deliver` must be done with a chunk when it
 * resolves (an upload is: its request has been answered). Memory: one chunk (`fresh`: what
 * `deliver` keeps besides).
 */
export function chunkingSink(
  size: number,
  deliver: (chunk: Uint8Array<ArrayBuffer>) => Promise<void>,
  options: ChunkingOptions = {},
): WritableStream<Uint8Array> {
  let buffer: Uint8Array<ArrayBuffer> | undefined;
  let filled = 0;
  return new WritableStream<Uint8Array>({
    async write(bytes) {
      let offset = 0;
      while (offset < bytes.length) {
        buffer ??= new Uint8Array(size);
        const n = Math.min(size - filled, bytes.length - offset);
        buffer.set(bytes.subarray(offset, offset + n), filled);
        filled += n;
        offset += n;
        if (filled === size) {
          filled = 0;
          const full = buffer;
          if (options.fresh === true) buffer = undefined;
          await deliver(full);
        }
      }
    },
    async close() {
      if (buffer !== undefined && filled > 0) await deliver(buffer.subarray(0, filled));
      buffer = undefined;
      await options.close?.();
    },
    async abort(reason) {
      buffer = undefined;
      await options.abort?.(reason);
    },
  });
}

/** Ciphertext a page holds for an upload running beside the sealing: three chunks of Cryptify's size. */
const FEED_BYTES = 16 * 1024 * 1024;
/** How long the sealer waits for the upload to make room before it runs on alone (a stalled upload). */
const FEED_WAIT_MS = 5000;

/** A fresh id for a kept upload (letters and digits: safe as a file name anywhere). */
export const newUploadId = (): string => crypto.randomUUID().replaceAll('-', '');

/**
 * A message ready to be sealed, as `pg.encrypt()` returns it: nothing runs until toBytes(),
 * stream() or upload(). Each fetches the master public key and, once per Sealed, the signing keys
 * (the sender's QR scan, for Yivi signing); then the input streams through the ZIP writer and the
 * sealer, in the crypto worker in a page.
 *
 * upload() in a browser keeps the sealed bytes (Origin Private File System, else IndexedDB) until
 * the storage service confirmed the last chunk, so a reload or a crash can continue it
 * (`pg.resumeUploads()`); where nothing survives a reload (Node without a keeper, a private
 * window) it streams the ciphertext to the storage service as it is sealed, one chunk in memory.
 */
export class Sealed {
  private signingKeys: Promise<SigningKeys> | undefined;
  private started = false;
  private readonly storage: StorageClient;

  /** Use `pg.encrypt()`. @internal */
  constructor(private readonly parts: SealedParts) {
    this.storage = new StorageClient(parts.config);
    if (parts.signingKeys !== undefined) this.signingKeys = Promise.resolve(parts.signingKeys);
  }

  /** 'files' (a ZIP of the files is sealed) or 'data' (the bytes are sealed as they are). */
  get mode(): 'files' | 'data' {
    return this.parts.input.kind;
  }

  /** Whether upload() can run: the configuration names a storage service. */
  get canUpload(): boolean {
    return this.parts.config.storageUrl !== '';
  }

  /**
   * The ciphertext's exact length in bytes, before anything is sealed or scanned; undefined when
   * an input is a stream of unknown length. Before the signing keys exist it assumes the sender
   * discloses exactly the `senderEmail` the sign method names (an API key's identity is asked for).
   */
  async size(options: ToBytesOptions = {}): Promise<number | undefined> {
    const plain = this.plainLength('bytes');
    if (plain === undefined) return undefined;
    if (this.parts.sign.type === 'apiKey' || this.parts.signingKeys !== undefined) {
      const keys = await this.keys(options.signal);
      const { sealedSize } = await library();
      return sealedSize(plain, this.sealOptions(keys.signing, plain));
    }
    return await this.expectedSize(plain, 'exact');
  }

  /** Seals into memory: the whole ciphertext (streaming format) as one Uint8Array. Nothing is uploaded. */
  async toBytes(options: ToBytesOptions = {}): Promise<Uint8Array> {
    const chunks: Uint8Array[] = [];
    let length = 0;
    const sink = new WritableStream<Uint8Array>({
      write(bytes) {
        chunks.push(bytes.slice());
        length += bytes.length;
      },
    });
    await this.seal(sink, 'bytes', options.signal);
    const out = new Uint8Array(length);
    let offset = 0;
    for (const c of chunks) {
      out.set(c, offset);
      offset += c.length;
    }
    return out;
  }

  /** The ciphertext as a stream, sealed as it is read. Errors with the ClientError if sealing fails. */
  stream(options: ToBytesOptions = {}): ReadableStream<Uint8Array> {
    const pipe = new TransformStream<Uint8Array, Uint8Array>();
    this.seal(pipe.writable, 'bytes', options.signal).catch(() => undefined);
    return pipe.readable;
  }

  /**
   * Seals and uploads; resolves once the storage service finalized the upload (and sent the
   * e-mails `notify` asks for). Refuses a message over the storage service's per-upload limit
   * (`UPLOAD_TOO_LARGE`) before the sender is asked to scan anything.
   *
   * On failure nothing is finalized and no e-mail is sent. A kept upload (browsers) stays
   * resumable with `pg.resumeUploads()` until the storage service forgets it; the error carries
   * `uuid` and `uploadedBytes`.
   */
  async upload(options: UploadOptions = {}): Promise<UploadResult> {
    const notify = notifySettings(options.notify);
    const { signal, onProgress } = options;
    for (const name of ['onProgress', 'onSealProgress'] as const) {
      if (options[name] !== undefined && typeof options[name] !== 'function')
        throw invalidInput(`${name}: expected a function`);
    }
    if (!this.canUpload)
      throw new ClientError(
        ClientErrorCode.NO_STORAGE,
        'upload: configure cryptifyUrl, the storage service to upload to',
      );
    this.checkInputsUnread();
    const nonAddress = this.parts.recipients.find((r) => !r.email.includes('@'));
    if (nonAddress !== undefined) {
      throw invalidInput(
        `upload: the storage service needs an e-mail address per recipient; got ${JSON.stringify(nonAddress.email)}`,
      );
    }
    // Keyed: sent once under its key, whatever ran before (keyed.ts).
    const keyedId = options.key === undefined ? undefined : await keyedUploadId(options.key);
    if (keyedId !== undefined) {
      const keeper = await this.parts.keeper();
      const state = await keyedState(keeper, keyedId);
      if ('sent' in state) return { uuid: state.sent };
      if ('kept' in state)
        return new PendingUpload(state.kept, keeper, this.storage, this.parts.config.timeouts.uploadMs).resume({
          ...(signal === undefined ? {} : { signal }),
          ...(onProgress === undefined ? {} : { onProgress }),
        });
    }
    // The limit before the keys: an over-limit file must be refused before the sender scans a QR.
    // An API key has a tier of its own (the service decides it at init), and a key the PKG refuses
    // must leave no trace at the storage service: nothing is asked of it before the keys.
    const limits = this.parts.sign.type === 'apiKey' ? undefined : await this.storage.limits(signal);
    const plain = this.plainLength('upload');
    if (limits !== undefined && plain !== undefined) {
      checkLimits(await this.expectedSize(plain, 'smallest'), limits);
    }
    const keys = await this.keys(signal);
    const { sealedSize } = await library();
    const exact = plain === undefined ? undefined : sealedSize(plain, this.sealOptions(keys.signing, plain));
    if (limits !== undefined && exact !== undefined) checkLimits(exact, limits);

    const keeper = await this.parts.keeper();
    const label = options.label ?? this.label();
    // The overall deadline counts from here: the time the sender's scan took is theirs.
    return withinUploadDeadline(signal, this.parts.config.timeouts.uploadMs, (within) => {
      const timed = within === signal ? options : { ...options, signal: within };
      if (!keeper.persistent) return this.uploadAsSealed(keys, exact, notify, timed);
      return this.uploadKept(keeper, keys, { id: keyedId ?? newUploadId(), exact, limits, label, notify }, timed);
    });
  }

  /**
   * Sealing into the keeper and uploading, side by side: each sealed chunk goes to the kept file
   * and to the upload (from memory, {@link ChunkFeed}), so the upload runs at the speed of the
   * slower of the two instead of after the sealing. The kept bytes are committed when sealing
   * ends; from then on the upload can be resumed after a reload from exactly those bytes, and it
   * reads from them whatever the feed dropped. Until then the record is marked `sealing` (and the
   * page holds a Web Lock), so that a reload during sealing is found again as a lost send
   * (`pg.lostUploads()`) rather than left behind unseen.
   */
  private async uploadKept(
    keeper: UploadKeeper,
    keys: { mpk: string; signing: SigningKeys },
    plan: {
      /** The keeper id: random, or a keyed upload's. */
      id: string;
      exact: number | undefined;
      limits: StorageLimits | undefined;
      label: string;
      notify: Required<NotifyOptions>;
    },
    options: UploadOptions,
  ): Promise<UploadResult> {
    const { signal, onProgress, onSealProgress } = options;
    const { id, exact, limits, notify } = plan;
    const session = await this.init(notify, signal);
    options.onUploadInit?.({ uuid: session.uuid });
    const chunkSize = Math.min(this.parts.config.uploadChunkSize, session.maxChunkSize ?? Infinity);
    const proof = await this.proof(keys.signing, session);
    const record: UploadRecord = {
      id,
      createdAt: Date.now(),
      // Saved with this size only when it is known; else once sealed, with the size then known.
      size: exact ?? 0,
      recipients: this.parts.recipients.map((r) => r.email),
      label: plan.label,
      notify,
      uuid: session.uuid,
      chunkSize,
      ...(session.recoveryToken === undefined ? {} : { recoveryToken: session.recoveryToken }),
      ...(proof === undefined ? {} : { proof }),
    };
    const release = await holdSealingLock(id);
    const stopSealing = new AbortController();
    const sealSignal = signal === undefined ? stopSealing.signal : AbortSignal.any([signal, stopSealing.signal]);
    const feed = new ChunkFeed(Math.max(FEED_BYTES, chunkSize), FEED_WAIT_MS);
    const sealing = this.sealKept(
      keeper,
      keys,
      { record, chunkSize, exact, limits, feed, release },
      sealSignal,
      onSealProgress,
    );
    sealing.catch(() => undefined);
    let uploaded = 0;
    try {
      for (;;) {
        const item = await feed.next(signal);
        if (!('chunk' in item)) break;
        session.token = await this.storage.putChunk(session, item.offset, item.chunk, signal);
        uploaded = item.offset + item.chunk.length;
        onProgress?.(uploaded, exact);
      }
      await sealing;
      const source = await keeper.open(id);
      if (source === undefined)
        throw new ClientError(ClientErrorCode.INVALID_STATE, 'the sealed bytes were not kept; try again');
      await uploadCiphertext({
        storage: this.storage,
        session,
        source,
        from: uploaded,
        chunkSize,
        ...(proof === undefined ? {} : { proof }),
        ...(onProgress === undefined ? {} : { onProgress }),
        ...(signal === undefined ? {} : { signal }),
      });
      // Sent: a keyed upload is marked so before its record goes, so no rerun sends it again.
      if (isKeyedUploadId(id)) await keeper.markSent?.(id, session.uuid);
      await keeper.remove(id);
      return { uuid: session.uuid };
    } catch (error) {
      feed.stop();
      // A resumable failure of the upload lets the sealing finish: its kept bytes are what a
      // resume sends. Anything else ends the sealing, and nothing is kept.
      if (!isResumable(error) || signal?.aborted) stopSealing.abort(error);
      const committed = await sealing.then(
        () => true,
        () => false,
      );
      if (!committed || !isResumable(error)) await keeper.remove(id).catch(() => undefined);
      throw located(error, session.uuid, uploaded);
    }
  }

  /**
   * The sealing half of {@link uploadKept}: every sealed chunk into the keeper and the feed; at the
   * end, the bytes committed and the record saved as resumable, and the feed told. On failure the
   * feed fails and nothing is kept. `release` gives up the sealing lock the caller took, at the end.
   */
  private async sealKept(
    keeper: UploadKeeper,
    keys: { mpk: string; signing: SigningKeys },
    plan: {
      record: UploadRecord;
      chunkSize: number;
      exact: number | undefined;
      limits: StorageLimits | undefined;
      feed: ChunkFeed;
      release: () => void;
    },
    signal: AbortSignal,
    onSealProgress: UploadOptions['onSealProgress'],
  ): Promise<void> {
    const { record, exact, limits, feed } = plan;
    let sealed = 0;
    try {
      // Unknown lengths (a stream) are recorded once sealed: their size is not known before.
      if (exact !== undefined) await keeper.save({ ...record, sealing: true });
      const kept = (await keeper.create(record.id)).getWriter();
      // One chunk's write to the keeper runs while the next one is sealed (a keeper's write may
      // cross to another thread or process): awaited before the next write, and before the close.
      let keeping: Promise<void> = Promise.resolve();
      const sink = chunkingSink(
        plan.chunkSize,
        async (chunk) => {
          await keeping;
          keeping = kept.write(chunk);
          keeping.catch(() => undefined);
          await feed.offer(chunk);
          sealed += chunk.length;
          onSealProgress?.(sealed, exact);
        },
        {
          fresh: true,
          close: async () => {
            await keeping;
            await kept.close();
          },
          abort: (reason) => kept.abort(reason).catch(() => undefined),
        },
      );
      await this.seal(sink, 'upload', signal, keys);
      if (limits !== undefined) checkLimits(sealed, limits);
      await keeper.save({ ...record, size: sealed });
      feed.end();
    } catch (error) {
      feed.fail(error);
      await keeper.remove(record.id).catch(() => undefined);
      throw error;
    } finally {
      plan.release();
    }
  }

  /** Sealing straight into the upload, one chunk in memory: for where nothing survives a reload anyway. */
  private async uploadAsSealed(
    keys: { mpk: string; signing: SigningKeys },
    size: number | undefined,
    notify: Required<NotifyOptions>,
    options: UploadOptions,
  ): Promise<UploadResult> {
    const { signal, onProgress } = options;
    const session: UploadSession = await this.init(notify, signal);
    options.onUploadInit?.({ uuid: session.uuid });
    const chunkSize = Math.min(this.parts.config.uploadChunkSize, session.maxChunkSize ?? Infinity);
    let uploaded = 0;
    const sink = chunkingSink(chunkSize, async (chunk) => {
      session.token = await this.storage.putChunk(session, uploaded, chunk, signal);
      uploaded += chunk.length;
      options.onSealProgress?.(uploaded, size);
      onProgress?.(uploaded, size);
    });
    try {
      await this.seal(sink, 'upload', signal, keys);
    } catch (error) {
      const e = error instanceof ClientError ? error : (sealFailure(error, signal) as ClientError);
      throw new ClientError(e.code, `upload ${session.uuid} failed and was not finalized: ${e.message}`, {
        cause: e,
        ...(e.status === undefined ? {} : { status: e.status }),
        ...(e.url === undefined ? {} : { url: e.url }),
        uuid: session.uuid,
        uploadedBytes: uploaded,
      });
    }
    await this.storage.finalize(session, uploaded, signal, await this.proof(keys.signing, session));
    return { uuid: session.uuid };
  }

  private init(notify: Required<NotifyOptions>, signal: AbortSignal | undefined): Promise<UploadSession> {
    const sign = this.parts.sign;
    return this.storage.init(
      {
        recipients: this.parts.recipients.map((r) => r.email),
        notifyRecipients: notify.recipients,
        confirm: notify.sender,
        message: notify.message,
        language: notify.language,
        apiKey: sign.type === 'apiKey' ? sign.apiKey : undefined,
      },
      signal,
    );
  }

  /** pg-js 2.5: proof of possession of the sender's signing key, when the service asks for one. */
  private async proof(signing: SigningKeys, session: UploadSession): Promise<string | undefined> {
    if (session.challenge === undefined) return undefined;
    const { signChallenge, toBase64 } = await library();
    return toBase64(signChallenge(signing.pubSignKey, session.uuid, session.challenge));
  }

  private label(): string {
    const { input } = this.parts;
    return input.kind === 'files' ? input.entries.map((e) => e.name).join(', ') : 'data';
  }

  /**
   * What is sealed: for 'upload', data is wrapped as one ZIP entry `data.bin` (as pg-js does, so
   * that every uploaded message is a bundle a receiver lists the same way).
   */
  private plaintext(purpose: 'bytes' | 'upload'): ZipEntry[] | Uint8Array | ReadableStream<Uint8Array> {
    const { input } = this.parts;
    if (input.kind === 'files') return [...input.entries];
    if (purpose === 'bytes') return input.data;
    return [{ name: 'data.bin', content: input.data, lastModified: undefined }];
  }

  private plainLength(purpose: 'bytes' | 'upload'): number | undefined {
    return plainLength(this.plaintext(purpose));
  }

  /** The recipients' policy, with the sender's own address when `includeSender` asks for it. */
  private policy(ts: number): SealOptions['policy'] {
    const recipients = [...this.parts.recipients];
    const sign = this.parts.sign;
    const sender = sign.type === 'yivi' && sign.options.includeSender === true ? sign.options.senderEmail : undefined;
    if (sender !== undefined && !recipients.some((r) => r.email === sender)) recipients.push(emailRecipient(sender));
    return buildPolicy(recipients, ts, this.parts.config.attributes);
  }

  /** The size from the identities the sender will disclose: exact when their values are known, else the smallest or largest they can be. */
  private async expectedSize(plain: number, bound: 'exact' | 'smallest'): Promise<number> {
    const { expectedSealedSize } = await library();
    const ts = Math.floor(Date.now() / 1000);
    const email = this.parts.config.attributes.email;
    const sign = this.parts.sign;
    const senderEmail =
      sign.type === 'yivi' ? sign.options.senderEmail : sign.type === 'session' ? sign.senderEmail : undefined;
    const unknown = bound === 'smallest' ? 'a@b' : 'x'.repeat(LONGEST_EMAIL);
    const pubSignPolicy: Policy = { ts, con: [{ t: email, v: senderEmail ?? unknown }] };
    const extra = sign.type === 'yivi' ? (sign.options.attributes ?? []) : [];
    const privSignPolicy: Policy | undefined =
      extra.length === 0
        ? undefined
        : { ts, con: extra.map((a) => ({ t: a.t, v: a.v ?? (bound === 'smallest' ? '' : 'x'.repeat(1024)) })) };
    return expectedSealedSize(plain, { policy: this.policy(ts), pubSignPolicy, privSignPolicy });
  }

  private sealOptions(signing: SigningKeys, plain: number | undefined): SealOptions {
    const ts = Math.floor(Date.now() / 1000);
    return {
      policy: this.policy(ts),
      pubSignKey: signing.pubSignKey,
      ...(signing.privSignKey ? { privSignKey: signing.privSignKey } : {}),
      ...(plain === undefined ? {} : { size: plain }),
    };
  }

  private async keys(signal: AbortSignal | undefined): Promise<{ mpk: string; signing: SigningKeys }> {
    const signing = (this.signingKeys ??= this.parts.pkg.signingKeys(this.parts.sign, signal));
    // A failed lookup is not cached: the next call asks again.
    signing.catch(() => {
      if (this.signingKeys === signing) this.signingKeys = undefined;
    });
    const [mpk, keys] = await Promise.all([this.parts.pkg.masterPublicKey(signal), signing]);
    return { mpk, signing: keys };
  }

  /** Stream inputs can be read once; Uint8Array and Blob inputs any number of times. */
  private checkInputsUnread(): void {
    const { input } = this.parts;
    const streams =
      input.kind === 'files'
        ? input.entries.some((e) => e.content instanceof ReadableStream)
        : input.data instanceof ReadableStream;
    if (this.started && streams) {
      throw new ClientError(
        ClientErrorCode.INVALID_STATE,
        'this message has stream inputs, which were already read: encrypt again with new streams',
      );
    }
  }

  private async seal(
    sink: WritableStream<Uint8Array>,
    purpose: 'bytes' | 'upload',
    signal: AbortSignal | undefined,
    resolved?: { mpk: string; signing: SigningKeys },
  ): Promise<void> {
    try {
      throwIfAborted(signal);
      this.checkInputsUnread();
      const { mpk, signing } = resolved ?? (await this.keys(signal));
      throwIfAborted(signal);
      // Again: another run may have started while the keys were fetched.
      this.checkInputsUnread();
      this.started = true;
      const plaintext = this.plaintext(purpose);
      const source =
        plaintext instanceof Uint8Array
          ? new Blob([plaintext as Uint8Array<ArrayBuffer>]).stream()
          : plaintext instanceof ReadableStream
            ? plaintext
            : zipStream(plaintext);
      const options = this.sealOptions(signing, plainLength(plaintext));
      await this.parts.engine().sealStream(mpk, options, abortable(source, signal), sink);
    } catch (error) {
      await sink.abort(error).catch(() => undefined);
      throw sealFailure(error, signal);
    }
  }
}

/** Whether an upload that failed this way can be continued later from where the service stopped. */
export function isResumable(error: unknown): boolean {
  if (!(error instanceof ClientError)) return false;
  const codes: readonly string[] = [
    ClientErrorCode.STORAGE_UNAVAILABLE,
    ClientErrorCode.ABORTED,
    ClientErrorCode.FINALIZE_UNCONFIRMED,
  ];
  return codes.includes(error.code);
}
