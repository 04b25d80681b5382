// `npm start`: the PKG with the stand-in identity server, on embedded development defaults.
//
//   stand-in Yivi server   http://127.0.0.1:8088      (wallet page: /standin/wallet)
//   PKG                    http://127.0.0.1:8080      (CORS: the demo's dev and preview origins)
//
// Master keys and the stand-in's JWT key are created in .keys/ (gitignored) on the first run and
// reused afterwards, so ciphertexts and cached keys survive a restart. Overrides: DEV_HOST, PKG_PORT,
// STANDIN_PORT, DEV_ORIGINS (comma-separated), and the PKG's own variables (PKG_RATELIMIT_*,
// LOG_LEVEL, DATABASE_URL, ...). Not for production: `pg-pkg server` is.
import { access, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { generatePkgKeys, writePkgKeys, type PkgKeyPaths } from '../lib/keys.js';
import { ConfigError, parseCommand } from './config.js';
import { StartupError, serve, type RunningServer } from './serve.js';
import { buildStandin } from './standin/app.js';

export const DEV_KEY_DIR = '.keys';
/** Vite's dev server and its preview server, by both loopback names. */
export const DEV_ORIGINS = ['http://localhost:5173', 'http://127.0.0.1:5173', 'http://localhost:4173', 'http://127.0.0.1:4173'];

export interface DevSettings {
  host: string;
  pkgPort: number;
  standinPort: number;
  origins: string[];
  keyDir: string;
}

export function devSettings(env: Readonly<Record<string, string | undefined>>): DevSettings {
  return {
    host: env['DEV_HOST'] ?? '127.0.0.1',
    pkgPort: Number(env['PKG_PORT'] ?? 8080),
    standinPort: Number(env['STANDIN_PORT'] ?? 8088),
    origins: env['DEV_ORIGINS']?.split(',') ?? DEV_ORIGINS,
    keyDir: DEV_KEY_DIR,
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
  standinUrl: string;
  close(): Promise<void>;
}

export async function startDev(settings: DevSettings, env: Readonly<Record<string, string | undefined>>): Promise<DevStack> {
  const keyPaths = await ensureDevKeys(settings.keyDir);
  const standin = buildStandin({
    keyPath: join(settings.keyDir, 'standin-jwt.pem'),
    logger: { level: env['LOG_LEVEL'] ?? 'warn', stream: process.stderr },
  });
  await standin.listen({ host: settings.host, port: settings.standinPort });
  const host = settings.host.includes(':') ? `[${settings.host}]` : settings.host;
  const standinUrl = `http://${host}:${settings.standinPort}`;

  const command = parseCommand(
    [
      'server',
      '--host', settings.host,
      '--port', String(settings.pkgPort),
      '--irma', standinUrl,
      '--allowed-origins', settings.origins.join(','),
      '--ibe-public-path', keyPaths.ibePublic,
      '--ibe-secret-path', keyPaths.ibeSecret,
      '--ibs-public-path', keyPaths.ibsPublic,
      '--ibs-secret-path', keyPaths.ibsSecret,
    ],
    { LOG_LEVEL: 'warn', ...env },
  );
  if (command.kind !== 'server') throw new Error('unreachable: dev always runs the server');
  let pkg: RunningServer;
  try {
    pkg = await serve(command.config);
  } catch (e) {
    await standin.close();
    throw e;
  }
  return {
    pkg,
    standinUrl,
    close: async () => {
      await pkg.close();
      await standin.close();
    },
  };
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
      `  PKG                ${stack.pkg.url}          (GET /v2/parameters, /health, /metrics)`,
      `  stand-in Yivi      ${stack.standinUrl}`,
      `  simulated wallet   ${stack.standinUrl}/standin/wallet`,
      `  keys               ${DEV_KEY_DIR}/ (created on first run)`,
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
