import { createHash, type Hash } from 'node:crypto';
import type { Xof, XofFactory } from './xof.js';

/** SHAKE128 on node:crypto (OpenSSL): an order of magnitude faster than pure JS. */
class NodeShake128 implements Xof {
  constructor(private readonly hash: Hash) {}

  update(data: Uint8Array): Xof {
    this.hash.update(data);
    return this;
  }

  clone(): Xof {
    return new NodeShake128(this.hash.copy());
  }

  digest(length: number): Uint8Array {
    // outputLength can only be set when creating or copying the hash.
    const out = length === 16 ? this.hash.digest() : this.hash.copy({ outputLength: length }).digest();
    return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
  }
}

export const shakeBackend = 'node:crypto';

export const createShake128: XofFactory = () => new NodeShake128(createHash('shake128'));

export const loadShake128 = async (): Promise<XofFactory> => createShake128;

export { segmentHasher, startHashThread } from './segment-hasher-node.js';
