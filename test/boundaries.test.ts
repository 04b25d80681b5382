import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BROWSER_DEPENDENCIES } from '../demo/vite.js';
import { SOURCE_ENTRIES } from '../scripts/source-aliases.js';

/**
 * The package boundaries, as ARCHITECTURE.md draws them. A published package's code reaches
 * another package only by its name (so its tarball works alone), the browser library never
 * imports Node, and the in-repo source map agrees with tsconfig.json and postguard-ts's exports.
 */

const ROOT = resolve(import.meta.dirname, '..');
const IS_TEST = /\.test\.ts$|\.spec\.ts$|(?:^|\/)testing\.ts$|\.fixture\.ts$|(?:^|\/)test\//;

function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((entry) => {
    const path = join(dir, entry);
    if (entry === 'node_modules' || entry === 'dist') return [];
    if (statSync(join(ROOT, path)).isDirectory()) return sources(path);
    return path.endsWith('.ts') && !IS_TEST.test(path) ? [path] : [];
  });
}

const imports = (file: string): string[] =>
  [...readFileSync(join(ROOT, file), 'utf8').matchAll(/(?:from|import)\s*(?:\(\s*)?'([^']+)'/g)].map((m) => m[1]!);

describe('package boundaries', () => {
  for (const pkg of ['server', 'devtools', 'cli', 'sdk']) {
    it(`${pkg}/ reaches other packages only by name`, () => {
      const escapes = sources(pkg).flatMap((file) =>
        imports(file)
          .filter((spec) => spec.startsWith('.'))
          .filter((spec) => relative(join(ROOT, pkg), resolve(ROOT, file, '..', spec)).startsWith('..'))
          .map((spec) => `${file}: ${spec}`),
      );
      expect(escapes).toEqual([]);
    });
  }

  it('the PKG needs none of the dev tools: server/ neither imports @postguard-ts/dev nor depends on it', () => {
    const manifest = JSON.parse(readFileSync(join(ROOT, 'server', 'package.json'), 'utf8')) as Record<string, object>;
    const declared = ['dependencies', 'peerDependencies', 'optionalDependencies'].flatMap((k) =>
      Object.keys(manifest[k] ?? {}),
    );
    expect(declared).not.toContain('@postguard-ts/dev');
    const found = sources('server').flatMap((file) =>
      imports(file)
        .filter((spec) => spec.startsWith('@postguard-ts/dev'))
        .map((spec) => `${file}: ${spec}`),
    );
    expect(found).toEqual([]);
  });

  it('lib/, worker/ and client/ import neither Node nor the other packages (but for the Node-side modules)', () => {
    const nodeSide = new Set([
      'lib/crypto/aes-node.ts',
      'lib/crypto/segment-hasher-node.ts',
      'lib/crypto/shake-node.ts',
      'worker/vite.ts',
    ]);
    const found = [...sources('lib'), ...sources('worker'), ...sources('client')]
      .filter((file) => !nodeSide.has(file) && !file.startsWith('lib/build/'))
      .flatMap((file) =>
        imports(file)
          .filter(
            (spec) =>
              spec.startsWith('node:') || /^(?:\.\.\/)+(?:server|devtools|cli|sdk|demo|e2e|bench|scripts)\//.test(spec),
          )
          .map((spec) => `${file}: ${spec}`),
      );
    expect(found).toEqual([]);
  });

  it("the demo's Vite pre-bundles exactly the browser code's bare imports (a late find reloads the page)", () => {
    const nodeSide = new Set([
      'lib/crypto/aes-node.ts',
      'lib/crypto/segment-hasher-node.ts',
      'lib/crypto/shake-node.ts',
      'worker/vite.ts',
    ]);
    const bare = new Set(
      [...sources('lib'), ...sources('worker'), ...sources('client'), ...sources('demo/src')]
        .filter((file) => !nodeSide.has(file) && !file.startsWith('lib/build/'))
        .flatMap(imports)
        .filter((spec) => !spec.startsWith('.') && !spec.startsWith('#') && !spec.startsWith('node:'))
        // The library's own entries (the demo imports them by name) resolve to its sources, not to a dependency.
        .filter((spec) => !(spec in SOURCE_ENTRIES)),
    );
    expect([...bare].sort()).toEqual([...BROWSER_DEPENDENCIES].sort());
  });

  it("tsconfig.json's paths, the source aliases and postguard-ts's exports name the same entries", () => {
    const tsconfig = readFileSync(join(ROOT, 'tsconfig.json'), 'utf8');
    const withoutComments = tsconfig.replace(/^[ \t]*\/\/.*$/gm, '');
    const paths = JSON.parse(withoutComments).compilerOptions.paths as Record<string, string[]>;
    const fromTsconfig = Object.fromEntries(
      Object.entries(paths)
        .filter(([name]) => name.startsWith('postguard-ts'))
        .map(([name, [target]]) => [name, target!.replace(/^\.\//, '')]),
    );
    expect(fromTsconfig).toEqual(SOURCE_ENTRIES);
    const exported = Object.keys(JSON.parse(readFileSync(join(ROOT, 'lib', 'package.json'), 'utf8')).exports as object)
      .filter((key) => !key.endsWith('/script') && key !== './package.json')
      .map((key) => (key === '.' ? 'postguard-ts' : `postguard-ts/${key.slice(2)}`));
    expect(exported.sort()).toEqual(Object.keys(SOURCE_ENTRIES).sort());
  });

  it("postguard-ts's production dependencies are browser libraries only", () => {
    const manifest = JSON.parse(readFileSync(join(ROOT, 'lib', 'package.json'), 'utf8')) as { dependencies: object };
    expect(Object.keys(manifest.dependencies).sort()).toEqual([
      '@noble/curves',
      '@noble/hashes',
      'client-zip',
      'comlink',
      'idb-keyval',
      'qrcode',
    ]);
  });
});

describe('one vocabulary', () => {
  it("the stand-in's Yivi session statuses are the library's (the stand-in keeps its own copy to stay import-free)", async () => {
    const { SESSION_STATUSES: library } = await import('../lib/pkg/jwt.js');
    const { SESSION_STATUSES: standin } = await import('../devtools/standin/protocol.js');
    expect([...standin].sort()).toEqual([...library].sort());
  });
});
