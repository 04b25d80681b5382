import { PREAMBLE_BYTES, parsePreamble, parseSignatureLength } from '../lib/frame.js';
import { checkedSegmentSize, decodeHeader } from '../lib/header.js';

/**
 * The framing of a streaming ciphertext, learnt from its first bytes as they pass (FramingSniffer),
 * for lib/segment-map.ts's streamingPlaintextSize: the service worker's Content-Length.
 */

/** What a streaming ciphertext's first bytes say about its layout: enough to work out its plaintext size. */
export interface StreamFraming {
  /** Bytes before the first segment. */
  framingBytes: number;
  /** Plaintext bytes per segment, from the header. */
  segmentSize: number;
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

  /** Shows the sniffer the next chunk of the stream (it keeps a copy of the bytes it still needs). */
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
