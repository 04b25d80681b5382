import { expect } from '@playwright/test';

/**
 * Byte equality in one comparison, for Playwright specs (test/bytes.ts is the Vitest one):
 * toEqual walks a typed array element by element, which costs seconds a megabyte.
 */
export function expectSameBytes(actual: Uint8Array | undefined, expected: Uint8Array, what = 'the bytes'): void {
  expect(actual, `${what}: missing`).toBeInstanceOf(Uint8Array);
  const bytes = actual as Uint8Array;
  expect(bytes.length, `${what}: length`).toBe(expected.length);
  const same = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).equals(expected);
  expect(same, `${what} differ`).toBe(true);
}
