/**
 * An extendable-output hash (SHAKE128) that can absorb incrementally and fork.
 * The GG signatures hash a running transcript and sign forks of it, so `clone` is part of
 * the contract. The platform module '#shake' (see package.json "imports") exports
 * `loadShake128(): Promise<XofFactory>` and `shakeBackend`, picking the fastest backend the
 * platform has: node:crypto in Node, WebAssembly in browsers, @noble/hashes as the fallback.
 */
export interface Xof {
  /** Absorbs `data`; returns the same object. */
  update(data: Uint8Array): Xof;
  /** An independent copy of the current absorbing state. */
  clone(): Xof;
  /** Squeezes `length` bytes. The object must not be used afterwards. */
  digest(length: number): Uint8Array;
}

export type XofFactory = () => Xof;
