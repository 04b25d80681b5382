/**
 * postguard-ts/format: the container's framing for tools that inspect a file without opening it
 * (a storage service reading the sender, a CLI checking its input before it asks for a key).
 * Every parser checks lengths against the format's bounds and throws a typed FormatError.
 *
 * @module postguard-ts/format
 */
export {
  PRELUDE,
  FORMAT_VERSION,
  PREAMBLE_BYTES,
  MAX_HEADER_BYTES,
  MAX_SIGNATURE_BYTES,
  parsePreamble,
  parseSignatureLength,
  readFrame,
  splitFrame,
} from './frame.js';
export type { Frame, FrameParts } from './frame.js';
export { decodeHeader, checkedSegmentSize, DEFAULT_SEGMENT_SIZE, MAX_SEGMENT_SIZE } from './header.js';
export type { Header, Mode, RecipientHeader } from './header.js';
export { decodeSignatureExt, SIGNATURE_BYTES } from './signatures.js';
