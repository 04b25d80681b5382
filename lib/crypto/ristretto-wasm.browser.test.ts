import { fileURLToPath } from 'node:url';
import { ristretto255 } from '@noble/curves/ed25519.js';
import { numberToBytesLE } from '@noble/curves/utils.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundlePage, openBundledPage, type BundledPage } from '../../test/bundled-page.js';

/**
 * The WebAssembly ristretto255 module in Chromium, bundled by Vite the way an application would
 * bundle it: the expected values come from @noble/curves in Node, the answers from the page.
 */

const Point = ristretto255.Point;
const L = Point.Fn.ORDER;
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const scalarHex = (k: bigint) => hex(numberToBytesLE(k, 32));

/** The page's module: exposes the library's API over hex strings. */
const pageSource = (libPath: string) => `
import { loadRistrettoWasm } from ${JSON.stringify(libPath)};
const unhex = (s) => Uint8Array.from(s.match(/../g) ?? [], (h) => parseInt(h, 16));
const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
globalThis.ristretto = {
  async loaded() { return (await loadRistrettoWasm()) !== undefined; },
  async baseMulEncode(s) {
    const rw = await loadRistrettoWasm();
    try { return hex(rw.baseMulEncode(unhex(s))); } catch (e) { return 'error:' + e.code; }
  },
  async check(q, cases) {
    const rw = await loadRistrettoWasm();
    let v;
    try { v = rw.prepareVerifier(unhex(q)); } catch (e) { return 'error:' + e.code; }
    return cases.map(([b, d, ga]) => [
      v.check(unhex(b), unhex(d), unhex(ga)),
      rw.checkOnce(unhex(q), unhex(b), unhex(d), unhex(ga)),
    ]);
  },
};
`;

type PageApi = {
  loaded(): Promise<boolean>;
  baseMulEncode(s: string): Promise<string>;
  check(q: string, cases: [string, string, string][]): Promise<[boolean, boolean][] | string>;
};

let page: BundledPage<PageApi>;

beforeAll(async () => {
  const code = await bundlePage(
    'ristretto',
    pageSource(fileURLToPath(new URL('./ristretto-wasm.ts', import.meta.url))),
  );
  expect(code).not.toMatch(/from ["']node:/);
  page = await openBundledPage<PageApi>('ristretto', code);
});

afterAll(async () => {
  await page?.close();
});

const call: BundledPage<PageApi>['call'] = (name, ...args) => page.call(name, ...args);

describe('in Chromium', () => {
  it('compiles the module', async () => {
    expect(await call('loaded')).toBe(true);
  });

  it('signs: enc(a·B) equals noble for edge and pseudo-random scalars, and refuses a ≥ ℓ', async () => {
    const scalars = [0n, 1n, 15n, 2n ** 252n, L - 1n];
    for (let i = 1n; i <= 20n; i++) scalars.push((0x9e3779b97f4a7c15f39cc0605cedc834n * i ** 7n) % L);
    for (const s of scalars) {
      expect(await call('baseMulEncode', scalarHex(s))).toBe(hex(Point.BASE.multiplyUnsafe(s).toBytes()));
    }
    expect(await call('baseMulEncode', scalarHex(L))).toBe('error:INVALID_INPUT');
  });

  it('verifies: true for b·B − d·Q = ga, false for one changed input', async () => {
    const y = 0x1234567890abcdef1234567890abcdefn;
    const q = Point.BASE.multiply(y);
    const cases: [string, string, string][] = [];
    const expected: [boolean, boolean][] = [];
    for (let i = 1n; i <= 10n; i++) {
      const a = (0xfeedfacecafebeefn * i ** 5n) % L;
      const d = (0xabad1deadeadbeefn * i ** 9n) % L;
      const b = (a + y * d) % L;
      const ga = hex(Point.BASE.multiply(a).toBytes());
      cases.push([scalarHex(b), scalarHex(d), ga], [scalarHex((b + 1n) % L), scalarHex(d), ga]);
      expected.push([true, true], [false, false]);
    }
    expect(await call('check', hex(q.toBytes()), cases)).toEqual(expected);
    expect(await call('check', 'ff'.repeat(31) + '7f', [])).toBe('error:INVALID_KEY');
  });
});
