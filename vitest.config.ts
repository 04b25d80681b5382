import { defineConfig } from 'vitest/config';
import { sourceAliases } from './scripts/source-aliases.js';

// The platform seam: in Node the SHAKE backend is node:crypto (browser bundles map '#shake' to the
// portable backend, see lib/package.json "imports"). Workspace packages import the library's sources.
export default defineConfig({
  resolve: { alias: sourceAliases('node') },
  test: {
    include: ['{lib,server,cli,sdk,worker,test,scripts}/**/*.test.ts', 'demo/src/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
});
