import { ClientError, ClientErrorCode } from './errors.js';
import { sealerGone, verifyKeptBytes, type UploadKeeper, type UploadRecord } from './keeper.js';
import { isKeyedUploadId } from './keyed.js';
import { isResumable, type UploadResult } from './sealed.js';
import type { StorageClient } from './storage.js';
import { resumeSession, uploadCiphertext } from './upload.js';
import { withinUploadDeadline } from './upload-deadline.js';

/** How `PendingUpload.resume` runs. */
export interface ResumeOptions {
  /** Called after each chunk the storage service confirmed, with the ciphertext bytes stored so far and the total. */
  onProgress?: (uploadedBytes: number, totalBytes: number) => void;
  /** Aborts (`ABORTED`); the upload stays resumable. `timeouts.uploadMs` bounds the whole resume (`TIMED_OUT`). */
  signal?: AbortSignal;
}

/**
 * An upload that did not finish, as `pg.resumeUploads()` lists it: the sealed bytes are kept, and
 * the storage service knows how far it got (`GET /fileupload/{uuid}/status` with the recovery
 * token). Resuming sends the rest of the very same bytes and finalizes with the proof computed
 * when the upload began; nothing is sealed again and no QR is scanned again.
 */
export class PendingUpload {
  /** @internal */
  constructor(
    private readonly record: UploadRecord,
    private readonly keeper: UploadKeeper,
    private readonly storage: StorageClient,
    /** `timeouts.uploadMs` (0: no overall deadline). */
    private readonly uploadMs = 0,
  ) {}

  /** The upload's id at the storage service (the recipients' link carries it). */
  get uuid(): string {
    return this.record.uuid!;
  }

  /** Ciphertext bytes in all. */
  get size(): number {
    return this.record.size;
  }

  /** What the user sent: the file names, unless the app gave a label. */
  get label(): string | undefined {
    return this.record.label;
  }

  /** The recipients' addresses. */
  get recipients(): readonly string[] {
    return this.record.recipients;
  }

  /** When the upload began. */
  get createdAt(): Date {
    return new Date(this.record.createdAt);
  }

  /**
   * Checks the kept bytes against the digests taken when they were sealed (every byte is read; a
   * change or a truncation is KEPT_BYTES_CHANGED before anything is sent), then continues from the
   * storage service's offset and finalizes. An upload the service no longer
   * knows (`UPLOAD_EXPIRED`) or refuses is dropped from the keeper; after a transient failure it
   * stays, to be resumed again.
   */
  async resume(options: ResumeOptions = {}): Promise<UploadResult> {
    return withinUploadDeadline(options.signal, this.uploadMs, (signal) =>
      this.resumeWithin(signal === options.signal ? options : { ...options, signal }),
    );
  }

  private async resumeWithin(options: ResumeOptions): Promise<UploadResult> {
    const { record, keeper } = this;
    const source = await keeper.open(record.id);
    if (source === undefined || record.recoveryToken === undefined) {
      await keeper.remove(record.id);
      throw new ClientError(
        ClientErrorCode.INVALID_STATE,
        'this upload can no longer be resumed: its sealed bytes are gone',
        {
          uuid: this.uuid,
        },
      );
    }
    try {
      // Before any request: the kept bytes must be the sealed ones (KEPT_BYTES_CHANGED, dropped below).
      await verifyKeptBytes(record, source, options.signal);
      // The service's last chunk is sent again from the kept bytes: it answers only if they are the same bytes.
      const { session, uploaded } = await resumeSession(this.storage, this.uuid, record.recoveryToken, options.signal, {
        source,
        ...(record.chunkSize === undefined ? {} : { maxChunkSize: record.chunkSize }),
      });
      await uploadCiphertext({
        storage: this.storage,
        session,
        source,
        from: uploaded,
        chunkSize: record.chunkSize ?? session.maxChunkSize ?? source.size,
        ...(record.proof === undefined ? {} : { proof: record.proof }),
        ...(options.onProgress === undefined ? {} : { onProgress: options.onProgress }),
        ...(options.signal === undefined ? {} : { signal: options.signal }),
      });
      // Sent: a keyed upload is marked so before its record goes, so no rerun sends it again.
      if (isKeyedUploadId(record.id)) await keeper.markSent?.(record.id, this.uuid);
      await keeper.remove(record.id);
      return { uuid: this.uuid };
    } catch (error) {
      if (!isResumable(error)) await keeper.remove(record.id).catch(() => undefined);
      throw error;
    }
  }

  /** Forgets the upload here (the storage service drops the unfinished file on its own). */
  discard(): Promise<void> {
    return this.keeper.remove(this.record.id);
  }
}

/**
 * A send that a reload or a closed tab cut off while it was being sealed, as `pg.lostUploads()`
 * reports it. Nothing of it can be resumed (sealing draws fresh randomness, so its bytes cannot be
 * made again, and they were kept only once sealing ended); nothing of it is kept any more, and no
 * recipient was mailed. The person picks the files again to send them.
 */
export interface LostUpload {
  /** What was sent: the file names, unless the app gave a label. */
  label: string | undefined;
  /** The recipients' addresses. */
  recipients: readonly string[];
  /** The message the recipients' mails were to carry, if any. */
  message: string | undefined;
  /** When the send began. */
  createdAt: Date;
  /** The ciphertext's size in bytes. */
  size: number;
}

/**
 * The sends of `keeper` whose sealing ended with the page that ran it: each is removed (record and
 * any bytes) as it is reported, so it is reported once. A send still being sealed in another tab
 * is not one; where that cannot be told (no Web Locks, as in Node), none is reported, and the
 * keeper's grace period removes them.
 */
export async function lostUploads(keeper: UploadKeeper): Promise<LostUpload[]> {
  const lost: LostUpload[] = [];
  for (const record of await keeper.list({ sealing: true })) {
    if (record.sealing !== true || !(await sealerGone(record.id))) continue;
    await keeper.remove(record.id);
    lost.push({
      label: record.label,
      recipients: record.recipients,
      message: record.notify?.message === '' ? undefined : record.notify?.message,
      createdAt: new Date(record.createdAt),
      size: record.size,
    });
  }
  return lost;
}
