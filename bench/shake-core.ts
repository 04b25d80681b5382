import type { XofFactory } from '../lib/crypto/xof.js';

/**
 * The streaming-signature hash pattern, timed: a running SHAKE128 absorbs the payload in
 * 256 KiB segments and every segment forks it (clone) and squeezes 64 bytes, as GG signing
 * does (wire-format §6.2, §9). Platform-neutral so Node and the browser page share it.
 */

export const SEGMENT_BYTES = 256 * 1024;

export interface ShakeRun {
  readonly backend: string;
  readonly bytes: number;
  readonly ms: number;
  readonly mbPerSecond: number;
}

/** One 256 KiB segment of pseudo-random bytes (fixed, so every backend hashes the same input). */
export function segmentData(): Uint8Array {
  const out = new Uint8Array(SEGMENT_BYTES);
  let x = 0x9e3779b9;
  for (let i = 0; i < out.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

/** Hashes `totalBytes` (a multiple of the segment size) and returns MB/s (10^6 bytes). */
export function timeTranscript(backend: string, create: XofFactory, totalBytes: number, segment: Uint8Array): ShakeRun {
  const segments = Math.ceil(totalBytes / segment.length);
  const running = create();
  let sink = 0;
  const start = performance.now();
  for (let i = 0; i < segments; i++) {
    running.update(segment);
    sink ^= running.clone().digest(64)[0]!;
  }
  const ms = performance.now() - start;
  running.digest(0);
  const bytes = segments * segment.length;
  if (sink === 256) throw new Error('unreachable: keeps the digests alive');
  return { backend, bytes, ms, mbPerSecond: bytes / 1e6 / (ms / 1000) };
}

/** Best of `repeats` runs after a short warm-up (lets V8 tier the wasm and JS code up). */
export function bestOf(
  backend: string,
  create: XofFactory,
  totalBytes: number,
  repeats: number,
  segment: Uint8Array,
): ShakeRun {
  timeTranscript(backend, create, Math.min(totalBytes, 8 * SEGMENT_BYTES), segment);
  let best: ShakeRun | undefined;
  for (let r = 0; r < repeats; r++) {
    const run = timeTranscript(backend, create, totalBytes, segment);
    if (!best || run.mbPerSecond > best.mbPerSecond) best = run;
  }
  return best!;
}

export const formatRun = (run: ShakeRun) =>
  `${run.backend.padEnd(16)} ${run.mbPerSecond.toFixed(0).padStart(6)} MB/s  ` +
  `(${(run.bytes / 2 ** 20).toFixed(0)} MiB in ${run.ms.toFixed(0)} ms)`;
