// `npm run check:packages`: what each published tarball holds, then publint and Are the Types
// Wrong? on the tarballs themselves (not the folders), after `npm run build`.
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, posix, relative } from 'node:path';
import { emitterOutputs } from '../lib/build/emitters.js';
import { ROOT, packAll, packageJson } from './packages.js';
import { publicEntries } from './public-entries.js';
import { linkProblems } from './readme-links.js';

// Files a package reads at run time rather than imports: only the build copies them, so only this
// check notices one that does not ship (e.g. pg-pkg's SQL migrations).
const DATA_FILES: Readonly<Record<string, ReadonlyArray<{ source: string; shipped: string }>>> = {
  server: [{ source: 'db/migrations', shipped: 'dist/db/migrations' }],
};
/**
 * READMEs the entries rely on, beyond the package's own: the README beside an entry's source in
 * another folder (worker/README.md: PkgClient's options and errors, the service worker) ships
 * beside the entry's built types (dist/worker/README.md; lib/build/main.ts copies it).
 */
function entryReadmes(dir: string): Array<{ source: string; shipped: string }> {
  const readmes = new Map<string, string>();
  for (const entry of publicEntries().filter((e) => e.dir === dir)) {
    const source = join(dirname(entry.source), 'README.md');
    if (dirname(entry.source) !== join(ROOT, dir) && existsSync(source))
      readmes.set(posix.join(posix.dirname(entry.types), 'README.md'), source);
  }
  return [...readmes].map(([shipped, source]) => ({ source, shipped }));
}
const FORBIDDEN = [/\.test\./, /\.spec\./, /(^|\/)testing\./, /\.fixture\./, /\.map$/, /tsbuildinfo/, /(^|\/)test\//];
// Code of another package: the PKG's tarball carries the PKG alone (the dev tools are @postguard-ts/dev's).
const NOT_SHIPPED: Readonly<Record<string, readonly RegExp[]>> = {
  server: [/(^|\/)standin\//, /(^|\/)storage\//, /(^|\/)dev-server-cli\./],
};
// The library ships the WebAssembly modules' bytes, not the emitters that make them (lib/build/main.ts removes them).
const EMITTER_FILES: Readonly<Record<string, ReadonlySet<string>>> = { lib: new Set(emitterOutputs('dist/')) };
/**
 * The library's declarations in the projects that use them, each type-checked with
 * `skipLibCheck: false` against the installed tarball: a Node project with no DOM library (the
 * SDK's and a server's setting) and a page's, each using the entries it would and handing them
 * what its runtime has (a page's `Headers`, `FileList`, `Element`, a Node `FileHandle`), and the
 * service worker's. A .d.ts that names a DOM type fails the first; one typed too narrowly for the
 * DOM's own values fails the second.
 */
const TYPE_PROJECTS: ReadonlyArray<{ name: string; lib: string[]; types: string[]; source: string }> = [
  {
    name: 'node (lib es2022, types node, no DOM)',
    lib: ['es2022'],
    types: ['node'],
    source: `
import { open } from 'node:fs/promises';
import { openRandomAccess, resumableDownload, seal, senderText } from 'postguard-ts';
import * as format from 'postguard-ts/format';
import * as keys from 'postguard-ts/keys';
import { PkgClient } from 'postguard-ts/pkg';
import { PostGuard } from 'postguard-ts/client';
import { postguard } from 'postguard-ts/vite';
import { PostGuard as SdkPostGuard, fileKeeper } from '@postguard-ts/sdk';
const handle = await open('file.enc');
declare const opening: Parameters<typeof openRandomAccess>[1];
export const checks = [
  format, keys, PkgClient, seal, senderText, postguard(), fileKeeper('kept'),
  await resumableDownload('https://example.org/f', { headers: { authorization: 'Bearer x' }, credentials: 'include' }),
  await openRandomAccess({ url: 'https://example.org/f', headers: [['authorization', 'x']] }, opening),
  await openRandomAccess(handle, opening),
  new PostGuard({ pkgUrl: 'https://pkg.example.org', cryptifyUrl: 'https://storage.example.org' }),
  new SdkPostGuard({ pkgUrl: 'https://pkg.example.org', cryptifyUrl: 'https://storage.example.org' }),
];
`,
  },
  {
    name: 'browser (lib es2022, dom, dom.iterable)',
    lib: ['es2022', 'dom', 'dom.iterable'],
    types: [],
    source: `
import { openRandomAccess, resumableDownload, senderText } from 'postguard-ts';
import { PostGuard, showSessionIn } from 'postguard-ts/client';
import * as worker from 'postguard-ts/worker';
import * as sw from 'postguard-ts/sw';
import * as browser from 'postguard-ts/browser';
const input = document.querySelector('input')!;
declare const opening: Parameters<typeof openRandomAccess>[1];
const pg = new PostGuard({ pkgUrl: 'https://pkg.example.org', cryptifyUrl: 'https://storage.example.org' });
export const checks = [
  worker, sw, browser, showSessionIn, senderText,
  pg.receiveLink({ uuid: '0b5e3a8e-6f1c-4d2a-9a51-3f0e2b7c9d10' }, 'bob@example.org'),
  await resumableDownload('https://example.org/f', { headers: new Headers({ a: 'b' }), credentials: 'include' as RequestCredentials }),
  await openRandomAccess(new Blob([]), opening),
  pg.encrypt({ files: input.files!, recipients: [pg.recipient.email('bob@example.org')], sign: pg.sign.yivi({ element: document.body }) }),
  pg.encrypt({ files: [new File([], 'a.txt')], recipients: [pg.recipient.email('bob@example.org')], sign: pg.sign.yivi({ element: '#qr' }) }),
];
`,
  },
  {
    name: 'service worker (lib es2022, webworker)',
    lib: ['es2022', 'webworker'],
    types: [],
    source: `
import * as install from 'postguard-ts/sw/install';
export const checks = [install];
`,
  },
];

/** Type-checks TYPE_PROJECTS in `app`, where the library (and the SDK) are installed from their tarballs. */
function checkTypeProjects(app: string): void {
  // Vite (for postguard-ts/vite, an optional peer) and Node's types as the workspace has them.
  for (const name of ['vite', '@types/node']) {
    mkdirSync(dirname(join(app, 'node_modules', name)), { recursive: true });
    if (!existsSync(join(app, 'node_modules', name)))
      symlinkSync(join(ROOT, 'node_modules', name), join(app, 'node_modules', name), 'dir');
  }
  for (const [i, project] of TYPE_PROJECTS.entries()) {
    const folder = join(app, `types-${i}`);
    mkdirSync(folder);
    writeFileSync(join(folder, 'index.ts'), project.source);
    writeFileSync(
      join(folder, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'es2022',
          module: 'nodenext',
          moduleResolution: 'nodenext',
          lib: project.lib,
          types: project.types,
          strict: true,
          skipLibCheck: false,
          noEmit: true,
        },
        files: ['index.ts'],
      }),
    );
    writeFileSync(join(folder, 'package.json'), JSON.stringify({ type: 'module', private: true }));
    try {
      execFileSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', folder], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      console.log(`postguard-ts: the declarations type-check in a ${project.name} project`);
    } catch (error) {
      const { stdout, stderr } = error as { stdout?: string; stderr?: string };
      console.log(`${stdout ?? ''}${stderr ?? ''}`.trim());
      problems.push(`postguard-ts: the declarations do not type-check in a ${project.name} project`);
    }
  }
}

const problems: string[] = [];
const dir = mkdtempSync(join(tmpdir(), 'pg-packages-'));
const bin = (name: string) => join(ROOT, 'node_modules', '.bin', name);
try {
  const packs = packAll(dir);
  for (const pack of packs) {
    console.log(`\n== ${pack.name} (${pack.files.length} files)`);
    for (const required of ['README.md', 'LICENSE', 'package.json']) {
      if (!pack.files.includes(required)) problems.push(`${pack.name}: ${required} is missing from the tarball`);
    }
    for (const { source, shipped } of DATA_FILES[pack.dir] ?? []) {
      for (const file of readdirSync(join(ROOT, pack.dir, source))) {
        if (!pack.files.includes(`${shipped}/${file}`))
          problems.push(`${pack.name}: ${shipped}/${file} is missing from the tarball`);
      }
    }
    for (const { source, shipped } of entryReadmes(pack.dir)) {
      const built = join(ROOT, pack.dir, shipped);
      if (!pack.files.includes(shipped))
        problems.push(`${pack.name}: ${shipped} (${relative(ROOT, source)}) is missing from the tarball`);
      else if (readFileSync(built, 'utf8') !== readFileSync(source, 'utf8'))
        problems.push(`${pack.name}: ${shipped} differs from ${relative(ROOT, source)} (run npm run build)`);
    }
    for (const file of pack.files) {
      if (FORBIDDEN.some((pattern) => pattern.test(file))) problems.push(`${pack.name}: ships ${file}`);
      if ((NOT_SHIPPED[pack.dir] ?? []).some((pattern) => pattern.test(file)))
        problems.push(`${pack.name}: ships ${file}, which belongs to @postguard-ts/dev`);
      if (EMITTER_FILES[pack.dir]?.has(file)) problems.push(`${pack.name}: ships ${file}, a WebAssembly emitter`);
      // Links are followed from the installed package: each must reach a file that ships, or the repository.
      if (file.endsWith('.md')) {
        const text = readFileSync(join(ROOT, pack.dir, file), 'utf8');
        problems.push(...linkProblems(text, file, pack.files).map((problem) => `${pack.name}: ${problem}`));
      }
    }
    const manifest = packageJson(pack.dir);
    if (manifest['repository'] === undefined) problems.push(`${pack.name}: no repository`);
    const run = (command: string, args: string[]) => {
      try {
        console.log(execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim());
      } catch (error) {
        const { stdout, stderr } = error as { stdout?: string; stderr?: string };
        console.log(`${stdout ?? ''}${stderr ?? ''}`.trim());
        problems.push(`${pack.name}: ${command.split('/').pop()} failed`);
      }
    };
    run(bin('publint'), ['run', pack.tarball, '--strict', '--pack', 'false']);
    // Packages with importable entries get their types checked; the CLI and the server only ship bins.
    if (manifest['exports'] !== undefined) {
      // The two ready-built browser scripts are files to copy or hand to `new Worker`, not modules to import.
      run(bin('attw'), [
        pack.tarball,
        '--profile',
        'esm-only',
        '--no-emoji',
        '--no-color',
        '--exclude-entrypoints',
        './worker/script',
        './sw/script',
        './package.json',
      ]);
    }
  }
  // What a user installs must run on the Node our `engines` promise: each tarball installed alone
  // into a fresh project, with npm's engine check made an error (a transitive dependency that needs
  // a newer Node than this one fails the check, as `cookie@2` under a newer light-my-request did).
  const library = packs.find((p) => p.dir === 'lib')!;
  for (const pack of packs) {
    const app = mkdtempSync(join(dir, `install-${pack.dir}-`));
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'engines-check', private: true }));
    // With the published packages it depends on (@postguard-ts/dev needs the PKG), as tarballs too.
    const needed = Object.keys((packageJson(pack.dir)['dependencies'] ?? {}) as object);
    const siblings = packs.filter((p) => p !== pack && p !== library && needed.includes(p.name)).map((p) => p.tarball);
    const tarballs = pack === library ? [library.tarball] : [library.tarball, ...siblings, pack.tarball];
    try {
      execFileSync(
        'npm',
        ['install', '--engine-strict', '--ignore-scripts', '--no-audit', '--no-fund', '--no-package-lock', ...tarballs],
        { cwd: app, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
      );
      console.log(`${pack.name}: installs under Node ${process.versions.node} with no engine warning`);
      if (pack.dir === 'sdk') checkTypeProjects(app);
    } catch (error) {
      const { stdout, stderr } = error as { stdout?: string; stderr?: string };
      console.log(`${stdout ?? ''}${stderr ?? ''}`.trim());
      problems.push(`${pack.name}: does not install under Node ${process.versions.node} (--engine-strict)`);
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
if (problems.length > 0) {
  console.error(`\n${problems.length} problem(s):\n${problems.map((p) => `- ${p}`).join('\n')}`);
  process.exit(1);
}
console.log('\npackages: every tarball is complete, publint and attw are clean');
