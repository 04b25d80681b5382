import type { UserKeys, VerifyingKeys } from '../lib/unseal.js';
import { proxy, transfer } from 'comlink';
import { loadShake128, shakeBackend, startHashThread } from '#shake';
import { StreamUnsealer, Unsealer, seal, sealStream } from '../lib/index.js';
import { ownedBytes } from '../lib/owned-bytes.js';
import type { SealOptions } from '../lib/seal.js';
import type { CryptoWorkerApi, RemoteStreamUnsealer, RemoteUnsealer } from './api.js';
import { spendChunksOnRead } from './port-stream.js';
import { installTransferHandlers } from './transfer.js';

/**
 * What the crypto worker serves: postguard-ts's seal / sealStream / Unsealer / StreamUnsealer.
 * Unsealers live in the worker; the page holds comlink proxies to them. Results that are fresh
 * buffers are transferred back, never copied; inputs are copied in (the caller keeps its buffer).
 * Realm-independent, so Node tests can serve it on a MessageChannel.
 */

/** Moves a freshly made array back to the page without a copy (copies if it is a view into a larger buffer). */
const handOver = ownedBytes;

class UnsealerHandle implements RemoteUnsealer {
  constructor(private readonly inner: Unsealer) {}

  inspect_header() {
    return this.inner.inspect_header();
  }

  public_identity() {
    return this.inner.public_identity();
  }

  async unseal(recipientId: string, usk: UserKeys) {
    const [plain, verified] = await this.inner.unseal(recipientId, usk);
    const out = handOver(plain);
    return transfer([out, verified] as [Uint8Array, typeof verified], [out.buffer as ArrayBuffer]);
  }
}

class StreamUnsealerHandle implements RemoteStreamUnsealer {
  constructor(private readonly inner: StreamUnsealer) {}

  inspect_header() {
    return this.inner.inspect_header();
  }

  public_identity() {
    return this.inner.public_identity();
  }

  unseal(recipientId: string, usk: UserKeys, writable: WritableStream<Uint8Array>) {
    return this.inner.unseal(recipientId, usk, writable);
  }
}

/** The API to expose; installs the transfer handlers (relayed streams in, coded errors out) first. */
export function cryptoWorkerApi(): CryptoWorkerApi {
  installTransferHandlers();
  return {
    async seal(mpk: string, options: SealOptions, plain: Uint8Array) {
      const out = handOver(await seal(mpk, options, plain));
      return transfer(out, [out.buffer as ArrayBuffer]);
    },
    sealStream(mpk, options, readable, writable) {
      // sealStream copies each chunk into a segment before it reads the next: the relay may reuse it.
      spendChunksOnRead(readable);
      return sealStream(mpk, options, readable, writable);
    },
    async unsealer(input, vk) {
      return proxy(new UnsealerHandle(await Unsealer.new(input, vk)));
    },
    async streamUnsealer(readable, vk) {
      return proxy(new StreamUnsealerHandle(await StreamUnsealer.new(readable, vk)));
    },
    async shakeBackend() {
      await loadShake128();
      return shakeBackend;
    },
    hashesOnOwnThread: () => startHashThread(),
    async decrypterPort() {
      // Loaded on first use: a page that never hands this worker a download does not load it.
      const { serveDecrypter } = await import('./offload-serve.js');
      const { port1, port2 } = new MessageChannel();
      serveDecrypter(port1);
      return transfer(port2, [port2]);
    },
  };
}
