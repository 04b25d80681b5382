import { readFileSync } from 'node:fs';

/** The pg-wasm 0.5.10 known-answer files copied from ../shared/vectors. */
const load = (name: string) => JSON.parse(readFileSync(new URL(`./vectors/${name}`, import.meta.url), 'utf8'));

export const vectors = load('pg-wasm-0.5.10.json');
export const stream2seg = load('pg-wasm-0.5.10-stream-2seg.json');

/** name -> base64 value from the pg-core regression files (one "name base64" pair per line). */
export function rustVectors(file: 'pg-core-kem-regression.txt' | 'pg-core-signing-regression.txt') {
  const text = readFileSync(new URL(`./vectors/rust-tests/${file}`, import.meta.url), 'utf8');
  return Object.fromEntries(
    text
      .trim()
      .split('\n')
      .map((line) => line.trim().split(/\s+/) as [string, string]),
  ) as Record<string, string>;
}

export const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
export const unhex = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, 'hex'));
export const unb64 = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, 'base64'));
