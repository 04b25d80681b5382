import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The demo is an app of the library: it imports postguard-ts by its published names
 * (`postguard-ts`, `postguard-ts/worker`, `postguard-ts/sw`, …; in the repository they resolve to
 * the sources, demo/vite.ts), never by a relative path into lib/ or worker/. So what the demo does,
 * an app can do with the published package alone, and a module the package does not export shows
 * up here instead of being reached around.
 *
 * Outside the rule: lib/build/, the repository's build of the library (not the library), which
 * demo/vite.ts uses to bundle the demo's service worker as the package bundles its own.
 */

const ROOT = resolve(import.meta.dirname, '..');
const DEMO = join(ROOT, 'demo');

/**
 * Modules the demo needs that the package does not export yet, each with the demo files that
 * import it. An entry goes when the package exports the module (the last test fails until it does).
 */
const NOT_YET_EXPORTED: Readonly<Record<string, readonly string[]>> = {};

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    // This file quotes such imports as the rule's own fixture.
    if (entry === 'node_modules' || entry === 'dist' || path === import.meta.filename) return [];
    if (statSync(path).isDirectory()) return files(path);
    return /\.(?:ts|html)$/.test(entry) ? [path] : [];
  });
}

/** Every module specifier in a file: static and dynamic imports, re-exports, `new URL(…, import.meta.url)`, `<script src>`. */
const specifiers = (source: string): string[] =>
  [
    ...source.matchAll(/(?:\bfrom|\bimport)\s*(?:\(\s*)?(['"])([^'"\n]+)\1/g),
    ...source.matchAll(/\bnew\s+URL\(\s*(['"])([^'"\n]+)\1\s*,\s*import\.meta\.url/g),
    ...source.matchAll(/<script\s[^>]*?\bsrc=(['"])([^'"\n]+)\1/g),
  ].map((m) => m[2]!);

/** `demo/…: spec → target` for each relative specifier that lands in lib/ or worker/. */
function relativeIntoLibrary(): Array<{ file: string; target: string; line: string }> {
  return files(DEMO).flatMap((path) => {
    const file = relative(ROOT, path);
    return specifiers(readFileSync(path, 'utf8'))
      .filter((spec) => spec.startsWith('.'))
      .map((spec) => ({ spec, target: relative(ROOT, resolve(path, '..', spec)) }))
      .filter(({ target }) => /^(?:lib|worker)\//.test(target) && !target.startsWith('lib/build/'))
      .map(({ spec, target }) => ({ file, target: target.replace(/\.js$/, '.ts'), line: `${file}: ${spec}` }));
  });
}

describe('the demo imports the library as an app does', () => {
  it('has no relative import into lib/ or worker/ (use the published entry: lib/package.json "exports")', () => {
    const found = relativeIntoLibrary()
      .filter(({ file, target }) => !NOT_YET_EXPORTED[target]?.includes(file))
      .map(({ line }) => line);
    expect(found).toEqual([]);
  });

  it('the rule sees a relative import into lib/ or worker/, in every form', () => {
    const source = [
      "import { seal } from '../../lib/seal.js';",
      'export { x } from "../../worker/client.js";',
      "const m = await import('../../lib/pkg/index.js');",
      "new Worker(new URL('../../worker/crypto.worker.ts', import.meta.url));",
      '<script type="module" src="../worker/browser.ts"></script>',
    ].join('\n');
    expect(specifiers(source)).toEqual([
      '../../lib/seal.js',
      '../../worker/client.js',
      '../../lib/pkg/index.js',
      '../../worker/crypto.worker.ts',
      '../worker/browser.ts',
    ]);
  });

  it('each module still imported by path is one the package does not export yet, and still needed', () => {
    const remaining = relativeIntoLibrary().map(({ file, target }) => `${target} ← ${file}`);
    const listed = Object.entries(NOT_YET_EXPORTED).flatMap(([target, users]) =>
      users.map((file) => `${target} ← ${file}`),
    );
    expect(remaining.sort()).toEqual(listed.sort());
  });
});
