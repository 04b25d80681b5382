import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { cryptoWorkerBuild, pageModuleBuild, serviceWorkerBuild } from './bundles.js';
import { EMITTERS, emitterSources } from './emitters.js';

/**
 * The WebAssembly emitters stay out of what postguard-ts ships: the package carries their bytes
 * (lib/build/wasm-bytes.ts), and the runtime takes what it shares with them from the
 * `*-wasm-layout.ts` modules. Walks the sources' import graph from the package's entries (its
 * `exports` and `imports`, and the ready-built scripts' entries), with lib/crypto/wasm-bytes.ts as
 * a leaf, since the build replaces it with the embedded bytes.
 */

const LIB = fileURLToPath(new URL('..', import.meta.url));
const ROOT = resolve(LIB, '..');
const WASM_BYTES = join(LIB, 'crypto/wasm-bytes.ts');
const pkg = JSON.parse(readFileSync(join(LIB, 'package.json'), 'utf8')) as {
  exports: Record<string, string | Record<string, string>>;
  imports: Record<string, Record<string, string>>;
};
const name = (file: string) => relative(ROOT, file);

/** A built file of the package (./dist/lib/x.js, ./dist/worker/x.d.ts) → its source. */
function sourceOf(target: string): string {
  const source = join(LIB, '..', target.replace(/^\.\/dist\//, '').replace(/\.d\.ts$|\.js$/, '.ts'));
  if (!existsSync(source)) throw new Error(`no source for ${target}`);
  return source;
}

/** The package's entry points, as source files. */
function entries(): string[] {
  const scripts = [serviceWorkerBuild, cryptoWorkerBuild, pageModuleBuild].map((config) => {
    const lib = config('dist').build?.lib;
    return lib ? String(lib.entry) : '';
  });
  const roots = new Set<string>(scripts);
  const targets = [...Object.values(pkg.exports), ...Object.values(pkg.imports)].flatMap((t) =>
    typeof t === 'string' ? [t] : Object.values(t),
  );
  for (const target of targets) {
    // The ready-built scripts are the bundles' entries above; package.json is no module.
    if (target.startsWith('./dist/browser/') || target === './package.json') continue;
    roots.add(sourceOf(target));
  }
  return [...roots];
}

/** Where a module's specifier leads inside the repository: relative files and the '#' seams (all conditions). */
function resolveSpecifier(from: string, specifier: string): string[] {
  if (specifier.startsWith('#')) {
    const conditions = pkg.imports[specifier];
    if (!conditions) throw new Error(`${name(from)}: unknown import ${specifier}`);
    return Object.values(conditions).map(sourceOf);
  }
  if (!specifier.startsWith('.')) return []; // a dependency or node: builtin
  const target = resolve(dirname(from), specifier).replace(/\.js$/, '.ts');
  if (!existsSync(target)) throw new Error(`${name(from)}: ${specifier} does not resolve to a source file`);
  return [target];
}

/** Every import, export … from, import(), and `new URL('./x.js', import.meta.url)` (a worker) of a file. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const specifiers = ts.preProcessFile(text, true, true).importedFiles.map((f) => f.fileName);
  const modules = specifiers.flatMap((specifier) => resolveSpecifier(file, specifier));
  // A URL is a module when it names a source (worker/client.ts's crypto worker); otherwise it is a
  // file the build writes (worker/vite.ts reads the built service worker).
  for (const match of text.matchAll(/new URL\(\s*['"](\.[^'"]+\.js)['"]\s*,\s*import\.meta\.url\s*\)/g)) {
    const source = resolve(dirname(file), match[1]!).replace(/\.js$/, '.ts');
    if (existsSync(source)) modules.push(source);
  }
  return modules;
}

/** Files reachable from `roots`, each with the file that first imported it; `leaves` are not followed. */
function walk(roots: readonly string[], leaves: ReadonlySet<string>): Map<string, string | undefined> {
  const parent = new Map<string, string | undefined>(roots.map((root) => [root, undefined]));
  const queue = [...roots];
  for (let file = queue.shift(); file !== undefined; file = queue.shift()) {
    if (leaves.has(file)) continue;
    for (const target of importsOf(file)) {
      if (parent.has(target)) continue;
      parent.set(target, file);
      queue.push(target);
    }
  }
  return parent;
}

const chain = (graph: Map<string, string | undefined>, file: string): string => {
  const path: string[] = [];
  for (let at: string | undefined = file; at !== undefined; at = graph.get(at)) path.unshift(name(at));
  return path.join(' → ');
};

/** Source files the browser program compiles into lib/dist (lib/tsconfig.build.json). */
function compiled(): string[] {
  const configPath = join(LIB, 'tsconfig.build.json');
  const { config } = ts.readConfigFile(configPath, (path) => ts.sys.readFile(path));
  return ts.parseJsonConfigFileContent(config, ts.sys, LIB, undefined, configPath).fileNames.map((f) => resolve(f));
}

describe('the WebAssembly emitters', () => {
  const emitters = new Set(emitterSources());
  const runtime = walk(entries(), new Set([WASM_BYTES]));

  it('are not in the import graph of any entry of the package or its ready-built scripts', () => {
    expect(runtime.has(WASM_BYTES)).toBe(true);
    expect(runtime.size).toBeGreaterThan(50);
    const reached = [...emitters].filter((file) => runtime.has(file)).map((file) => chain(runtime, file));
    expect(reached).toEqual([]);
  });

  it('are exactly what wasm-bytes.ts reaches beyond the runtime, so the build leaves none in dist/', () => {
    const generating = walk([WASM_BYTES], new Set());
    const beyond = [...generating.keys()].filter((file) => file !== WASM_BYTES && !runtime.has(file));
    expect(beyond.map(name).sort()).toEqual([...emitters].map(name).sort());
  });

  it('are imported by no other module tsc compiles into dist/', () => {
    const importers = compiled()
      .filter((file) => file !== WASM_BYTES && !emitters.has(file))
      .flatMap((file) =>
        importsOf(file)
          .filter((target) => emitters.has(target))
          .map((t) => `${name(file)} → ${name(t)}`),
      );
    expect(importers).toEqual([]);
  });

  it('are listed by file names that exist', () => {
    for (const file of EMITTERS) expect(existsSync(join(LIB, 'crypto', file)), file).toBe(true);
  });
});
