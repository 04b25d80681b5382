import { defineConfig } from 'vitest/config';

/**
 * The demo's unit tests (its pure modules: the form's policy, names and types, error texts). They
 * run in Node; the pages themselves are tested in Chromium by e2e/. `npm test` runs this config
 * after the root one: `vitest run -c demo/vitest.config.ts`.
 */
export default defineConfig({
  test: {
    root: new URL('.', import.meta.url).pathname,
    include: ['src/**/*.test.ts'],
  },
});
