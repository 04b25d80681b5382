// `npm run pack`: the published packages as tarballs in packs/ (after `npm run build`), the way to
// install them before they are on the npm registry. Each pins the others' exact versions, so they
// are installed together, with one `npm install` of the folder's tarballs (README.md, "Without the
// repository"); e2e/consumer/dev-stack.spec.ts runs that route from an empty folder.
import { rmSync } from 'node:fs';
import { join, relative } from 'node:path';
import { ROOT, packAll } from './packages.js';

const out = join(ROOT, 'packs');
// Only this run's tarballs: an older version left beside them would be installed too.
rmSync(out, { recursive: true, force: true });
const packs = packAll(out);
for (const pack of packs) console.log(`${pack.name.padEnd(20)} ${relative(process.cwd(), pack.tarball)}`);
console.log(`\nInstall them together, from an empty folder:\n  npm init -y && npm install ${out}/*.tgz`);
console.log('then: npx pg-dev   (and npx pg-cli, npx pg-pkg; import postguard-ts, @postguard-ts/sdk)');
