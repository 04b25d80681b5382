import { fileURLToPath } from 'node:url';

/**
 * Inside this repository the packages see each other's sources, not their builds: tests, `npm
 * start` and the benchmarks run without a build step. The same map is in tsconfig.json's `paths`
 * (for tsc, tsx and Playwright); test/boundaries.test.ts keeps the two equal.
 */
export const SOURCE_ENTRIES: Readonly<Record<string, string>> = {
  'postguard-ts': 'lib/index.ts',
  'postguard-ts/keys': 'lib/keys.ts',
  'postguard-ts/format': 'lib/format.ts',
  'postguard-ts/pkg': 'lib/pkg/index.ts',
  'postguard-ts/client': 'client/index.ts',
  'postguard-ts/worker': 'worker/client.ts',
  'postguard-ts/browser': 'worker/browser.ts',
  'postguard-ts/sw': 'worker/sw-page.ts',
  'postguard-ts/sw/install': 'worker/sw-install.ts',
  'postguard-ts/vite': 'worker/vite.ts',
};

const root = (path: string) => fileURLToPath(new URL(`../${path}`, import.meta.url));

/** Vite/Vitest aliases for SOURCE_ENTRIES (exact matches, so 'postguard-ts' does not swallow its subpaths). */
export function sourceAliases(platform: 'node' | 'portable'): Array<{ find: RegExp; replacement: string }> {
  return [
    { find: /^#aes$/, replacement: root(`lib/crypto/aes-${platform}.ts`) },
    { find: /^#shake$/, replacement: root(`lib/crypto/shake-${platform}.ts`) },
    ...Object.entries(SOURCE_ENTRIES).map(([name, path]) => ({
      find: new RegExp(`^${name.replace(/[/.]/g, '\\$&')}$`),
      replacement: root(path),
    })),
  ];
}
