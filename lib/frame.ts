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

/** A ciphertext's framing: its header and header signature, and where its payload starts. */
export interface FrameParts {
  /** The bincode header (decode it with `decodeHeader`). */
  readonly header: Uint8Array;
  /** The header signature field: signature and signer's policy (`decodeSignatureExt`). */
  readonly signature: Uint8Array;
  /** Bytes before the payload: preamble, header, signature length and header signature. */
  readonly framingBytes: number;
}

/** An in-memory ciphertext's parts, as `splitFrame` returns them. */
export interface Frame extends FrameParts {
  /** Everything after the header signature. */
  readonly payload: Uint8Array;
}

/** One read the frame walk asks for: `length` bytes at `offset`, named `what` in a TRUNCATED error. */
interface FrameRead {
  readonly offset: number;
  readonly length: number;
  readonly what: string;
}

/**
 * The frame walk, written once for every reader of the framing (in memory, a stream, a Blob, a
 * ranged URL, a file on disk): preamble, header, signature length, signature, each length checked
 * against its bound before the read that trusts it. It asks for reads and is handed back what the
 * source had (fewer bytes only at the end of the source); the drivers below feed it.
 */
function* frameWalk(): Generator<FrameRead, FrameParts, Uint8Array> {
  const preamble = yield { offset: 0, length: PREAMBLE_BYTES, what: 'the preamble' };
  // parsePreamble tells a short file that starts like PostGuard (TRUNCATED) from anything else.
  const headerLength = parsePreamble(preamble);
  const headerEnd = PREAMBLE_BYTES + headerLength;
  const header = yield { offset: PREAMBLE_BYTES, length: headerLength, what: 'the header' };
  const signatureLength = parseSignatureLength(
    yield { offset: headerEnd, length: 4, what: 'the header signature length' },
  );
  const signature = yield { offset: headerEnd + 4, length: signatureLength, what: 'the header signature' };
  return { header, signature, framingBytes: headerEnd + 4 + signatureLength };
}

/** Checks a read's result: short only where the preamble check explains it. */
function delivered(read: FrameRead, bytes: Uint8Array): Uint8Array {
  if (bytes.length === read.length || read.offset === 0) return bytes;
  throw truncated(read.what);
}

/**
 * Reads a ciphertext's framing through `read(offset, length)`, which answers up to `length` bytes
 * (fewer only at the end of the source). Reads come in order, each right after the one before, so
 * a sequential source may ignore `offset`. Throws the framing's typed errors (NOT_POSTGUARD,
 * UNSUPPORTED_VERSION, HEADER_TOO_LARGE, TRUNCATED); the header itself is not decoded.
 */
export async function readFrame(read: (offset: number, length: number) => Promise<Uint8Array>): Promise<FrameParts> {
  const walk = frameWalk();
  let step = walk.next();
  while (!step.done) {
    const request = step.value;
    step = walk.next(delivered(request, await read(request.offset, request.length)));
  }
  return step.value;
}

/** Splits an in-memory ciphertext into its parts (views, no copies). */
export function splitFrame(bytes: Uint8Array): Frame {
  const walk = frameWalk();
  let step = walk.next();
  while (!step.done) {
    const { offset, length } = step.value;
    step = walk.next(delivered(step.value, bytes.subarray(offset, offset + length)));
  }
  return { ...step.value, payload: bytes.subarray(step.value.framingBytes) };
}
