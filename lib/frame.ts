import { ErrorCode, FormatError, notPostGuard, truncated } from './errors.js';

/**
 * The outer framing: PRELUDE ‖ VERSION ‖ BE32(H) ‖ header ‖ BE32(S) ‖ header signature ‖ payload.
 * Framing integers are big-endian. Every length is checked against its bound before any
 * buffer of that size exists.
 */

/** The four bytes every PostGuard file starts with. */
export const PRELUDE = Uint8Array.of(0x14, 0x8a, 0x8e, 0xa7);
/** The u16 the reference calls VERSION_V3. */
export const FORMAT_VERSION = 2;
/** The preamble: prelude (4), format version (2), header length (4). */
export const PREAMBLE_BYTES = 10;
/** The largest header the format allows (1 MiB): a longer length field is HEADER_TOO_LARGE. */
export const MAX_HEADER_BYTES = 1024 * 1024;
/**
 * The reference sets no bound on the header signature and allocates whatever S says. A
 * signature is 96 bytes plus the signer's policy; 1 MiB is generous and keeps 4 GiB claims
 * from allocating.
 */
export const MAX_SIGNATURE_BYTES = 1024 * 1024;

export function encodeFrame(header: Uint8Array, signature: Uint8Array): Uint8Array {
  const out = new Uint8Array(PREAMBLE_BYTES + header.length + 4 + signature.length);
  const view = new DataView(out.buffer);
  out.set(PRELUDE, 0);
  view.setUint16(4, FORMAT_VERSION);
  view.setUint32(6, header.length);
  out.set(header, PREAMBLE_BYTES);
  view.setUint32(PREAMBLE_BYTES + header.length, signature.length);
  out.set(signature, PREAMBLE_BYTES + header.length + 4);
  return out;
}

/** Checks the 10-byte preamble and returns the header length it announces. */
export function parsePreamble(preamble: Uint8Array): number {
  if (preamble.length < PREAMBLE_BYTES) {
    // A short prefix of something else is "not PostGuard"; a short prefix of the prelude is truncation.
    for (let i = 0; i < Math.min(4, preamble.length); i++) if (preamble[i] !== PRELUDE[i]) throw notPostGuard();
    throw truncated('the preamble');
  }
  for (let i = 0; i < 4; i++) if (preamble[i] !== PRELUDE[i]) throw notPostGuard();
  const view = new DataView(preamble.buffer, preamble.byteOffset, PREAMBLE_BYTES);
  const version = view.getUint16(4);
  if (version !== FORMAT_VERSION) {
    throw new FormatError(
      ErrorCode.UNSUPPORTED_VERSION,
      `unsupported format version ${version} (this library reads version ${FORMAT_VERSION})`,
    );
  }
  const headerLength = view.getUint32(6);
  if (headerLength > MAX_HEADER_BYTES) {
    throw new FormatError(
      ErrorCode.HEADER_TOO_LARGE,
      `header length ${headerLength} exceeds the maximum of ${MAX_HEADER_BYTES}`,
    );
  }
  return headerLength;
}

/** Reads the 4-byte header signature length that follows the header, refusing one past its bound. */
export function parseSignatureLength(field: Uint8Array): number {
  const length = new DataView(field.buffer, field.byteOffset, 4).getUint32(0);
  if (length > MAX_SIGNATURE_BYTES) {
    throw new FormatError(
      ErrorCode.HEADER_TOO_LARGE,
      `header signature length ${length} exceeds the maximum of ${MAX_SIGNATURE_BYTES}`,
    );
  }
  return length;
}

/** An in-memory ciphertext's parts, as `splitFrame` returns them. */
export interface Frame {
  /** The bincode header (decode it with `decodeHeader`). */
  readonly header: Uint8Array;
  /** The header signature field: signature and signer's policy (`decodeSignatureExt`). */
  readonly signature: Uint8Array;
  /** Everything after the header signature. */
  readonly payload: Uint8Array;
}

/** Splits an in-memory ciphertext into its parts (views, no copies). */
export function splitFrame(bytes: Uint8Array): Frame {
  const headerLength = parsePreamble(bytes.subarray(0, PREAMBLE_BYTES));
  const headerEnd = PREAMBLE_BYTES + headerLength;
  if (bytes.length < headerEnd) throw truncated('the header');
  if (bytes.length < headerEnd + 4) throw truncated('the header signature length');
  const signatureLength = parseSignatureLength(bytes.subarray(headerEnd, headerEnd + 4));
  const signatureEnd = headerEnd + 4 + signatureLength;
  if (bytes.length < signatureEnd) throw truncated('the header signature');
  return {
    header: bytes.subarray(PREAMBLE_BYTES, headerEnd),
    signature: bytes.subarray(headerEnd + 4, signatureEnd),
    payload: bytes.subarray(signatureEnd),
  };
}
