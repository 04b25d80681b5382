import { fileURLToPath } from 'node:url';
import { randomBytes } from '@noble/hashes/utils.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundlePage, openBundledPage, type BundledPage } from '../../test/bundled-page.js';
import {
  cgwkvSetup,
  decaps,
  encaps,
  extractUsk,
  pairingBackend,
  parseMasterPublicKey,
  parseUserSecretKey,
} from './cgwkv.js';

/**
 * The WebAssembly pairing in Chromium, bundled by Vite the way an application would bundle it:
 * user secret keys parsed and ciphertexts decapsulated in the page, against @noble/curves in
 * Node.
 */

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

const pageSource = (libPath: string) => `
import { loadPairingAcceleration, pairingBackend, parseUserSecretKey, decaps } from ${JSON.stringify(libPath)};
const unhex = (s) => Uint8Array.from(s.match(/../g) ?? [], (h) => parseInt(h, 16));
const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
globalThis.bls = {
  async backend() { await loadPairingAcceleration(); return pairingBackend(); },
  async decaps(usk, ct) {
    await loadPairingAcceleration();
    let key;
    try { key = parseUserSecretKey(unhex(usk)); } catch (e) { return 'error:' + e.code; }
    try { return hex(decaps(key, unhex(ct))); } catch (e) { return 'error:' + e.code; }
  },
};
`;

type PageApi = {
  backend(): Promise<string>;
  decaps(usk: string, ct: string): Promise<string>;
};

let page: BundledPage<PageApi>;

beforeAll(async () => {
  const code = await bundlePage('bls', pageSource(fileURLToPath(new URL('./cgwkv.ts', import.meta.url))));
  expect(code).not.toMatch(/from ["']node:/);
  page = await openBundledPage<PageApi>('bls', code);
});

afterAll(async () => {
  await page?.close();
});

const call: BundledPage<PageApi>['call'] = (name, ...args) => page.call(name, ...args);

describe('in Chromium', () => {
  it('loads the WebAssembly pairing', async () => {
    expect(await call('backend')).toBe('wasm');
  });

  it('decapsulates like @noble/curves in Node, and refuses a bad key the same way', async () => {
    expect(pairingBackend()).toBe('@noble/curves');
    const { mpk, msk } = cgwkvSetup();
    for (let i = 0; i < 3; i++) {
      const id = randomBytes(64);
      const usk = extractUsk(msk, id);
      const { ct, ss } = encaps(parseMasterPublicKey(mpk), id);
      expect(hex(decaps(parseUserSecretKey(usk), ct))).toBe(hex(ss));
      expect(await call('decaps', hex(usk), hex(ct))).toBe(hex(ss));
      const other = extractUsk(msk, randomBytes(64));
      expect(await call('decaps', hex(other), hex(ct))).toBe(hex(decaps(parseUserSecretKey(other), ct)));
    }
    const bad = extractUsk(msk, randomBytes(64));
    bad[300]! ^= 1;
    expect(await call('decaps', hex(bad), '00'.repeat(224))).toBe('error:INVALID_KEY');
  });
});
