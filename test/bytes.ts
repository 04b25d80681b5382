import { expect } from 'vitest';

/**
 * Byte equality in one comparison. toEqual walks a typed array element by element, which costs
 * seconds a megabyte: the interop suite spent two minutes there.
 */
export function expectSameBytes(actual: unknown, expected: Uint8Array, what = 'the bytes'): void {
  expect(actual, what).toBeInstanceOf(Uint8Array);
  const bytes = actual as Uint8Array;
  expect(bytes.length, `${what}: length`).toBe(expected.length);
  const same = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).equals(expected);
  expect(same, `${what} differ`).toBe(true);
}
