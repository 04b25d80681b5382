/**
 * Send and receive through a storage service, after pg-js 2.x: `new PostGuard({ pkgUrl, cryptifyUrl })`,
 * `pg.encrypt({ files, recipients, sign }).upload()` → `{ uuid }`, `pg.open({ uuid }).decrypt(…)`.
 *
 * @module postguard-ts/client
 */
export { PostGuard } from './postguard.js';
export type { EncryptInput } from './postguard.js';
export type { PostGuardConfig, Timeouts, RetryOptions, FetchLike } from './config.js';
export { DEFAULT_CHUNK_SIZE, DEFAULT_DOMAIN_ATTRIBUTE, DEFAULT_EMAIL_ATTRIBUTE } from './config.js';
export { ClientError, ClientErrorCode, isClientError } from './errors.js';
export type { ClientErrorDetails } from './errors.js';
export { RecipientBuilder } from './recipients.js';
export type { RecipientKind } from './recipients.js';
export { Sealed } from './sealed.js';
export type { NotifyOptions, ToBytesOptions, UploadOptions, UploadResult } from './sealed.js';
export { ApiKeySign } from './sign.js';
export type { SignMethod } from './sign.js';
export type { FileContent, PgFile } from './zip.js';
export { CLIENT_VERSION } from './version.js';
