/// <reference lib="webworker" />

/**
 * WebCrypto AES-GCM on a thread of its own (see aes-offload.ts): Chromium runs the cipher inside
 * subtle.encrypt/decrypt on the calling thread, so this is how it can overlap the transcript hash.
 */

export interface AesJob {
  id: number;
  op: 'encrypt' | 'decrypt';
  iv: Uint8Array<ArrayBuffer>;
  key: CryptoKey;
  data: Uint8Array<ArrayBuffer>;
}

export type AesResult =
  { id: number; ok: true; out: ArrayBuffer } | { id: number; ok: false; name: string; message: string };

self.onmessage = async ({ data: job }: MessageEvent<AesJob>) => {
  try {
    const out = await crypto.subtle[job.op]({ name: 'AES-GCM', iv: job.iv }, job.key, job.data);
    self.postMessage({ id: job.id, ok: true, out } satisfies AesResult, [out]);
  } catch (error) {
    const e = error as DOMException;
    self.postMessage({ id: job.id, ok: false, name: e.name, message: e.message } satisfies AesResult);
  }
};
