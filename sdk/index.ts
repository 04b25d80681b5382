/**
 * The sending-side SDK for Node (`@postguard-ts/sdk`), after the .NET SDK (E4A.PostGuard): the Node
 * face of `postguard-ts/client` (the same PostGuard class, not a second implementation), with a
 * folder to keep unfinished uploads in (`fileKeeper`), so a crashed job can resume them. Encrypt
 * files for e-mail recipients, sign with an API key, upload to a Cryptify-style store. Start with
 * {@link PostGuard}; the package's README has the guide.
 *
 * @module @postguard-ts/sdk
 */
export {
  PostGuard,
  DEFAULT_CHUNK_SIZE,
  DEFAULT_DOMAIN_ATTRIBUTE,
  DEFAULT_EMAIL_ATTRIBUTE,
  ClientError as SdkError,
  ClientErrorCode as SdkErrorCode,
  isClientError as isSdkError,
  RecipientBuilder,
  Sealed,
  ApiKeySign,
} from 'postguard-ts/client';
export type {
  EncryptInput,
  PostGuardConfig,
  Timeouts,
  RetryOptions,
  FetchLike,
  ClientErrorDetails as SdkErrorDetails,
  RecipientKind,
  NotifyOptions,
  ToBytesOptions,
  UploadOptions,
  UploadResult,
  SignMethod,
  FileContent,
  PgFile,
} from 'postguard-ts/client';
export { PendingUpload, memoryKeeper } from 'postguard-ts/client';
export type { UploadKeeper, UploadRecord, ResumeOptions, KeeperOptions } from 'postguard-ts/client';
export { fileKeeper } from './file-keeper.js';
export type { FileKeeperOptions } from './file-keeper.js';
export { TOKEN_KEY_ENV, defaultTokenKeyFile } from './token-key.js';
export type { TokenKey } from './token-key.js';
export { SDK_VERSION } from './version.js';
