import { defineConfig } from 'vite';
import { demoConfig } from './demo/vite.js';

/**
 * The demo (demo/README.md): `npx vite --mode demo` serves it on Vite's dev server alone (`npm
 * start` adds the PKG and the stand-in), `npm run build:demo` builds it into dist/demo-app/.
 *
 * The library's own builds are not here: `npm run build -w postguard-ts` (lib/build/main.ts, with
 * the bundle configurations in lib/build/bundles.ts), and apps use the `postguard-ts/vite` plugin.
 */
export default defineConfig(() => demoConfig());
