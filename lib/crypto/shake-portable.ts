import { shake128 } from '@noble/hashes/sha3.js';
import type { Xof, XofFactory } from './xof.js';

/** SHAKE128 on @noble/hashes: runs everywhere, used where no faster backend is available. */
class NobleShake128 implements Xof {
  constructor(private readonly hash: ReturnType<typeof shake128.create>) {}

  update(data: Uint8Array): Xof {
    this.hash.update(data);
    return this;
  }

  clone(): Xof {
    return new NobleShake128(this.hash.clone());
  }

  digest(length: number): Uint8Array {
    return this.hash.xof(length);
  }
}

export const shakeBackend = '@noble/hashes';

export const createShake128: XofFactory = () => new NobleShake128(shake128.create({}));

export const loadShake128 = async (): Promise<XofFactory> => createShake128;
