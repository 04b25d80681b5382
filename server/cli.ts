import cluster from 'node:cluster';
import { access } from 'node:fs/promises';
import pg from 'pg';
import { generatePkgKeys } from 'postguard-ts/keys';
import { readPkgKeys, writePkgKeys, type PkgKeyPaths } from './keyfiles.js';
import { isPostGuardError } from 'postguard-ts';
import { ConfigError, parseCommand, type Command, type Env } from './config.js';
import { createApiKey, listApiKeys, revokeApiKey, type ApiKeyListing } from './db.js';
import { migrate, migrationLabel, requireCurrentSchema, SchemaError } from './db/migrate.js';
import { StartupError, runPrimary, runWorker, serve, type Io } from './serve.js';

/**
 * pg-pkg, the command: parse (config.ts), then run. Exit codes: 0 done (or serving), 1 a runtime
 * failure (database unreachable or its schema missing, port in use, files exist), 2 invalid
 * configuration or usage — always with one line on stderr that names what is wrong, never a stack.
 */

export type Outcome = { exit: number } | { serving: Promise<number> };

function fail(io: Io, code: number, message: string): { exit: number } {
  io.stderr.write(`pg-pkg: ${message}\n`);
  return { exit: code };
}

const exists = (path: string): Promise<boolean> =>
  access(path).then(
    () => true,
    () => false,
  );

/** --if-missing: true when a complete, readable set exists (kept); a partial set is refused. */
async function keepExisting(paths: PkgKeyPaths, io: Io): Promise<Outcome | undefined> {
  const all = [paths.ibePublic, paths.ibeSecret, paths.ibsPublic, paths.ibsSecret];
  const present = await Promise.all(all.map(exists));
  if (present.every((p) => !p)) return undefined;
  const missing = all.filter((_, i) => !present[i]);
  if (missing.length > 0)
    return fail(io, 1, `${missing.join(', ')} missing beside existing key files; refusing to write a partial set`);
  try {
    await readPkgKeys(paths);
  } catch (e) {
    return fail(io, 1, `existing key files are unusable: ${(e as Error).message}`);
  }
  io.stdout.write(`The PKG master key files exist; keeping them (${paths.ibePublic}, …).\n`);
  return { exit: 0 };
}

async function gen(command: Extract<Command, { kind: 'gen' }>, io: Io): Promise<Outcome> {
  if (command.ifMissing) {
    const kept = await keepExisting(command.paths, io);
    if (kept !== undefined) return kept;
  }
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

/**
 * What an operator can meet in a database command, as one line (exit 1): PostgreSQL down, the schema
 * missing or from another version, bad input, a query PostgreSQL refused. Anything else is a bug.
 */
function databaseFailure(io: Io, e: unknown): Outcome {
  if (e instanceof SchemaError || isPostGuardError(e)) return fail(io, 1, e.message);
  if ((e as Error).name === 'DatabaseUnavailableError') return fail(io, 1, (e as Error).message);
  if (e instanceof pg.DatabaseError) return fail(io, 1, `database error: ${e.message}`);
  throw e;
}

/** Runs a database command after checking the schema is the one this pg-pkg was written for. */
async function withCurrentSchema(databaseUrl: string, io: Io, run: () => Promise<Outcome>): Promise<Outcome> {
  try {
    await requireCurrentSchema(databaseUrl);
    return await run();
  } catch (e) {
    return databaseFailure(io, e);
  }
}

async function migrateCommand(command: Extract<Command, { kind: 'migrate' }>, io: Io): Promise<Outcome> {
  try {
    const run = await migrate(command.databaseUrl);
    for (const migration of run.applied) io.stdout.write(`applied ${migrationLabel(migration)}\n`);
    io.stdout.write(
      run.applied.length === 0
        ? `database schema is up to date (version ${run.version})\n`
        : `database schema is at version ${run.version}\n`,
    );
    return { exit: 0 };
  } catch (e) {
    return databaseFailure(io, e);
  }
}

const apiKeyCreate = (command: Extract<Command, { kind: 'api-key-create' }>, io: Io): Promise<Outcome> =>
  withCurrentSchema(command.databaseUrl, io, async () => {
    const apiKey = await createApiKey(command.databaseUrl, { email: command.email, org: command.org });
    io.stdout.write(`${apiKey}\n`);
    io.stderr.write('This key is shown only once; only its hash is stored.\n');
    return { exit: 0 };
  });

const LISTING_HEADER = ['id', 'organisation', 'signing e-mail', 'status', 'created', 'expires', 'last used'];

function listingLine(key: ApiKeyListing): string[] {
  // Tabs and newlines in a name would break the columns; nothing else needs escaping.
  const text = (value: string) => value.replace(/[\t\r\n]/g, ' ');
  const date = (value: Date | null) => (value === null ? '-' : value.toISOString());
  return [
    key.id,
    text(key.organisation),
    text(key.signingEmail),
    key.status,
    date(key.createdAt),
    date(key.expiresAt),
    date(key.lastUsedAt),
  ];
}

const apiKeyList = (command: Extract<Command, { kind: 'api-key-list' }>, io: Io): Promise<Outcome> =>
  withCurrentSchema(command.databaseUrl, io, async () => {
    const keys = await listApiKeys(command.databaseUrl, command.org === undefined ? {} : { org: command.org });
    const lines = [LISTING_HEADER, ...keys.map(listingLine)].map((fields) => `${fields.join('\t')}\n`);
    io.stdout.write(lines.join(''));
    return { exit: 0 };
  });

const apiKeyRevoke = (command: Extract<Command, { kind: 'api-key-revoke' }>, io: Io): Promise<Outcome> =>
  withCurrentSchema(command.databaseUrl, io, async () => {
    const result = await revokeApiKey(command.databaseUrl, command.ref);
    switch (result.outcome) {
      case 'unknown':
        return fail(io, 1, 'id' in command.ref ? `no API key with id ${command.ref.id}` : 'no such API key');
      case 'already-revoked':
        io.stdout.write(`API key ${result.id} was already revoked\n`);
        return { exit: 0 };
      case 'revoked':
        io.stdout.write(`revoked API key ${result.id}\n`);
        return { exit: 0 };
    }
  });

/**
 * Before serving with a database: the schema must be the one this pg-pkg expects, or, with --migrate,
 * is brought there first (safe when several instances start at once).
 */
async function prepareDatabase(databaseUrl: string, migrateFirst: boolean, io: Io): Promise<void> {
  try {
    if (migrateFirst) {
      const run = await migrate(databaseUrl);
      for (const migration of run.applied) io.stdout.write(`pg-pkg: applied migration ${migrationLabel(migration)}\n`);
    } else {
      await requireCurrentSchema(databaseUrl);
    }
  } catch (e) {
    if ((e as Error).name === 'DatabaseUnavailableError')
      throw new StartupError(`cannot reach the API-key database: ${(e as Error).message}`);
    if (e instanceof SchemaError || e instanceof pg.DatabaseError) throw new StartupError(e.message);
    throw e;
  }
}

async function server(command: Extract<Command, { kind: 'server' }>, env: Env, io: Io): Promise<Outcome> {
  const { config } = command;
  // In a cluster the primary has done this before forking.
  if (config.databaseUrl !== undefined && !cluster.isWorker)
    await prepareDatabase(config.databaseUrl, command.migrate, io);
  if (config.workers > 1) {
    if (cluster.isWorker) {
      await runWorker(config);
      return { serving: new Promise<number>(() => undefined) };
    }
    // The primary checks keys and database before forking, inside the promise: its refusals are
    // reported like those of a single process, not as an unhandled rejection.
    return { serving: runPrimary(config, io).catch((e: unknown) => failure(io, env, e).exit) };
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
      case 'migrate':
        return await migrateCommand(command, io);
      case 'api-key-create':
        return await apiKeyCreate(command, io);
      case 'api-key-list':
        return await apiKeyList(command, io);
      case 'api-key-revoke':
        return await apiKeyRevoke(command, io);
      case 'server':
        return await server(command, env, io);
    }
  } catch (e) {
    return failure(io, env, e);
  }
}

/** Any error that reached the top, as one line and an exit code. */
function failure(io: Io, env: Env, e: unknown): { exit: number } {
  if (e instanceof ConfigError) return fail(io, 2, `${e.message} (see --help)`);
  if (e instanceof StartupError) return fail(io, 1, e.message);
  // A bug: still one line for the operator; the stack only when asked for.
  fail(io, 1, `unexpected error: ${e instanceof Error ? e.message : String(e)}`);
  if (/^(?:debug|trace)$/i.test(env['LOG_LEVEL'] ?? '') && e instanceof Error) io.stderr.write(`${e.stack}\n`);
  return { exit: 1 };
}
