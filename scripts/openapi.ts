/**
 * Writes docs/openapi.json, the PKG's HTTP contract generated from its route schemas (server/openapi.ts):
 *   npx tsx scripts/openapi.ts                   write it, unless /v2 would break (exit 1, the breaks listed)
 *   npx tsx scripts/openapi.ts --allow-breaking  write it anyway (a reviewed, deliberate break)
 * server/openapi.test.ts fails while the committed file differs from what the routes say.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { format, resolveConfig } from 'prettier';
import { breakingChanges } from '../server/openapi-diff.js';
import { openApiDocument } from '../server/openapi.js';

const FILE = new URL('../docs/openapi.json', import.meta.url);

const next = await openApiDocument();
let base: unknown;
try {
  base = JSON.parse(await readFile(FILE, 'utf8'));
} catch {
  base = undefined;
}
const breaks = base === undefined ? [] : breakingChanges(base, next);
if (breaks.length > 0 && !process.argv.includes('--allow-breaking')) {
  process.stderr.write(
    `docs/openapi.json not written: the change breaks /v2:\n${breaks.map((b) => `  ${b}\n`).join('')}`,
  );
  process.exit(1);
}
// In the repository's own style, so that prettier --check passes on it as written.
const path = fileURLToPath(FILE);
const style = (await resolveConfig(path)) ?? {};
await writeFile(FILE, await format(JSON.stringify(next), { ...style, parser: 'json', filepath: path }));
process.stdout.write(`wrote docs/openapi.json (${Object.keys(next['paths'] as object).length} paths)\n`);
