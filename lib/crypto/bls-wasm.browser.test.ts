import { fileURLToPath } from 'node:url';
import { randomBytes } from '@noble/hashes/utils.js';
import { chromium, type Browser, type Page } from '@playwright/test';
import { build, type Plugin } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumLaunchOptions } from '../../test/chromium.js';
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

const PAGE_ENTRY = 'virtual:bls-page';
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

async function bundle(): Promise<string> {
  const libPath = fileURLToPath(new URL('./cgwkv.ts', import.meta.url));
  const virtualPage: Plugin = {
    name: 'bls-page',
    // lib mode may hand the entry over resolved against the root
    resolveId: (id) => (id.endsWith(PAGE_ENTRY) ? `\0${PAGE_ENTRY}` : undefined),
    load: (id) => (id === `\0${PAGE_ENTRY}` ? pageSource(libPath) : undefined),
  };
  const result = await build({
    configFile: false,
    root: fileURLToPath(new URL('../..', import.meta.url)),
    logLevel: 'warn',
    plugins: [virtualPage],
    build: {
      write: false,
      minify: false,
      target: 'es2022',
      lib: { entry: PAGE_ENTRY, formats: ['es'], fileName: 'page' },
    },
  });
  for (const out of Array.isArray(result) ? result : [result]) {
    if (!('output' in out)) continue;
    const chunk = out.output.find((o) => o.type === 'chunk' && o.isEntry);
    if (chunk && chunk.type === 'chunk') return chunk.code;
  }
  throw new Error('vite produced no entry chunk');
}

let browser: Browser;
let page: Page;

beforeAll(async () => {
  const code = await bundle();
  expect(code).not.toMatch(/from ["']node:/);
  browser = await chromium.launch(chromiumLaunchOptions);
  page = await browser.newPage();
  await page.setContent('<!doctype html><title>bls12-381</title>');
  await page.addScriptTag({ content: code, type: 'module' });
  await page.waitForFunction(() => 'bls' in globalThis);
});

afterAll(async () => {
  await browser?.close();
});

type PageApi = {
  backend(): Promise<string>;
  decaps(usk: string, ct: string): Promise<string>;
};
const call = <K extends keyof PageApi>(name: K, ...args: Parameters<PageApi[K]>) =>
  page.evaluate(
    ([n, a]) => {
      const api = (globalThis as unknown as { bls: Record<string, (...x: unknown[]) => unknown> }).bls;
      return api[n as string]!(...(a as unknown[]));
    },
    [name, args] as const,
  ) as ReturnType<PageApi[K]>;

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
