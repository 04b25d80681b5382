import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// The platform seam: in Node the SHAKE backend is node:crypto. Browser bundles map
// '#shake' to the portable backend instead (see package.json "imports").
export default defineConfig({
  resolve: {
    alias: {
      '#shake': fileURLToPath(new URL('./lib/crypto/shake-node.ts', import.meta.url)),
    },
  },
  test: {
    include: ['{lib,server,cli,sdk,worker,test}/**/*.test.ts', 'demo/src/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
});
