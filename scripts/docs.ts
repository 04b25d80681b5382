// `npm run docs`: the API reference of every public entry (scripts/public-entries.ts), rendered by
// TypeDoc from the sources' doc comments into docs/api/ (not committed: open docs/api/index.html).
// Each entry is named by its module comment's `@module` tag, which `npm run check:docs` requires.
// Any TypeDoc warning (a broken {@link}, an exported type that points at one left out) fails it.
// `--check` (part of `npm run check:docs`) stops before the HTML: conversion and validation only.
// The index opens with "start here" (docs-start.md: send, receive, the worker, the service
// worker; the package name is the page's title, once) and groups the entries and the client's
// internals (docs-groups.ts). `npm start` serves the output at /api/ beside the demo (scripts/dev.ts).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Application } from 'typedoc';
import { ROOT } from './packages.js';
import { GROUP_ORDER, applyDocGroups, entryIndex } from './docs-groups.js';
import { publicEntries } from './public-entries.js';
import { repositoryUrl } from './readme-links.js';

const started = performance.now();
const check = process.argv.includes('--check');
// `--out <dir>`: another folder (npm start builds a missing reference so, scripts/dev-docs.ts).
const outAt = process.argv.indexOf('--out');
const out = outAt > 0 && process.argv[outAt + 1] !== undefined ? process.argv[outAt + 1]! : join(ROOT, 'docs', 'api');
const entries = publicEntries();
const entryPoints = entries.map((entry) => entry.source);
// The root tsconfig (its `paths` reach the library's sources) over the entries alone: its own
// `include` is the whole repository, tests and all, which would triple the time.
const scratch = mkdtempSync(join(tmpdir(), 'pg-docs-'));
const tsconfig = join(scratch, 'tsconfig.json');
writeFileSync(tsconfig, JSON.stringify({ extends: join(ROOT, 'tsconfig.json'), files: entryPoints, include: [] }));
// The index: "start here", then the entries by group.
const readme = join(scratch, 'index.md');
const start = readFileSync(join(ROOT, 'scripts', 'docs-start.md'), 'utf8');
writeFileSync(readme, `${start}${entryIndex(entries.map((e) => e.specifier))}`);
const app = await Application.bootstrapWithPlugins({
  name: 'postguard-ts',
  entryPoints,
  tsconfig,
  readme,
  groupOrder: GROUP_ORDER,
  navigation: { includeGroups: true },
  out,
  // `npm run typecheck` checks the sources; this only reads them.
  skipErrorChecking: true,
  excludeInternal: true,
  excludePrivate: true,
  excludeProtected: true,
  // Source links point at the repository, not at this checkout.
  disableGit: true,
  gitRevision: 'main',
  sourceLinkTemplate: `${repositoryUrl()}/blob/{gitRevision}/{path}#L{line}`,
  treatWarningsAsErrors: true,
  // Shapes of the service worker's wire protocol that a public type mentions; what a page needs of
  // them is said where they are used (RegisterRequest.source, isWireError).
  intentionallyNotExported: ['WireSource', 'WireError'],
});
applyDocGroups(app);
const project = await app.convert().finally(() => rmSync(scratch, { recursive: true, force: true }));
if (project !== undefined) app.validate(project);
if (project === undefined || app.logger.hasErrors() || app.logger.hasWarnings()) process.exit(1);
const seconds = () => ((performance.now() - started) / 1000).toFixed(1);
if (check) {
  console.log(`docs --check: the API reference converts with no warning (${seconds()} s)`);
} else {
  await app.generateDocs(project, out);
  if (app.logger.hasErrors() || app.logger.hasWarnings()) process.exit(1);
  console.log(`docs: ${out}/index.html (${seconds()} s)`);
}
