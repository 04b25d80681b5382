import type { AesJob, AesResult } from './aes.worker.js';

/**
 * A prototype, for the benchmark only: routes this realm's AES-GCM subtle.encrypt/decrypt calls to a
 * helper worker (aes.worker.ts), so the cipher runs beside the SHAKE128 transcript instead of
 * between its steps. lib/ is untouched: it calls crypto.subtle as always. The input is copied into
 * a fresh buffer and transferred (lib may reuse its buffer once the call returns, as WebCrypto
 * allows); the output buffer is transferred back. Failures come back as DOMExceptions of the same
 * name, so a bad tag is still an OperationError.
 */
export function offloadAesGcm(helper: Worker): void {
  const subtle = globalThis.crypto.subtle;
  const waiting = new Map<number, { resolve: (out: ArrayBuffer) => void; reject: (e: unknown) => void }>();
  let nextId = 0;
  helper.onmessage = ({ data }: MessageEvent<AesResult>) => {
    const w = waiting.get(data.id);
    waiting.delete(data.id);
    if (data.ok) w?.resolve(data.out);
    else w?.reject(new DOMException(data.message, data.name));
  };
  const route = (op: AesJob['op'], original: SubtleCrypto['encrypt']) =>
    function (this: SubtleCrypto, algorithm: AlgorithmIdentifier | AesGcmParams, key: CryptoKey, data: BufferSource) {
      if (typeof algorithm !== 'object' || algorithm.name !== 'AES-GCM' || !ArrayBuffer.isView(data)) {
        return original.call(this, algorithm, key, data);
      }
      const params = algorithm as AesGcmParams;
      const view = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
      const iv = params.iv as Uint8Array<ArrayBuffer>;
      const job: AesJob = { id: nextId++, op, iv: iv.slice(), key, data: view.slice() };
      return new Promise<ArrayBuffer>((resolve, reject) => {
        waiting.set(job.id, { resolve, reject });
        helper.postMessage(job, [job.data.buffer]);
      });
    };
  subtle.encrypt = route('encrypt', subtle.encrypt) as SubtleCrypto['encrypt'];
  subtle.decrypt = route('decrypt', subtle.decrypt) as SubtleCrypto['decrypt'];
}
