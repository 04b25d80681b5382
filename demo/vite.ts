import { fileURLToPath } from 'node:url';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { build, type InlineConfig, type Plugin } from 'vite';
import { scriptBuild } from '../lib/build/bundles.js';
import { sourceAliases } from '../scripts/source-aliases.js';

/**
 * How the demo is built and served (Vite's JS API; vite.config.ts `--mode demo` and scripts/dev.ts use it):
 *
 *   demoConfig({ runtime })   dev server and preview server: the pages (encrypt, decrypt, send,
 *                             receive), the crypto worker, and
 *                             - /sw.js: the demo's service worker (demo/src/sw.ts) as one classic
 *                               script; in dev it is bundled on first request and after edits;
 *                             - /config.json: where the PKG, the wallet simulator and storage are, answered
 *                               from `runtime()` so a server started on any port can tell the page.
 *   demoConfig() + build      dist/demo (or `outDir`): static files, sw.js and a default config.json
 *                             (the dev stack's loopback addresses; replace it when hosting elsewhere).
 */

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));

export const DEMO_ROOT = here('./');
export const DEMO_OUT_DIR = here('../dist/demo-app/');
const SW_ENTRY = here('./src/sw.ts');
const SW_FILE = 'sw.js';

/** The bare imports of the browser library and the demo but the library's own names (test/boundaries.test.ts keeps the list whole). */
export const BROWSER_DEPENDENCIES = [
  '@noble/curves/abstract/curve.js',
  '@noble/curves/abstract/tower.js',
  '@noble/curves/abstract/weierstrass.js',
  '@noble/curves/bls12-381.js',
  '@noble/curves/ed25519.js',
  '@noble/curves/utils.js',
  '@noble/hashes/sha3.js',
  '@noble/hashes/utils.js',
  'client-zip',
  'comlink',
  'idb-keyval',
  'qrcode',
] as const;

/** What the page learns from /config.json. */
export interface DemoRuntimeConfig {
  /** The PKG's base URL. */
  pkgUrl: string;
  /** The stand-in's wallet simulator page, or null where there is none (a real Yivi server). */
  walletUrl: string | null;
  /** The Cryptify-style storage service the send and receive pages use, or null where there is none. */
  cryptifyUrl: string | null;
}

/** `npm start`'s addresses (scripts/dev.ts defaults). */
export const DEFAULT_RUNTIME: DemoRuntimeConfig = {
  pkgUrl: 'http://127.0.0.1:8080',
  walletUrl: 'http://127.0.0.1:8088/standin/wallet',
  cryptifyUrl: 'http://127.0.0.1:8090',
};

/**
 * The demo imports the library by its published names, as an app does (demo/imports.test.ts keeps it
 * so); here they resolve to the sources, with the browser's `#aes` and `#shake`.
 */
const LIBRARY_SOURCES = sourceAliases('portable');

/** The service worker as one classic script (every browser registers those), in memory or to disk. */
function serviceWorkerConfig(outDir: string, write: boolean): InlineConfig {
  const config = scriptBuild(SW_ENTRY, 'iife', SW_FILE, outDir);
  return { ...config, resolve: { alias: LIBRARY_SOURCES }, build: { ...config.build, write, minify: write } };
}

function firstChunk(output: Awaited<ReturnType<typeof build>>): string {
  const outputs = (Array.isArray(output) ? output : [output]) as Array<{
    output?: Array<{ type: string; code?: string }>;
  }>;
  for (const o of outputs) {
    for (const item of o.output ?? []) if (item.type === 'chunk' && item.code !== undefined) return item.code;
  }
  throw new Error('the service worker build produced no script');
}

function sendJson(res: ServerResponse, body: unknown): void {
  res.setHeader('content-type', 'application/json');
  res.setHeader('cache-control', 'no-store');
  res.end(JSON.stringify(body));
}

type Middleware = (req: IncomingMessage, res: ServerResponse, next: () => void) => void;

function pathOf(req: IncomingMessage): string {
  return new URL(req.url ?? '/', 'http://x').pathname;
}

/** /config.json from `runtime()`, on the dev and the preview server alike. */
function runtimeConfigPlugin(runtime: () => DemoRuntimeConfig): Plugin {
  const middleware: Middleware = (req, res, next) => {
    if (pathOf(req) !== '/config.json') return next();
    sendJson(res, runtime());
  };
  return {
    name: 'postguard-demo:runtime-config',
    configureServer: (server) => void server.middlewares.use(middleware),
    configurePreviewServer: (server) => void server.middlewares.use(middleware),
  };
}

/**
 * /download?uuid=…&recipient=…, the link in Cryptify's (and the stand-in's) notification mails,
 * answered by the receive page on the dev and preview servers. A static host serves receive.html only.
 */
function downloadLinkPlugin(): Plugin {
  const middleware: Middleware = (req, res, next) => {
    if (pathOf(req) !== '/download') return next();
    const query = new URL(req.url ?? '/', 'http://x').search;
    res.statusCode = 302;
    res.setHeader('location', `/receive.html${query}`);
    res.end();
  };
  return {
    name: 'postguard-demo:download-link',
    configureServer: (server) => void server.middlewares.use(middleware),
    configurePreviewServer: (server) => void server.middlewares.use(middleware),
  };
}

/** /sw.js: bundled on demand in dev (rebuilt after any source edit), written beside the pages in a build. */
function serviceWorkerPlugin(): Plugin {
  let outDir = DEMO_OUT_DIR;
  let isBuild = false;
  return {
    name: 'postguard-demo:service-worker',
    configResolved(config) {
      outDir = config.build.outDir;
      isBuild = config.command === 'build';
    },
    configureServer(server) {
      let bundled: Promise<string> | undefined;
      // Any edit under lib/, worker/ or demo/ may change the worker; bundling again is cheap.
      server.watcher.on('change', () => (bundled = undefined));
      server.middlewares.use((req, res, next) => {
        if (pathOf(req) !== `/${SW_FILE}`) return next();
        bundled ??= build(serviceWorkerConfig(outDir, false)).then(firstChunk);
        bundled.then(
          (code) => {
            res.setHeader('content-type', 'text/javascript');
            res.setHeader('cache-control', 'no-store');
            res.end(code);
          },
          (error: unknown) => {
            bundled = undefined;
            res.statusCode = 500;
            res.end(`service worker build failed: ${String(error)}`);
          },
        );
      });
    },
    async closeBundle() {
      if (isBuild) await build(serviceWorkerConfig(outDir, true));
    },
    generateBundle() {
      if (!isBuild) return;
      // A static host has no middleware: ship the dev stack's addresses; edit the file to move.
      this.emitFile({
        type: 'asset',
        fileName: 'config.json',
        source: `${JSON.stringify(DEFAULT_RUNTIME, null, 2)}\n`,
      });
    },
  };
}

export interface DemoConfigOptions {
  /** Answers /config.json on the dev and preview servers (default: the dev stack's addresses). */
  runtime?: () => DemoRuntimeConfig;
  outDir?: string;
}

/** The demo's Vite configuration, for createServer(), preview() and build(). */
export function demoConfig(options: DemoConfigOptions = {}): InlineConfig {
  const runtime = options.runtime ?? (() => DEFAULT_RUNTIME);
  return {
    configFile: false,
    root: DEMO_ROOT,
    // Relative URLs: the built demo works from any path on a static host.
    base: './',
    logLevel: 'warn',
    // Its own dependency cache: other Vite roots in this repository keep theirs.
    cacheDir: here('../node_modules/.vite-demo'),
    resolve: { alias: LIBRARY_SOURCES },
    // Every browser dependency, known before the first request: otherwise Vite finds some only while
    // serving the first page (the crypto worker's) and reloads it, losing what was typed.
    optimizeDeps: { include: [...BROWSER_DEPENDENCIES] },
    worker: { format: 'es' },
    plugins: [runtimeConfigPlugin(runtime), downloadLinkPlugin(), serviceWorkerPlugin()],
    server: { fs: { allow: [here('../')] } },
    build: {
      outDir: options.outDir ?? DEMO_OUT_DIR,
      emptyOutDir: true,
      target: 'es2022',
      sourcemap: true,
      rolldownOptions: {
        input: {
          encrypt: here('./index.html'),
          decrypt: here('./decrypt.html'),
          send: here('./send.html'),
          receive: here('./receive.html'),
        },
      },
    },
  };
}
