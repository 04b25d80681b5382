import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { sourceAliases } from './scripts/source-aliases.js';

// The platform seam: in Node the SHAKE backend is node:crypto (browser bundles map '#shake' to the
// portable backend, see lib/package.json "imports"). Workspace packages import the library's sources.
export default defineConfig({
  resolve: { alias: sourceAliases('node') },
  test: {
    // Processes the tests start under tsx (pg-pkg, pg-cli, ...) run from temp folders: point tsx at
    // this tsconfig.json so they too see the library's sources, never a stale lib/dist.
    // XDG_CONFIG_HOME: the SDK's folder keeper makes its token key file there by default (sdk/token-key.ts),
    // so the tests keep theirs in the checkout's tmp/ rather than the user's ~/.config.
    env: {
      TSX_TSCONFIG_PATH: fileURLToPath(new URL('./tsconfig.json', import.meta.url)),
      XDG_CONFIG_HOME: fileURLToPath(new URL('./tmp/test-config', import.meta.url)),
    },
    include: [
      '{lib,server,devtools,cli,sdk,worker,client,test,scripts}/**/*.test.ts',
      'demo/*.test.ts',
      'demo/src/**/*.test.ts',
    ],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Vitest's default is one worker fewer than the cores: one on CI's two. Most files wait on
    // sockets, child processes and browsers, so two side by side keep both cores busy (the suite
    // took 577 s alone, measured from a clean clone).
    maxWorkers: 2,
  },
});
