/**
 * The sending-side SDK for Node (`@postguard-ts/sdk`), after the .NET SDK (E4A.PostGuard).
 * Encrypt files for e-mail recipients, sign with an API key, upload to a Cryptify-style store.
 * Start with {@link PostGuard}; the package's README has the guide.
 *
 * @module @postguard-ts/sdk
 */
export { PostGuard } from './client.js';
export type { EncryptInput } from './client.js';
export type { PostGuardConfig, Timeouts, RetryOptions, FetchLike } from './config.js';
export { DEFAULT_CHUNK_SIZE, DEFAULT_DOMAIN_ATTRIBUTE, DEFAULT_EMAIL_ATTRIBUTE } from './config.js';
export { SdkError, SdkErrorCode, isSdkError } from './errors.js';
export type { SdkErrorDetails } from './errors.js';
export { RecipientBuilder } from './recipients.js';
export type { RecipientKind } from './recipients.js';
export { Sealed } from './sealed.js';
export type { NotifyOptions, ToBytesOptions, UploadOptions, UploadResult } from './sealed.js';
export { ApiKeySign } from './sign.js';
export type { SignMethod } from './sign.js';
export type { FileContent, PgFile } from './zip.js';
export { SDK_VERSION } from './version.js';
