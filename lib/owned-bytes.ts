/**
 * `bytes` when it is the whole of its own ArrayBuffer, else a copy that is: what may be
 * transferred to another thread or realm without taking anyone else's bytes along (Node's
 * Buffers, for one, can share a pooled ArrayBuffer).
 */
export function ownedBytes(bytes: Uint8Array): Uint8Array {
  return bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength && bytes.buffer instanceof ArrayBuffer
    ? bytes
    : bytes.slice();
}
