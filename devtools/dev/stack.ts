import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { buildStandin } from '../standin/app.js';
import { buildStorage } from '../storage/app.js';

/**
 * `pg-dev`: a PKG, the stand-in Yivi server and the Cryptify stand-in on one machine, for trying
 * PostGuard out. The PKG is the installed `@postguard-ts/pkg`, run through its own `pg-pkg` bin (gen,
 * then server) in a child process: the dev tools use the production package as anyone would, and it
 * knows nothing of them.
 */

export interface DevStackOptions {
  host: string;
  pkgPort: number;
  standinPort: number;
  storagePort: number;
  /** Where the PKG's master keys and the stand-in's JWT key live; undefined: a fresh temporary directory, removed on close. */
  keyDir?: string;
  /** Where uploads are stored; undefined: a temporary directory, removed on close. */
  dataDir?: string;
  /** The origins the PKG allows (CORS). */
  allowedOrigins: string[];
  /**
   * Where the storage stand-in's mails link: an app's receive page (`?uuid=…&recipient=…` is added)
   * or an origin (Cryptify's `/download?…`). Undefined: the storage stand-in's own page,
   * `/standin/receive`, which says how to open the file.
   */
  publicUrl?: string;
  /** How to run pg-pkg (argv before its command); defaults to the installed package's bin under this Node. */
  pkgCommand?: string[];
  /** The PKG's environment (LOG_LEVEL, PKG_RATELIMIT_*, DATABASE_URL, ...). */
  env?: Readonly<Record<string, string | undefined>>;
  /** Where the servers' logs go. */
  log?: NodeJS.WritableStream;
}

export interface DevStack {
  pkgUrl: string;
  standinUrl: string;
  walletUrl: string;
  storageUrl: string;
  /** Where the mails link (the `publicUrl` given, or the storage stand-in's own receive page). */
  publicUrl: string;
  /** Whether the PKG was given a database (`DATABASE_URL`), so that it validates API keys. */
  apiKeys: boolean;
  keyDir: string;
  /** True when keyDir is a temporary directory that close() removes. */
  temporaryKeys: boolean;
  /** Resolves when the PKG process ends on its own (it should not): its exit code or signal. */
  pkgExited: Promise<string>;
  close(): Promise<void>;
}

/** A start-up problem worth one line to the user (exit status 1). */
export class StartupError extends Error {
  override readonly name = 'StartupError';
}

/** argv that runs the installed pg-pkg under this Node (the package's `bin`, found from its package.json). */
export async function installedPkgCommand(): Promise<string[]> {
  const require = createRequire(import.meta.url);
  let manifest: string;
  try {
    manifest = require.resolve('@postguard-ts/pkg/package.json');
  } catch {
    throw new StartupError('@postguard-ts/pkg is not installed beside @postguard-ts/dev');
  }
  const { bin } = JSON.parse(await readFile(manifest, 'utf8')) as { bin?: Record<string, string> };
  const main = bin?.['pg-pkg'];
  if (main === undefined) throw new StartupError(`${manifest} has no pg-pkg bin`);
  return [process.execPath, resolve(dirname(manifest), main)];
}

const hostInUrl = (host: string) => (host.includes(':') ? `[${host}]` : host);

async function listen(app: FastifyInstance, host: string, port: number, what: string): Promise<string> {
  try {
    await app.listen({ host, port });
  } catch (e) {
    await app.close().catch(() => undefined);
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') throw new StartupError(`port ${port} on ${host} is in use (${what})`);
    throw new StartupError(`${what} could not start: ${(e as Error).message}`);
  }
  return `http://${hostInUrl(host)}:${(app.server.address() as AddressInfo).port}`;
}

/** Runs a pg-pkg command to its end; its output goes to `log`. */
function runPkg(command: string[], args: string[], cwd: string, env: NodeJS.ProcessEnv, log: NodeJS.WritableStream) {
  return new Promise<void>((done, fail) => {
    const child = spawn(command[0]!, [...command.slice(1), ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.pipe(log, { end: false });
    child.stderr.pipe(log, { end: false });
    child.once('error', (e) => fail(new StartupError(`pg-pkg ${args[0]}: ${e.message}`)));
    child.once('exit', (code) =>
      code === 0 ? done() : fail(new StartupError(`pg-pkg ${args.join(' ')} failed (exit ${code})`)),
    );
  });
}

/** Starts `pg-pkg server` and resolves with its URL once it says it listens. */
function startPkg(
  command: string[],
  args: string[],
  cwd: string,
  env: NodeJS.ProcessEnv,
  log: NodeJS.WritableStream,
): Promise<{ child: ChildProcess; url: string; exited: Promise<string> }> {
  const child = spawn(command[0]!, [...command.slice(1), ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stderr.pipe(log, { end: false });
  const exited = new Promise<string>((done) =>
    child.once('exit', (code, signal) => done(signal === null ? `exit ${code}` : signal)),
  );
  return new Promise((done, fail) => {
    let seen = '';
    const onData = (chunk: Buffer) => {
      seen += chunk.toString('utf8');
      const url = /listening on (http:\/\/\S+)/.exec(seen)?.[1];
      if (url === undefined) return;
      child.stdout.off('data', onData);
      child.stdout.pipe(log, { end: false });
      done({ child, url, exited });
    };
    child.stdout.on('data', onData);
    child.once('error', (e) => fail(new StartupError(`pg-pkg server: ${e.message}`)));
    void exited.then((how) => fail(new StartupError(`pg-pkg server stopped before it listened (${how})`)));
  });
}

async function stopChild(child: ChildProcess, exited: Promise<string>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

export async function startDevStack(options: DevStackOptions): Promise<DevStack> {
  const log = options.log ?? process.stderr;
  const temporaryKeys = options.keyDir === undefined;
  const keyDir = options.keyDir === undefined ? await mkdtemp(join(tmpdir(), 'pg-dev-keys-')) : resolve(options.keyDir);
  const cleanups: Array<() => Promise<unknown>> = [];
  if (temporaryKeys) cleanups.push(() => rm(keyDir, { recursive: true, force: true }));
  const unwind = async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
    cleanups.length = 0;
  };
  try {
    if (!temporaryKeys) await mkdir(keyDir, { recursive: true, mode: 0o700 });
    const command = options.pkgCommand ?? (await installedPkgCommand());
    const env: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: 'warn', ...options.env };
    // Fresh master keys in a new directory; an existing complete set is kept (so ciphertexts survive a restart).
    // Absolute paths, so what gen prints names the files wherever pg-dev was started.
    const keyFile = (name: string) => resolve(keyDir, name);
    await runPkg(
      command,
      [
        'gen',
        '--if-missing',
        ...['--ibe-secret-path', keyFile('pkg_ibe.sec'), '--ibe-public-path', keyFile('pkg_ibe.pub')],
        ...['--ibs-secret-path', keyFile('pkg_ibs.sec'), '--ibs-public-path', keyFile('pkg_ibs.pub')],
      ],
      keyDir,
      env,
      log,
    );

    const standin = buildStandin({
      keyPath: join(keyDir, 'standin-jwt.pem'),
      logger: { level: env['LOG_LEVEL'] ?? 'warn', stream: log },
    });
    const standinUrl = await listen(standin, options.host, options.standinPort, 'the stand-in identity server');
    cleanups.push(async () => {
      const closing = standin.close();
      standin.server.closeAllConnections(); // an open status-event stream would hold the close
      await closing;
    });

    const pkg = await startPkg(
      command,
      [
        'server',
        '--host',
        options.host,
        '--port',
        String(options.pkgPort),
        '--irma',
        standinUrl,
        '--allowed-origins',
        options.allowedOrigins.join(','),
      ],
      keyDir,
      env,
      log,
    );
    cleanups.push(() => stopChild(pkg.child, pkg.exited));

    // Mails link to the page given, else to this stand-in's own, whose URL is known once it listens.
    let ownReceivePage = '';
    const storage = buildStorage({
      pkgUrl: pkg.url,
      publicUrl: options.publicUrl ?? (() => ownReceivePage),
      // As Cryptify answers a browser (only the token readable cross-origin), so what works here works there.
      strict: true,
      ...(options.dataDir === undefined ? {} : { dataDir: options.dataDir }),
      logger: { level: env['LOG_LEVEL'] ?? 'warn', stream: log },
    });
    const storageUrl = await listen(storage, options.host, options.storagePort, 'the storage stand-in');
    cleanups.push(() => storage.close());
    ownReceivePage = `${storageUrl}/standin/receive`;

    return {
      pkgUrl: pkg.url,
      standinUrl,
      walletUrl: `${standinUrl}/standin/wallet`,
      storageUrl,
      publicUrl: options.publicUrl ?? ownReceivePage,
      apiKeys: (env['DATABASE_URL'] ?? '') !== '',
      keyDir,
      temporaryKeys,
      pkgExited: pkg.exited,
      close: unwind,
    };
  } catch (e) {
    await unwind();
    throw e;
  }
}
