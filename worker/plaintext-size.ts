import { PREAMBLE_BYTES, parsePreamble, parseSignatureLength } from '../lib/frame.js';
import { checkedSegmentSize, decodeHeader } from '../lib/header.js';
import { SEGMENT_OVERHEAD } from '../lib/segments.js';

/**
 * The plaintext length of a streaming ciphertext of known size, for a Content-Length.
 *
 * Layout: framing (preamble, header, signature length, header signature) then segments; each
 * segment is a data region of `segmentSize` bytes plus SEGMENT_OVERHEAD (signature and tag), and
 * the final one holds what is left (0 to segmentSize − 1 bytes). The regions together hold
 * BE32(len P) ‖ P ‖ message, where P is the payload signer's policy: encrypted, so its length is
 * only known once segment 0 is open. The first plaintext write of the unsealer is segment 0's
 * message part, which gives it.
 */

export interface StreamFraming {
  /** Bytes before the first segment. */
  framingBytes: number;
  segmentSize: number;
}

/** BE32 length and the smallest bincode policy (ts u64, attribute count u64). */
const MIN_PREFIX_BYTES = 4 + 8 + 8;

/** Region bytes T for a payload of `payloadBytes` on the wire; undefined if no sealer makes that size. */
function regionBytes(payloadBytes: number, segmentSize: number): { full: number; total: number } | undefined {
  const wire = segmentSize + SEGMENT_OVERHEAD;
  if (!Number.isSafeInteger(payloadBytes) || payloadBytes < SEGMENT_OVERHEAD) return undefined;
  const full = Math.floor(payloadBytes / wire);
  const last = payloadBytes - full * wire;
  // A final segment always exists and carries the overhead; its region is shorter than a full one.
  if (last < SEGMENT_OVERHEAD) return undefined;
  return { full, total: full * segmentSize + (last - SEGMENT_OVERHEAD) };
}

/**
 * The message length, from the ciphertext size, its framing and the length of the unsealer's first
 * plaintext write (undefined when it closed without writing: an empty message). Undefined when the
 * numbers do not fit together; the caller then sends no Content-Length.
 */
export function streamingPlaintextSize(
  ciphertextBytes: number,
  framing: StreamFraming,
  firstWriteBytes: number | undefined,
): number | undefined {
  const regions = regionBytes(ciphertextBytes - framing.framingBytes, framing.segmentSize);
  if (regions === undefined) return undefined;
  if (firstWriteBytes === undefined) return regions.total >= MIN_PREFIX_BYTES ? 0 : undefined;
  if (regions.full === 0) {
    // One (final) segment: the first write is the whole message.
    return regions.total - firstWriteBytes >= MIN_PREFIX_BYTES ? firstWriteBytes : undefined;
  }
  // Segment 0 is full: its message part is what the prefix leaves of it.
  const prefix = framing.segmentSize - firstWriteBytes;
  if (prefix < MIN_PREFIX_BYTES) return undefined;
  const message = regions.total - prefix;
  return message >= firstWriteBytes ? message : undefined;
}

/** Most bytes the sniffer keeps: the largest framing up to the signature length field. */
const MAX_SNIFF_BYTES = PREAMBLE_BYTES + 1024 * 1024 + 4;

/**
 * Watches the first bytes of a ciphertext stream (passing every chunk through unchanged) until it
 * knows the framing. Parsing errors are not its business: it just learns nothing, and the unsealer
 * reports them.
 */
export class FramingSniffer {
  private head = new Uint8Array(0);
  private result: StreamFraming | null | undefined;

  /** undefined: still reading; null: not a streaming ciphertext it can measure. */
  get framing(): StreamFraming | null | undefined {
    return this.result;
  }

  push(chunk: Uint8Array): void {
    if (this.result !== undefined) return;
    const take = Math.min(chunk.length, MAX_SNIFF_BYTES - this.head.length);
    const next = new Uint8Array(this.head.length + take);
    next.set(this.head);
    next.set(chunk.subarray(0, take), this.head.length);
    this.head = next;
    this.tryParse();
  }

  private tryParse(): void {
    try {
      if (this.head.length < PREAMBLE_BYTES) return;
      const headerBytes = parsePreamble(this.head.subarray(0, PREAMBLE_BYTES));
      const signatureField = PREAMBLE_BYTES + headerBytes;
      if (this.head.length < signatureField + 4) {
        if (this.head.length >= MAX_SNIFF_BYTES) this.result = null;
        return;
      }
      const header = decodeHeader(this.head.subarray(PREAMBLE_BYTES, signatureField));
      const signatureBytes = parseSignatureLength(this.head.subarray(signatureField, signatureField + 4));
      this.result = { framingBytes: signatureField + 4 + signatureBytes, segmentSize: checkedSegmentSize(header.mode) };
    } catch {
      this.result = null;
    }
    this.head = new Uint8Array(0);
  }

  /** A pass-through stream that feeds this sniffer. */
  stream(): TransformStream<Uint8Array, Uint8Array> {
    return new TransformStream({
      transform: (chunk, controller) => {
        this.push(chunk);
        controller.enqueue(chunk);
      },
    });
  }
}
