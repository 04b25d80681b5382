// `npm run build -w postguard-ts`: the package's dist/ from the sources.
//   dist/lib, dist/worker   ES modules and .d.ts (tsc: the browser program, then the Node one;
//                           the WebAssembly bytes embedded in place of their emitters, which
//                           are removed: emitters.ts)
//   dist/vite               the Vite plugin (postguard-ts/vite)
//   dist/browser            the ready-built service worker and crypto worker scripts, and the
//                           page module postguard.js (bundles.ts)
//   dist/worker/README.md   worker/README.md, the guide the worker entries rely on (lib/README.md
//                           links it; npm run check:packages checks the tarball's copy is current)
import { execFileSync } from 'node:child_process';
import { copyFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { build } from 'vite';
import { cryptoWorkerBuild, pageModuleBuild, serviceWorkerBuild } from './bundles.js';
import { emitterOutputs } from './emitters.js';
import { embeddedWasmBytesModule } from './wasm-bytes.js';

const pkg = fileURLToPath(new URL('..', import.meta.url));
const dist = fileURLToPath(new URL('../dist/', import.meta.url));
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

rmSync(dist, { recursive: true, force: true });
for (const project of ['tsconfig.build.json', 'tsconfig.node.json']) {
  execFileSync(process.execPath, [tsc, '-p', project], { cwd: pkg, stdio: 'inherit' });
}
copyFileSync(fileURLToPath(new URL('../../worker/README.md', import.meta.url)), `${dist}worker/README.md`);
// The WebAssembly modules ship as bytes, not as the emitters that make them (wasm-bytes.ts).
writeFileSync(`${dist}lib/crypto/wasm-bytes.js`, await embeddedWasmBytesModule());
// tsc compiled the emitters only because the source wasm-bytes.ts imports them: nothing left in
// dist/ does (no-emitters.test.ts). No `force`: a file missing here means the list is stale.
for (const file of emitterOutputs(dist)) rmSync(file);
await build(serviceWorkerBuild(`${dist}browser`));
await build(cryptoWorkerBuild(`${dist}browser`));
await build(pageModuleBuild(`${dist}browser`));
