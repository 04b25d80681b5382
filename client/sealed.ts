import { toBase64 } from '../lib/base64.js';
import { signChallenge } from '../lib/challenge.js';
import { PostGuardError } from '../lib/errors.js';
import { sealStream } from '../lib/seal.js';
import type { ResolvedConfig } from './config.js';
import { ClientError, ClientErrorCode, invalidInput } from './errors.js';
import { aborted, throwIfAborted } from './http.js';
import type { ClientPkg, SigningKeys } from './pkg.js';
import { buildPolicy, type RecipientBuilder } from './recipients.js';
import type { SignMethod } from './sign.js';
import { StorageClient, type UploadSession } from './storage.js';
import { zipStream, type ZipEntry } from './zip.js';

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
  /** Aborts the upload (`ABORTED`). */
  signal?: AbortSignal;
  /** Called after each chunk the storage service confirmed, with the ciphertext bytes stored so far. */
  onProgress?: (uploadedBytes: number) => void;
}

/** How `toBytes` runs. */
export interface ToBytesOptions {
  /** Aborts the sealing (`ABORTED`). */
  signal?: AbortSignal;
}

/** What a finished upload resolves with. */
export interface UploadResult {
  /** The upload's id at the storage service: recipients download it by this. */
  uuid: string;
}

export interface SealedParts {
  config: ResolvedConfig;
  pkg: ClientPkg;
  entries: readonly ZipEntry[];
  recipients: readonly RecipientBuilder[];
  sign: SignMethod;
}

/** Longest notification message we send (Cryptify has no limit of its own; this keeps requests sane). */
const MAX_MESSAGE_CHARS = 100_000;

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
    {
      cause: error,
    },
  );
}

/** The ZIP stream, cut off with the abort reason if the signal fires. */
function abortable(readable: ReadableStream<Uint8Array>, signal: AbortSignal | undefined): ReadableStream<Uint8Array> {
  if (signal === undefined) return readable;
  return readable.pipeThrough(new TransformStream<Uint8Array, Uint8Array>(), { signal });
}

/**
 * A writable that hands on exactly `size` bytes at a time (the last piece may be shorter and is
 * never empty). write() resolves only after `deliver` did, so the sealer waits while a chunk
 * uploads, and the one buffer is reused: `deliver` must be done with a chunk when it resolves
 * (an upload is: its request has been answered). Memory: one chunk, allocated on first use.
 */
export function chunkingSink(
  size: number,
  deliver: (chunk: Uint8Array<ArrayBuffer>) => Promise<void>,
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
          await deliver(buffer);
        }
      }
    },
    async close() {
      if (buffer !== undefined && filled > 0) await deliver(buffer.subarray(0, filled));
    },
  });
}

/**
 * A message ready to be sealed, as `pg.encrypt()` returns it: nothing runs until toBytes() or
 * upload(). Both fetch the master
 * public key (revalidated by ETag) and, once per Sealed, the signing keys; then the files stream
 * through the ZIP writer and the sealer. upload() sends the ciphertext to the storage service
 * chunk by chunk as it is produced, so memory stays at about one chunk whatever the file sizes.
 */
export class Sealed {
  private signingKeys: Promise<SigningKeys> | undefined;
  private started = false;
  private readonly storage: StorageClient;

  /** Use `pg.encrypt()`. */
  constructor(private readonly parts: SealedParts) {
    this.storage = new StorageClient(parts.config);
  }

  /** Seals into memory: the whole ciphertext (streaming format) as one Uint8Array. Nothing is uploaded. */
  async toBytes(options: ToBytesOptions = {}): Promise<Uint8Array> {
    const signal = options.signal;
    const chunks: Uint8Array[] = [];
    let length = 0;
    const sink = new WritableStream<Uint8Array>({
      write(bytes) {
        chunks.push(bytes.slice());
        length += bytes.length;
      },
    });
    await this.seal(sink, signal);
    const out = new Uint8Array(length);
    let offset = 0;
    for (const c of chunks) {
      out.set(c, offset);
      offset += c.length;
    }
    return out;
  }

  /**
   * Seals and uploads. On failure nothing is finalized: the storage service keeps the partial
   * file under the upload's UUID and forgets the session when it has been idle for its session
   * lifetime (Cryptify: an hour); no e-mail is sent. The error carries `uuid` and `uploadedBytes`.
   */
  async upload(options: UploadOptions = {}): Promise<UploadResult> {
    const notify = notifySettings(options.notify);
    const { signal, onProgress } = options;
    if (onProgress !== undefined && typeof onProgress !== 'function')
      throw invalidInput('onProgress: expected a function');
    this.checkInputsUnread();
    const nonAddress = this.parts.recipients.find((r) => !r.email.includes('@'));
    if (nonAddress !== undefined) {
      throw invalidInput(
        `upload: the storage service needs an e-mail address per recipient; got ${JSON.stringify(nonAddress.email)}`,
      );
    }
    // Keys first: a rejected API key or an unreachable PKG must not leave an empty upload behind.
    const keys = await this.keys(signal);
    const session: UploadSession = await this.storage.init(
      {
        recipients: this.parts.recipients.map((r) => r.email),
        notifyRecipients: notify.recipients,
        confirm: notify.sender,
        message: notify.message,
        language: notify.language,
        apiKey: this.parts.sign.apiKey,
      },
      signal,
    );
    let uploaded = 0;
    const sink = chunkingSink(this.parts.config.uploadChunkSize, async (chunk) => {
      session.token = await this.storage.putChunk(session, uploaded, chunk, signal);
      uploaded += chunk.length;
      onProgress?.(uploaded);
    });
    try {
      await this.seal(sink, signal, keys);
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
    // pg-js 2.5: prove possession of the sender's signing key when the service asks.
    const proof =
      session.challenge === undefined
        ? undefined
        : toBase64(signChallenge(keys.signing.pubSignKey, session.uuid, session.challenge));
    await this.storage.finalize(session, uploaded, signal, proof);
    return { uuid: session.uuid };
  }

  private async keys(signal: AbortSignal | undefined): Promise<{ mpk: string; signing: SigningKeys }> {
    const signing = (this.signingKeys ??= this.parts.pkg.signingKeys(this.parts.sign.apiKey, signal));
    // A failed lookup is not cached: the next call asks again.
    signing.catch(() => {
      if (this.signingKeys === signing) this.signingKeys = undefined;
    });
    const [mpk, keys] = await Promise.all([this.parts.pkg.masterPublicKey(signal), signing]);
    return { mpk, signing: keys };
  }

  /** Stream inputs can be read once; Uint8Array and Blob inputs any number of times. */
  private checkInputsUnread(): void {
    if (this.started && this.parts.entries.some((e) => e.content instanceof ReadableStream)) {
      throw new ClientError(
        ClientErrorCode.INVALID_STATE,
        'this message has stream inputs, which were already read: encrypt again with new streams',
      );
    }
  }

  private async seal(
    sink: WritableStream<Uint8Array>,
    signal: AbortSignal | undefined,
    resolved?: { mpk: string; signing: SigningKeys },
  ): Promise<void> {
    throwIfAborted(signal);
    this.checkInputsUnread();
    const { mpk, signing } = resolved ?? (await this.keys(signal));
    throwIfAborted(signal);
    // Again: another run may have started while the keys were fetched.
    this.checkInputsUnread();
    this.started = true;
    const ts = Math.floor(Date.now() / 1000);
    const policy = buildPolicy(this.parts.recipients, ts, this.parts.config.attributes);
    const options = {
      policy,
      pubSignKey: signing.pubSignKey,
      ...(signing.privSignKey ? { privSignKey: signing.privSignKey } : {}),
    };
    try {
      await sealStream(mpk, options, abortable(zipStream(this.parts.entries), signal), sink);
    } catch (error) {
      throw sealFailure(error, signal);
    }
  }
}
