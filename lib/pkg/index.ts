/**
 * The PKG client for web applications: public keys with ETag revalidation and an IndexedDB cache,
 * identity sessions (QR, same-device link, status events with a polling fallback), key requests,
 * and an opt-in cache of session JWTs and user secret keys. No DOM needed except drawQr's canvas.
 * `postguard-ts/worker` exports all of it too.
 *
 * @module postguard-ts/pkg
 */
export { PkgClient } from './client.js';
export type {
  PkgClientOptions,
  StartRequest,
  SigningKeys,
  IssuedSigningKey,
  SigningIdentityRequest,
  DecryptionKeyOptions,
  DecryptionKey,
  SigningSessionOptions,
} from './client.js';
export { IdentitySession, statusFromEventData } from './session.js';
export type { SessionOptions, EventSourceConstructor, EventSourceLike } from './session.js';
export type { SessionStatus, ProofStatus } from './jwt.js';
export { SESSION_STATUSES, PROOF_STATUSES, isFinalStatus, readSessionClaims } from './jwt.js';
export { PkgClientError, PkgClientErrorCode, isPkgClientError } from './errors.js';
export type { PkgClientErrorDetails } from './errors.js';
export { memoryStore, indexedDbStore, defaultStore } from './store.js';
export { createPasskey } from './passkey.js';
export type { PasskeyRegistration, PasskeyOptions, CreatePasskeyOptions } from './passkey.js';
export type { SecretTier } from './secret-box.js';
export { readLimitedText } from './http.js';
export type { KeyValueStore } from './store.js';
export {
  qrLink,
  universalLink,
  androidIntentLink,
  sameDeviceLink,
  deviceKind,
  isSessionPointer,
  UNIVERSAL_LINK_PREFIX,
} from './links.js';
export type { SessionPointer, DeviceKind } from './links.js';
export { qrSvg, qrSvgDataUrl, drawQr, qrMatrix } from './qr.js';
export type { QrOptions, QrMatrix, CanvasLike } from './qr.js';
export { keyRequestCon, keyTimestamp, validityUntil4am, EMAIL_TYPES, DOMAIN_TYPES } from './keyrequest.js';
export type { DisclosureAttribute, ConItem, KeyRequestOptions } from './keyrequest.js';
