import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { PUBLISHED, ROOT, packageJson } from './packages.js';
import { SOURCE_ENTRIES } from './source-aliases.js';

/** An importable entry of a published package. */
export interface PublicEntry {
  /** The import specifier, e.g. `postguard-ts/worker`. */
  specifier: string;
  /** The package's folder in this repository, e.g. `lib`. */
  dir: string;
  /** The source file it is built from (absolute). */
  source: string;
  /** Its types in the package, e.g. `dist/worker/client.d.ts`. */
  types: string;
}

/**
 * Every entry a user can import from a published package (its package.json `exports` with types),
 * mapped to the source file it is built from: the library's through SOURCE_ENTRIES, the others'
 * `./dist/X.d.ts` to `X.ts` in their folder. Packages without `exports` (the CLI and the PKG ship
 * only bins) have none. `npm run check:docs` counts their doc comments, `npm run docs` renders them.
 */
export function publicEntries(): PublicEntry[] {
  const entries: PublicEntry[] = [];
  for (const { dir, name } of PUBLISHED) {
    const exports = packageJson(dir)['exports'] as Record<string, unknown> | undefined;
    for (const [subpath, target] of Object.entries(exports ?? {})) {
      // Plain strings are files to copy (the ready-built scripts) or package.json, not modules with types.
      if (typeof target === 'string') continue;
      const specifier = subpath === '.' ? name : `${name}/${subpath.slice(2)}`;
      const types = (target as { types?: string }).types ?? '';
      const source =
        SOURCE_ENTRIES[specifier] ??
        (types.startsWith('./dist/') ? join(dir, types.slice('./dist/'.length).replace(/\.d\.ts$/, '.ts')) : '');
      if (source === '' || !existsSync(join(ROOT, source)))
        throw new Error(`${specifier}: no source file found for its types (${types})`);
      entries.push({ specifier, dir, source: join(ROOT, source), types: types.replace(/^\.\//, '') });
    }
  }
  return entries;
}
