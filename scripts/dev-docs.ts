// The API reference beside the demo under `npm start` (scripts/dev.ts): the demo's Vite server
// answers /api/… from the folder `npm run docs` writes (docs/api/, not committed). When the folder
// has no index yet, the start builds it in a child process in the background (TypeDoc, a few
// seconds; the demo is usable at once), and /api/ says it is being built until then. A folder that
// is there is served as it is: `npm run docs` rebuilds it after a change.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { extname, join, normalize, sep } from 'node:path';
import type { Plugin } from 'vite';
import { ROOT } from './packages.js';

/** Where `npm run docs` writes the reference. */
export const DOCS_DIR = join(ROOT, 'docs', 'api');
/** Where the demo's server answers it. */
export const DOCS_PATH = '/api/';

/** Serve what is there, or build it first when it is missing. */
export type DocsMode = 'build' | 'serve';

type DocsState = { kind: 'ready' } | { kind: 'building' } | { kind: 'failed'; why: string } | { kind: 'missing' };

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.json': 'application/json',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
};

/** Builds the reference into `dir` with scripts/docs.ts in a child process; rejects with its output's tail. */
export function buildDocs(dir: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'scripts', 'docs.ts'), '--out', dir], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    const keep = (chunk: Buffer) => void (output = `${output}${chunk.toString()}`.slice(-2000));
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.once('error', reject);
    child.once('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`npm run docs failed (${code}): ${output.trim()}`)),
    );
  });
}

function page(res: ServerResponse, status: number, title: string, body: string, refresh = false): void {
  res.statusCode = status;
  res.setHeader('content-type', 'text/html; charset=utf-8');
  res.setHeader('cache-control', 'no-store');
  res.end(
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${title}</title>` +
      `${refresh ? '<meta http-equiv="refresh" content="2">' : ''}<link rel="icon" href="data:,"></head>` +
      `<body style="font:16px/1.4 system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem">` +
      `<h1>${title}</h1>${body}</body></html>`,
  );
}

const escapeHtml = (s: string): string =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/**
 * The reference at {@link DOCS_PATH} on the demo's dev and preview servers, from `dir`; with
 * `mode: 'build'` a missing one is built first (in the background). `ready` settles once the
 * reference can be served (or its build failed).
 */
export function docsPlugin(dir: string, mode: DocsMode): { plugin: Plugin; ready: Promise<void> } {
  let state: DocsState = existsSync(join(dir, 'index.html')) ? { kind: 'ready' } : { kind: 'missing' };
  let ready = Promise.resolve();
  if (state.kind === 'missing' && mode === 'build') {
    state = { kind: 'building' };
    ready = buildDocs(dir).then(
      () => void (state = { kind: 'ready' }),
      (error: unknown) =>
        void (state = { kind: 'failed', why: error instanceof Error ? error.message : String(error) }),
    );
  }
  const middleware = (req: IncomingMessage, res: ServerResponse, next: () => void): void => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    if (path === DOCS_PATH.slice(0, -1)) {
      res.statusCode = 301;
      res.setHeader('location', DOCS_PATH);
      res.end();
      return;
    }
    if (!path.startsWith(DOCS_PATH)) return next();
    if (state.kind === 'building')
      return page(
        res,
        503,
        'The API reference is being built',
        '<p>A few seconds: this page reloads itself.</p>',
        true,
      );
    if (state.kind === 'failed')
      return page(res, 500, 'The API reference did not build', `<pre>${escapeHtml(state.why)}</pre>`);
    if (state.kind === 'missing')
      return page(
        res,
        404,
        'The API reference is not built',
        '<p>Run <code>npm run docs</code> (it writes <code>docs/api/</code>), then reload.</p>',
      );
    let relative: string;
    try {
      relative = decodeURIComponent(path.slice(DOCS_PATH.length));
    } catch {
      return page(res, 400, 'Not a path', '');
    }
    const file = normalize(join(dir, relative === '' || relative.endsWith('/') ? `${relative}index.html` : relative));
    if (file !== dir && !file.startsWith(`${dir}${sep}`)) return page(res, 404, 'Not in the API reference', '');
    readFile(file).then(
      (body) => {
        res.setHeader('content-type', TYPES[extname(file)] ?? 'application/octet-stream');
        res.setHeader('cache-control', 'no-cache');
        res.end(body);
      },
      () => page(res, 404, 'Not in the API reference', `<p><a href="${DOCS_PATH}">The index</a></p>`),
    );
  };
  return {
    plugin: {
      name: 'postguard-dev:api-reference',
      configureServer: (server) => void server.middlewares.use(middleware),
      configurePreviewServer: (server) => void server.middlewares.use(middleware),
    },
    ready,
  };
}
