// `npm start`: the demo with the PKG, the stand-in identity server and the storage stand-in, on
// embedded development defaults.
//
//   demo (Vite dev server) http://127.0.0.1:5173      (encrypt, decrypt, send.html, receive.html)
//   stand-in Yivi server   http://127.0.0.1:8088      (wallet page: /standin/wallet)
//   PKG                    http://127.0.0.1:8080      (CORS: the demo's dev and preview origins)
//   storage stand-in       http://127.0.0.1:8090      (Cryptify in strict mode; mails in /standin/outbox)
//   API reference          http://127.0.0.1:5173/api/ (docs/api/, built in the background on the first
//                                                      start; `npm run docs` rebuilds it: scripts/dev-docs.ts)
//
// Master keys and the stand-in's JWT key are created in .keys/ (gitignored) on the first run and
// reused afterwards, so ciphertexts and cached keys survive a restart; uploads live in a temporary
// directory removed on exit. Overrides: DEV_HOST, PKG_PORT, STANDIN_PORT, STORAGE_PORT, DEMO_PORT, DEMO (dev | build | off: Vite's dev server, a production build served by
// Vite's preview server, or no demo), DEV_ORIGINS (comma-separated), and the PKG's own variables
// (PKG_RATELIMIT_*, LOG_LEVEL, DATABASE_URL, ...). With DATABASE_URL (API keys), the database's schema is
// brought up to date before the PKG starts, and the start says so. Not for production: `pg-pkg server` is.
import { access, mkdir } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { DemoRuntimeConfig } from '../demo/vite.js';
import { generatePkgKeys } from '../lib/keys.js';
import { writePkgKeys, type PkgKeyPaths } from '../server/keyfiles.js';
import { ConfigError, parseCommand } from '../server/config.js';
import { migrate, migrationLabel } from '../server/db/migrate.js';
import { StartupError, serve, type RunningServer } from '../server/serve.js';
import { buildStandin } from '../devtools/standin/app.js';
import { buildStorage, type StorageOptions } from '../devtools/storage/app.js';
import { DOCS_DIR, DOCS_PATH, docsPlugin, type DocsMode } from './dev-docs.js';

export const DEV_KEY_DIR = '.keys';
/** Vite's dev server and its preview server, by both loopback names. */
export const DEV_ORIGINS = [
  'http://localhost:5173',
  'http://127.0.0.1:5173',
  'http://localhost:4173',
  'http://127.0.0.1:4173',
];

/** How the demo is served: Vite's dev server, a build served by Vite's preview server, or not at all. */
export type DemoMode = 'dev' | 'build' | 'off';
const DEMO_MODES: readonly DemoMode[] = ['dev', 'build', 'off'];

export interface DevSettings {
  host: string;
  pkgPort: number;
  standinPort: number;
  /** The storage stand-in's port (0: a free one). Default 0 where the settings do not say (tests). */
  storagePort?: number;
  /**
   * Storage stand-in options on top of the stack's (strict mode, the PKG, the demo's origins): its
   * limits and chunk size, for tests that need small ones.
   */
  storage?: Pick<StorageOptions, 'chunkSize' | 'perUploadLimit' | 'rollingLimit' | 'dataDir'>;
  /** 0 picks a free port (tests); the PKG then allows that origin too. */
  demoPort: number;
  demo: DemoMode;
  origins: string[];
  keyDir: string;
  /** Serve this already built demo (mode 'build' skips building when given). */
  demoDir?: string;
  /**
   * The API reference at /api/ beside the demo: 'build' builds a missing one in the background
   * (npm start), 'serve' serves it if built (the default: tests never build it unasked).
   */
  docs?: DocsMode;
  /** Where the API reference is (default docs/api/). */
  docsDir?: string;
}

export function devSettings(env: Readonly<Record<string, string | undefined>>): DevSettings {
  const demo = (env['DEMO'] ?? 'dev') as DemoMode;
  if (!DEMO_MODES.includes(demo)) throw new ConfigError('DEMO', `must be one of ${DEMO_MODES.join(', ')}`);
  return {
    host: env['DEV_HOST'] ?? '127.0.0.1',
    pkgPort: Number(env['PKG_PORT'] ?? 8080),
    standinPort: Number(env['STANDIN_PORT'] ?? 8088),
    storagePort: Number(env['STORAGE_PORT'] ?? 8090),
    demoPort: Number(env['DEMO_PORT'] ?? 5173),
    demo,
    origins: env['DEV_ORIGINS']?.split(',') ?? DEV_ORIGINS,
    keyDir: DEV_KEY_DIR,
    docs: 'build',
  };
}

const exists = (path: string): Promise<boolean> =>
  access(path).then(
    () => true,
    () => false,
  );

/** The dev master keys: created on first use, never overwritten (a half set is an error to look at). */
export async function ensureDevKeys(dir: string): Promise<PkgKeyPaths> {
  const paths: PkgKeyPaths = {
    ibePublic: join(dir, 'pkg_ibe.pub'),
    ibeSecret: join(dir, 'pkg_ibe.sec'),
    ibsPublic: join(dir, 'pkg_ibs.pub'),
    ibsSecret: join(dir, 'pkg_ibs.sec'),
  };
  const present = await Promise.all(Object.values(paths).map(exists));
  if (present.every((p) => !p)) {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    await writePkgKeys(paths, generatePkgKeys());
  } else if (!present.every((p) => p)) {
    throw new StartupError(`${dir} holds only some of the four PKG key files; move them away to start afresh`);
  }
  return paths;
}

export interface DevStack {
  pkg: RunningServer;
  /** What the start did to the API-key database (DATABASE_URL), unless there is none. */
  database: string | undefined;
  standinUrl: string;
  /** The storage stand-in (Cryptify's protocol, strict mode), in this process. */
  storage: { url: string; app: FastifyInstance };
  /** The stand-in's wallet simulator page. */
  walletUrl: string;
  /** The demo's base URL (ends in '/'), unless the demo is off. */
  demoUrl: string | undefined;
  /** The API reference beside the demo (ends in '/'), unless the demo is off. */
  docsUrl: string | undefined;
  /** Settles once the API reference can be served (built, or its build failed). */
  docsReady: Promise<void>;
  close(): Promise<void>;
}

interface DemoServer {
  url: string;
  docsReady: Promise<void>;
  close(): Promise<void>;
}

/**
 * The demo on Vite (loaded only when wanted: the PKG alone needs no Vite). `runtime` answers the
 * page's /config.json, so the page finds the PKG wherever it ended up listening.
 */
async function startDemo(
  settings: DevSettings,
  displayHost: string,
  runtime: () => DemoRuntimeConfig,
): Promise<DemoServer> {
  const vite = await import('vite');
  const { DEMO_OUT_DIR, demoConfig } = await import('../demo/vite.js');
  const listen = { host: settings.host, port: settings.demoPort, strictPort: true };
  const docs = docsPlugin(settings.docsDir ?? DOCS_DIR, settings.docs ?? 'serve');
  const withDocs = (config: ReturnType<typeof demoConfig>) => ({
    ...config,
    plugins: [...(config.plugins ?? []), docs.plugin],
  });
  if (settings.demo === 'dev') {
    const server = await vite.createServer({
      ...withDocs(demoConfig({ runtime })),
      server: { ...demoConfig().server, ...listen },
    });
    await server.listen();
    const port = (server.httpServer?.address() as AddressInfo | null)?.port ?? settings.demoPort;
    return { url: `http://${displayHost}:${port}/`, docsReady: docs.ready, close: () => server.close() };
  }
  const outDir = settings.demoDir ?? DEMO_OUT_DIR;
  if (settings.demoDir === undefined) await vite.build(demoConfig({ outDir }));
  const server = await vite.preview({ ...withDocs(demoConfig({ runtime, outDir })), preview: listen });
  const port = (server.httpServer.address() as AddressInfo | null)?.port ?? settings.demoPort;
  return {
    url: `http://${displayHost}:${port}/`,
    docsReady: docs.ready,
    close: () => server.close(),
  };
}

export async function startDev(
  settings: DevSettings,
  env: Readonly<Record<string, string | undefined>>,
): Promise<DevStack> {
  const keyPaths = await ensureDevKeys(settings.keyDir);
  const host = settings.host.includes(':') ? `[${settings.host}]` : settings.host;
  // Filled in once the PKG listens; the page asks only after that.
  let runtime: DemoRuntimeConfig = { pkgUrl: '', walletUrl: null, cryptifyUrl: null };
  const demo = settings.demo === 'off' ? undefined : await startDemo(settings, host, () => runtime);
  // With an ephemeral demo port, the PKG must allow the origin it got, under both loopback names as
  // DEV_ORIGINS has them (WebAuthn, the demo's passkey tier, works on localhost only: not on an IP).
  const demoOrigins =
    demo === undefined
      ? []
      : [new URL(demo.url).origin, new URL(demo.url).origin.replace('//127.0.0.1:', '//localhost:')];
  const origins = [...new Set([...settings.origins, ...demoOrigins])];

  const standin = buildStandin({
    keyPath: join(settings.keyDir, 'standin-jwt.pem'),
    logger: { level: env['LOG_LEVEL'] ?? 'warn', stream: process.stderr },
  });
  try {
    await standin.listen({ host: settings.host, port: settings.standinPort });
  } catch (e) {
    await demo?.close();
    throw listenError(e, settings.host, settings.standinPort, 'the stand-in identity server');
  }
  const standinPort = (standin.server.address() as AddressInfo | null)?.port ?? settings.standinPort;
  const standinUrl = `http://${host}:${standinPort}`;

  const command = parseCommand(
    [
      'server',
      '--host',
      settings.host,
      '--port',
      String(settings.pkgPort),
      '--irma',
      standinUrl,
      '--allowed-origins',
      origins.join(','),
      '--ibe-public-path',
      keyPaths.ibePublic,
      '--ibe-secret-path',
      keyPaths.ibeSecret,
      '--ibs-public-path',
      keyPaths.ibsPublic,
      '--ibs-secret-path',
      keyPaths.ibsSecret,
    ],
    { LOG_LEVEL: 'warn', ...env },
  );
  if (command.kind !== 'server') throw new Error('unreachable: dev always runs the server');
  let pkg: RunningServer;
  let database: string | undefined;
  try {
    // `pg-pkg server` refuses a database whose schema is missing or old (or migrates with --migrate);
    // a development start always migrates, so API keys work on the first `npm start`.
    if (command.config.databaseUrl !== undefined) database = await migrateDatabase(command.config.databaseUrl);
    pkg = await serve(command.config);
  } catch (e) {
    await standin.close();
    await demo?.close();
    throw e;
  }
  let storage: FastifyInstance;
  let storageUrl: string;
  try {
    storage = buildStorage({
      ...settings.storage,
      // As Cryptify answers a browser: only the token is readable cross-origin, so what the demo
      // does here it can do against the real service.
      strict: true,
      pkgUrl: pkg.url,
      allowedOrigins: originPattern(origins),
      // The mails' download links (/download?uuid=…) open the demo's receive page.
      ...(demo === undefined ? {} : { publicUrl: demo.url }),
      logger: { level: env['LOG_LEVEL'] ?? 'warn', stream: process.stderr },
    });
    const storagePort = settings.storagePort ?? 0;
    try {
      await storage.listen({ host: settings.host, port: storagePort });
    } catch (e) {
      await storage.close().catch(() => undefined);
      throw listenError(e, settings.host, storagePort, 'the storage stand-in');
    }
    storageUrl = `http://${host}:${(storage.server.address() as AddressInfo).port}`;
  } catch (e) {
    await pkg.close();
    await standin.close();
    await demo?.close();
    throw e;
  }
  const walletUrl = `${standinUrl}/standin/wallet`;
  runtime = { pkgUrl: pkg.url, walletUrl, cryptifyUrl: storageUrl };
  return {
    pkg,
    database,
    standinUrl,
    storage: { url: storageUrl, app: storage },
    walletUrl,
    demoUrl: demo?.url,
    docsUrl: demo === undefined ? undefined : new URL(DOCS_PATH, demo.url).href,
    docsReady: demo?.docsReady ?? Promise.resolve(),
    close: async () => {
      await demo?.close();
      await storage.close();
      await pkg.close();
      const closing = standin.close();
      // An open status-event stream would hold the stand-in's close until it ends.
      standin.server.closeAllConnections();
      await closing;
    },
  };
}

/** The storage stand-in's CORS setting: exactly these origins (it takes one pattern for the whole Origin). */
export function originPattern(origins: readonly string[]): RegExp {
  const escaped = origins.map((o) => o.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&'));
  // No origin at all matches nothing: (?!) never matches.
  return new RegExp(escaped.length === 0 ? '^(?!)$' : `^(?:${escaped.join('|')})$`);
}

/** Brings the schema up to date; says what it did, with the URL's password left out. */
async function migrateDatabase(databaseUrl: string): Promise<string> {
  let run: Awaited<ReturnType<typeof migrate>>;
  try {
    run = await migrate(databaseUrl);
  } catch (e) {
    throw new StartupError(`the database (DATABASE_URL) could not be migrated: ${(e as Error).message}`);
  }
  const url = new URL(databaseUrl);
  if (url.password !== '') url.password = '***';
  const applied = run.applied.map(migrationLabel);
  return applied.length === 0
    ? `${url.host}${url.pathname}: schema up to date (version ${run.version})`
    : `${url.host}${url.pathname}: migrated to version ${run.version} (applied ${applied.join(', ')})`;
}

function listenError(e: unknown, host: string, port: number, what: string): unknown {
  const code = (e as NodeJS.ErrnoException).code;
  if (code === 'EADDRINUSE') return new StartupError(`port ${port} on ${host} is in use (${what})`);
  if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') return new StartupError(`cannot bind ${host} (${what})`);
  return e;
}

async function main(): Promise<void> {
  let stack: DevStack;
  try {
    stack = await startDev(devSettings(process.env), process.env);
  } catch (e) {
    if (e instanceof ConfigError || e instanceof StartupError) {
      process.stderr.write(`dev: ${e.message}\n`);
      process.exit(e instanceof ConfigError ? 2 : 1);
    }
    throw e;
  }
  process.stdout.write(
    [
      'postguard-ts development stack',
      ...(stack.demoUrl === undefined
        ? []
        : [
            `  demo: send         ${stack.demoUrl}send.html`,
            `  demo: receive      ${stack.demoUrl}receive.html?uuid=…`,
            `  demo: encrypt      ${stack.demoUrl}`,
            `  demo: decrypt      ${stack.demoUrl}decrypt.html`,
            `  API reference      ${stack.docsUrl}  (docs/api/: built in the background on the first start; npm run docs rebuilds it)`,
          ]),
      `  PKG                ${stack.pkg.url}          (GET /v2/parameters, /health, /metrics)`,
      `  stand-in Yivi      ${stack.standinUrl}`,
      `  simulated wallet   ${stack.walletUrl}`,
      `  storage stand-in   ${stack.storage.url}  (mails it would send: /standin/outbox)`,
      `  keys               ${DEV_KEY_DIR}/ (created on first run)`,
      ...(stack.database === undefined
        ? ['  API keys           off (set DATABASE_URL to a PostgreSQL database to use them)']
        : [`  database           ${stack.database}`]),
      'Ctrl-C stops everything.',
      '',
    ].join('\n'),
  );
  const stop = (): void => {
    stack.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

// Run when started as a script; importing it (tests) only gets the pieces.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
