import { Reader, Writer, utf8 } from './bincode.js';
import { ErrorCode, FormatError, malformed } from './errors.js';
import { compareBytes, readPolicy, writePolicy, type Policy } from './policy.js';

/**
 * The ciphertext header: who can open it (recipient id → hidden policy + key capsule),
 * the payload IV and the payload mode. Encoded with bincode; signed as raw bytes.
 */

export const IV_BYTES = 12;
/** A recipient's multi-recipient KEM ciphertext: CGWKV ct (224) ‖ wrapped secret (32) ‖ tag (16) ‖ nonce (12). */
export const CAPSULE_BYTES = 284;
/** The segment size sealers write (256 KiB of plaintext per segment), as pg-wasm's. */
export const DEFAULT_SEGMENT_SIZE = 262_144;
/** The largest segment size this library reads (4 MiB), so one segment's buffer stays bounded. */
export const MAX_SEGMENT_SIZE = 4 * 1024 * 1024;

/** How the payload is laid out: one AEAD message of `size` bytes, or segments of `segmentSize`. */
export type Mode =
  | { readonly type: 'InMemory'; readonly size: number }
  | {
      readonly type: 'Streaming';
      readonly segmentSize: number;
      /** (lower, upper?) as a Rust size_hint; informational, shipped sealers write (0, None). */
      readonly sizeHint: readonly [bigint, bigint | undefined];
    };

/** One recipient's entry in the header. */
export interface RecipientHeader {
  /** The recipient's policy with values hidden (see hidePolicy). */
  readonly policy: Policy;
  /** 284-byte key capsule; parsed (and its curve points validated) only when this recipient unseals. */
  readonly capsule: Uint8Array;
}

/** A decoded header (`decodeHeader`): what the file is for and how its payload is laid out. */
export interface Header {
  /** Recipient id (e.g. an e-mail address) → hidden policy and key capsule. */
  readonly recipients: ReadonlyMap<string, RecipientHeader>;
  /** The payload's 12-byte AES-GCM nonce base. */
  readonly iv: Uint8Array;
  /** In-memory or streaming, with the size or segment size. */
  readonly mode: Mode;
}

const ALGO_AES128_GCM = 0;
const MODE_STREAMING = 0;
const MODE_IN_MEMORY = 1;

/** Fewest bytes a recipient entry can take: id length, ts, attribute count, capsule. */
const MIN_RECIPIENT_BYTES = 8 + 8 + 8 + CAPSULE_BYTES;

export function encodeHeader(header: Header): Uint8Array {
  // BTreeMap order: ascending by the id's UTF-8 bytes.
  const entries = [...header.recipients].map(([id, r]) => ({ id, key: utf8(id), r }));
  entries.sort((a, b) => compareBytes(a.key, b.key));
  const w = new Writer(512 + entries.length * 400);
  w.u64(entries.length);
  for (const { key, r } of entries) {
    w.u64(key.length).bytes(key);
    writePolicy(w, r.policy);
    if (r.capsule.length !== CAPSULE_BYTES) throw new RangeError('recipient capsule must be 284 bytes');
    w.bytes(r.capsule);
  }
  if (header.iv.length !== IV_BYTES) throw new RangeError('header IV must be 12 bytes');
  w.u32(ALGO_AES128_GCM).bytes(header.iv);
  if (header.mode.type === 'InMemory') {
    w.u32(MODE_IN_MEMORY).u32(header.mode.size);
  } else {
    const [lower, upper] = header.mode.sizeHint;
    w.u32(MODE_STREAMING).u32(header.mode.segmentSize).u64(lower);
    w.option(upper, (u) => w.u64(u));
  }
  return w.finish();
}

/**
 * Decodes header bytes as leniently as the reference: trailing bytes, unsorted ids and
 * duplicate ids (last one wins) are accepted; they are covered by the header signature anyway.
 */
export function decodeHeader(bytes: Uint8Array): Header {
  const r = new Reader(bytes, 'header');
  const count = r.length('recipient count', MIN_RECIPIENT_BYTES);
  const recipients = new Map<string, RecipientHeader>();
  for (let i = 0; i < count; i++) {
    const id = r.string('recipient id');
    const policy = readPolicy(r);
    const capsule = r.take(CAPSULE_BYTES);
    recipients.set(id, { policy, capsule });
  }
  r.variant('algorithm', 1);
  const iv = r.take(IV_BYTES);
  const modeType = r.variant('mode', 2);
  let mode: Mode;
  if (modeType === MODE_IN_MEMORY) {
    mode = { type: 'InMemory', size: r.u32() };
  } else {
    const segmentSize = r.u32();
    const lower = r.u64();
    const upper = r.option('size hint', () => r.u64());
    mode = { type: 'Streaming', segmentSize, sizeHint: [lower, upper] };
  }
  return { recipients, iv, mode };
}

/** The streaming segment size, with the reference's upper bound and our lower one. */
export function checkedSegmentSize(mode: Mode): number {
  if (mode.type !== 'Streaming') throw new FormatError(ErrorCode.WRONG_MODE, 'not a streaming ciphertext');
  const { segmentSize } = mode;
  if (segmentSize > MAX_SEGMENT_SIZE) {
    throw malformed(`segment size ${segmentSize} exceeds the maximum of ${MAX_SEGMENT_SIZE}`);
  }
  // A segment must at least hold the 4-byte policy length prefix; zero would never advance.
  if (segmentSize < 4) throw malformed(`segment size ${segmentSize} is too small`);
  return segmentSize;
}
