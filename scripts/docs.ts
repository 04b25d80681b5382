// `npm run docs`: the API reference of every public entry (scripts/public-entries.ts), rendered by
// TypeDoc from the sources' doc comments into docs/api/ (not committed: open docs/api/index.html).
// Each entry is named by its module comment's `@module` tag, which `npm run check:docs` requires.
// Any TypeDoc warning (a broken {@link}, an exported type that points at one left out) fails it.
// `--check` (part of `npm run check:docs`) stops before the HTML: conversion and validation only.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Application } from 'typedoc';
import { ROOT } from './packages.js';
import { publicEntries } from './public-entries.js';
import { repositoryUrl } from './readme-links.js';

const started = performance.now();
const check = process.argv.includes('--check');
const out = join(ROOT, 'docs', 'api');
const entryPoints = publicEntries().map((entry) => entry.source);
// The root tsconfig (its `paths` reach the library's sources) over the entries alone: its own
// `include` is the whole repository, tests and all, which would triple the time.
const scratch = mkdtempSync(join(tmpdir(), 'pg-docs-'));
const tsconfig = join(scratch, 'tsconfig.json');
writeFileSync(tsconfig, JSON.stringify({ extends: join(ROOT, 'tsconfig.json'), files: entryPoints, include: [] }));
const app = await Application.bootstrapWithPlugins({
  name: 'postguard-ts',
  entryPoints,
  tsconfig,
  readme: join(ROOT, 'lib', 'README.md'),
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
