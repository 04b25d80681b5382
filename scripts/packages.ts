import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

/** The published packages: folder and name. Everything else in the workspace is private. */
export const PUBLISHED = [
  { dir: 'lib', name: 'postguard-ts' },
  { dir: 'sdk', name: '@postguard-ts/sdk' },
  { dir: 'cli', name: '@postguard-ts/cli' },
  { dir: 'server', name: '@postguard-ts/pkg' },
  { dir: 'devtools', name: '@postguard-ts/dev' },
] as const;

export const ROOT = resolve(import.meta.dirname, '..');

export interface Packed {
  dir: string;
  name: string;
  tarball: string;
  files: string[];
}

/** `npm pack` of every published package into `destination` (built beforehand: npm run build). */
export function packAll(destination: string): Packed[] {
  mkdirSync(destination, { recursive: true });
  return PUBLISHED.map(({ dir, name }) => {
    const out = execFileSync('npm', ['pack', '--json', '--pack-destination', destination], {
      cwd: join(ROOT, dir),
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const [info] = JSON.parse(out) as Array<{ filename: string; files: Array<{ path: string }> }>;
    return { dir, name, tarball: join(destination, info!.filename), files: info!.files.map((f) => f.path) };
  });
}

export const packageJson = (dir: string): Record<string, unknown> =>
  JSON.parse(readFileSync(join(ROOT, dir, 'package.json'), 'utf8')) as Record<string, unknown>;
