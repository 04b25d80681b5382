import cluster from 'node:cluster';
import { generatePkgKeys } from 'postguard-ts/keys';
import { writePkgKeys } from './keyfiles.js';
import { isPostGuardError } from 'postguard-ts';
import { ConfigError, parseCommand, type Command, type Env } from './config.js';
import { createApiKey } from './db.js';
import { StartupError, runPrimary, runWorker, serve, type Io } from './serve.js';

/**
 * pg-pkg, the command: parse (config.ts), then run. Exit codes: 0 done (or serving), 1 a runtime
 * failure (database unreachable, port in use, files exist), 2 invalid configuration or usage — always
 * with one line on stderr that names what is wrong.
 */

export type Outcome = { exit: number } | { serving: Promise<number> };

function fail(io: Io, code: number, message: string): Outcome {
  io.stderr.write(`pg-pkg: ${message}\n`);
  return { exit: code };
}

async function gen(command: Extract<Command, { kind: 'gen' }>, io: Io): Promise<Outcome> {
  try {
    await writePkgKeys(command.paths, generatePkgKeys());
  } catch (e) {
    const error = e as NodeJS.ErrnoException;
    if (error.code === 'EEXIST') return fail(io, 1, `${error.path} already exists; refusing to overwrite key files`);
    if (typeof error.code === 'string') return fail(io, 1, `cannot write ${error.path ?? 'key files'} (${error.code})`);
    throw e;
  }
  const { ibePublic, ibeSecret, ibsPublic, ibsSecret } = command.paths;
  io.stdout.write(
    `Generated the PKG master keys (mode 0600). Keep the secret keys secret.\n` +
      `  IBE public key: ${ibePublic}\n  IBE secret key: ${ibeSecret}\n  IBS public key: ${ibsPublic}\n  IBS secret key: ${ibsSecret}\n`,
  );
  return { exit: 0 };
}

async function apiKeyCreate(command: Extract<Command, { kind: 'api-key-create' }>, io: Io): Promise<Outcome> {
  let apiKey: string;
  try {
    apiKey = await createApiKey(command.databaseUrl, { email: command.email, org: command.org });
  } catch (e) {
    if (isPostGuardError(e)) return fail(io, 1, e.message);
    if ((e as Error).name === 'DatabaseUnavailableError') return fail(io, 1, `cannot reach the database: ${(e as Error).message}`);
    throw e;
  }
  io.stdout.write(`${apiKey}\n`);
  io.stderr.write('This key is shown only once; only its hash is stored.\n');
  return { exit: 0 };
}

async function server(command: Extract<Command, { kind: 'server' }>, io: Io): Promise<Outcome> {
  const { config } = command;
  if (config.workers > 1) {
    if (cluster.isWorker) {
      await runWorker(config);
      return { serving: new Promise<number>(() => undefined) };
    }
    return { serving: runPrimary(config, io) };
  }
  const running = await serve(config);
  const done = new Promise<number>((resolve) => {
    const stop = (): void => {
      running.close().then(
        () => resolve(0),
        () => resolve(1),
      );
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  io.stdout.write(`pg-pkg listening on ${running.url}\n`);
  return { serving: done };
}

/** Runs pg-pkg with these arguments (without node and the script) and environment. */
export async function runCli(argv: readonly string[], env: Env, io: Io): Promise<Outcome> {
  try {
    const command = parseCommand(argv, env);
    switch (command.kind) {
      case 'help':
        io.stdout.write(`${command.text}\n`);
        return { exit: 0 };
      case 'gen':
        return await gen(command, io);
      case 'api-key-create':
        return await apiKeyCreate(command, io);
      case 'server':
        return await server(command, io);
    }
  } catch (e) {
    if (e instanceof ConfigError) return fail(io, 2, `${e.message} (see --help)`);
    if (e instanceof StartupError) return fail(io, 1, e.message);
    throw e;
  }
}
