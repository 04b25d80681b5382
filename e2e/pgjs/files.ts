/**
 * The three files both flows send, made from a seed on each side (the page and Node build the same
 * bytes, so megabytes never cross the test driver just to be compared). Chosen for what a ZIP
 * writer and a stream sealer can get wrong: a non-ASCII name, an empty file, and one spanning
 * several 256 KiB segments and several upload chunks.
 */

export interface FileSpec {
  name: string;
  size: number;
  seed: number;
}

export const FILES: readonly FileSpec[] = [
  { name: 'brief – café.txt', size: 1_234, seed: 1 },
  { name: 'empty.dat', size: 0, seed: 2 },
  { name: 'scan.bin', size: 1_100_000, seed: 3 },
];

/** Upload chunk size both senders use, so the big file crosses several chunk boundaries. */
export const UPLOAD_CHUNK = 300_000;

export const EMAIL = 'pbdf.sidn-pbdf.email.email';
export const SENDER = 'alice@example.com';
export const RECIPIENT = 'bob@example.com';

/** The bytes of `spec`: xorshift32 from its seed, so any engine and Node agree byte for byte. */
export function fileBytes(spec: FileSpec): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(spec.size);
  let x = (spec.seed * 0x9e3779b9) | 0 || 1;
  for (let i = 0; i < out.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}
