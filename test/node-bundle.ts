import { mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSync } from 'esbuild';

/**
 * A Node entry point (a CLI's main.ts) bundled once per test process, for tests that start it as
 * a process many times. Under the tsx loader each start compiles the sources again (about a
 * second on CI's two cores, most of a CLI test file's time); the bundle starts in a fifth of
 * that. The bundle sees the library's sources through the root tsconfig.json's paths, as tsx
 * does, and is written where what the entry reads relative to its own module resolves as it
 * does from the sources: by default beside the entry (in a git-ignored `.test-build/`, for a
 * `../package.json`), or in the folder given (pg-pkg's migrations are read from beside
 * server/db/migrate.ts). Its name starts with `.test-build` (git-ignored).
 */

const ROOT_TSCONFIG = fileURLToPath(new URL('../tsconfig.json', import.meta.url));
const built = new Map<string, string>();

export function bundledEntry(entry: string, besideFilesIn?: string): string {
  const known = built.get(entry);
  if (known !== undefined) return known;
  const dir = besideFilesIn ?? join(dirname(entry), '.test-build');
  const outfile = join(dir, `.test-build.${process.pid}.mjs`);
  mkdirSync(dir, { recursive: true });
  buildSync({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    tsconfig: ROOT_TSCONFIG,
    packages: 'external',
    logLevel: 'error',
    // Dependencies stay in node_modules (packages: 'external'); the bundle holds our own sources,
    // which is what tsx compiled on every start.
  });
  process.once('exit', () => rmSync(outfile, { force: true }));
  built.set(entry, outfile);
  return outfile;
}
