/**
 * Send and receive through a storage service, after pg-js 2.x: `new PostGuard({ pkgUrl, cryptifyUrl })`,
 * `pg.encrypt({ files, recipients, sign }).upload()` → `{ uuid }`, `pg.open({ uuid }).decrypt(…)`.
 * Uploads resume after a reload (`pg.resumeUploads()`), downloads after a dropped connection; a
 * bundle's files can be read one by one. The crypto runs in the crypto worker in a page.
 *
 * @module postguard-ts/client
 */
export { PostGuard } from './postguard.js';
export type { EncryptInput, PostGuardOptions, StorageLimits } from './postguard.js';
export type { PostGuardConfig, Timeouts, RetryOptions, FetchLike } from './config.js';
export { DEFAULT_CHUNK_SIZE, DEFAULT_DOMAIN_ATTRIBUTE, DEFAULT_EMAIL_ATTRIBUTE } from './config.js';
export { ClientError, ClientErrorCode, isClientError } from './errors.js';
export type { ClientErrorDetails } from './errors.js';
export { RecipientBuilder } from './recipients.js';
export type { RecipientKind } from './recipients.js';
export { Sealed } from './sealed.js';
export type { NotifyOptions, ToBytesOptions, UploadOptions, UploadResult } from './sealed.js';
export { PendingUpload } from './resume.js';
export type { LostUpload, ResumeOptions } from './resume.js';
export { Opened, chooseRecipient } from './opened.js';
export type {
  OpenInput,
  InspectResult,
  InspectOptions,
  DecryptInput,
  DecryptOutput,
  DecryptResult,
  SavedResult,
  SealedUnder,
  StreamResult,
  BytesResult,
  EntriesResult,
  BundleEntry,
} from './opened.js';
export { ApiKeySign, YiviSign, SessionSign } from './sign.js';
export type { SignMethod, YiviSignOptions, SenderAttribute, SessionCallback, SessionRequest } from './sign.js';
export type { FileContent, PgFile } from './zip.js';
export { inlineEngine } from './engine-inline.js';
export type { CryptoEngine, EngineUnsealer } from './engine.js';
export {
  memoryKeeper,
  keeperOver,
  memoryBackend,
  checkUploadId,
  DEFAULT_GRACE_MS,
  MAX_RECORD_BYTES,
} from './keeper.js';
export type { UploadKeeper, UploadRecord, KeeperBackend, KeeperOptions, KeptBytes, ListOptions } from './keeper.js';
export { browserKeeper } from './keeper-browser.js';
export { keyBox } from '../lib/pkg/secret-box.js';
export type { SecretBox, SealedSecret, SecretTier } from '../lib/pkg/secret-box.js';
export type { BrowserKeeper, BrowserKeeperBackend, BrowserKeeperOptions } from './keeper-browser.js';
export {
  listZipEntries,
  zipEntryStream,
  DEFAULT_MAX_ZIP_ENTRIES,
  DEFAULT_MAX_CENTRAL_DIRECTORY_BYTES,
} from './zip-entries.js';
export type { ZipEntry, ZipReadable, ListZipEntriesOptions, ZipEntryStreamOptions } from './zip-entries.js';
export { showSessionIn } from './qr-panel.js';
export { CLIENT_VERSION } from './version.js';
