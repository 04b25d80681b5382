import { ClientError, ClientErrorCode } from './errors.js';
import type { StorageLimits, UploadSession } from './storage.js';

/**
 * What the storage service allows, checked before anything is sent: a file over its limits is
 * refused before the sender scans a QR code for it, not after the upload's last chunk.
 */

/**
 * Throws UPLOAD_TOO_LARGE when a ciphertext of `size` bytes cannot be stored under `limits`: over
 * the per-upload limit, or over the whole rolling window's allowance (it could not be finalized
 * even by a sender who sent nothing else). Without limits (an older service) it passes. These are
 * the limits of an upload without an API key: do not check an API-key upload against them.
 */
export function checkLimits(size: number, limits: StorageLimits | undefined): void {
  if (limits === undefined) return;
  const over = (limit: number, what: string) =>
    new ClientError(
      ClientErrorCode.UPLOAD_TOO_LARGE,
      `the encrypted file is ${size} bytes, over the storage service's ${what} of ${limit} bytes`,
      { uploadedBytes: 0 },
    );
  if (size > limits.perUploadLimitBytes) throw over(limits.perUploadLimitBytes, 'per-upload limit');
  if (size > limits.rollingLimitBytes)
    throw over(limits.rollingLimitBytes, `limit per sender over ${limits.windowDays} days`);
}

/**
 * The chunk size to upload with: the configured one, or the service's maximum for this session when
 * that is smaller (Cryptify refuses a chunk one byte over it).
 */
export function chunkSizeFor(configured: number, session: UploadSession): number {
  return session.maxChunkSize === undefined ? configured : Math.min(configured, session.maxChunkSize);
}
