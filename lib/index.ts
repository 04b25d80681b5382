/**
 * postguard-ts: identity-based encryption, byte-compatible with PostGuard v3 (@e4a/pg-wasm 0.5.10).
 * The names and shapes below are pg-wasm's, so an application can swap the import; errors are
 * typed (PostGuardError with a stable `code`) and objects are reusable. Runs on any thread and in
 * Node; in a page, `postguard-ts/worker` runs the same calls off the main thread.
 *
 * @module postguard-ts
 */
export { seal, sealStream, sealedSize, expectedSealedSize, prepareSeal, MAX_IN_MEMORY_BYTES } from './seal.js';
export { plaintextSize } from './segment-map.js';
export { startHashThread } from '#shake';
export type { SealOptions, SigningKeyInput, SealShape } from './seal.js';
export { Unsealer, StreamUnsealer } from './unseal.js';
export type { PlaintextStream, StreamUnsealerOptions, UserKeys, VerifyingKeys } from './unseal.js';
export type { KeyCandidate, KeyIds } from './key-candidates.js';
export { openRandomAccess, blobSource, fileHandleSource, rangedUrlSource, DEFAULT_STALL_MS } from './random-access.js';
export type {
  ByteSource,
  FileHandleLike,
  FileHandleInput,
  RangedUrl,
  RangedUrlFetch,
  RangedUrlOptions,
  RandomAccessInput,
  RandomAccessKeys,
  RandomAccessOptions,
  RandomAccessFile,
  RangeTrust,
  SpanOptions,
} from './random-access.js';
export { inspectCiphertext, userKeyForInspection, detachHeader, attachHeader, splitHeaderStream } from './detached.js';
export { resumableDownload, RESUME_DEFAULTS } from './net/resumable-download.js';
export type { CredentialsMode, ElementLike, FileListLike, RequestHeaders } from './web-types.js';
export type { ResumableDownload, ResumableDownloadOptions, ResumeBackoff } from './net/resumable-download.js';
export type {
  CiphertextInspection,
  CiphertextSource,
  DetachedCiphertext,
  InspectOptions,
  SplitCiphertextStream,
} from './detached.js';
export { armor, dearmor, armorStream, dearmorStream, ARMOR_BEGIN, ARMOR_END, ARMOR_LINE_LENGTH } from './armor.js';
export type { VerificationResult } from './signatures.js';
export {
  senderReport,
  claimedSenderReport,
  isDemoCredential,
  SENDER_WORDING,
  SENDER_EXPLANATION,
  DEMO_SCHEME_PREFIX,
  senderText,
  attributeName,
  ATTRIBUTE_NAMES,
} from './sender.js';
export type {
  SenderReport,
  SenderLine,
  SenderStanding,
  SenderText,
  SenderTextLine,
  SenderTextAttribute,
  SenderTextOptions,
} from './sender.js';
export type { Attribute, Policy, EncryptionPolicy } from './policy.js';
export { HINT_TYPES } from './policy.js';
export { canonicalize, isCanonical } from './identity.js';
export { signChallenge, verifyChallenge } from './challenge.js';
export { prepareUserSecretKey, PreparedUserSecretKey } from './keys.js';
export { PostGuardError, FormatError, AuthenticationError, InputError, ErrorCode, isPostGuardError } from './errors.js';
export { DEFAULT_SEGMENT_SIZE, MAX_SEGMENT_SIZE } from './header.js';
export { MAX_HEADER_BYTES, MAX_SIGNATURE_BYTES } from './frame.js';
