import cluster from 'node:cluster';
import { access } from 'node:fs/promises';
import pg from 'pg';
import { generatePkgKeys } from 'postguard-ts/keys';
import { readPkgKeys, writePkgKeys, type PkgKeyPaths } from './keyfiles.js';
import { isPostGuardError } from 'postguard-ts';
import { commandActor, listAudit, pruneAudit, recordCommand, type AuditEntry, type AuditRow } from './audit.js';
import { ConfigError, parseCommand, resolveTime, type Command, type Env } from './config.js';
import { issueApiKey, listApiKeys, revokeApiKey, type ApiKeyListing } from './db.js';
import { apiKeyInfo, rotateApiKey, setBudgets, type ApiKeyInfo } from './key-controls.js';
import { migrate, migrationLabel, requireCurrentSchema, SchemaError } from './db/migrate.js';
import { KIND_NAMES, KINDS, KeySetError, addKeys, promoteKey, retireKey, type KeySet } from './keyset.js';
import { loadKeySet, writeKeySet } from './keyset-file.js';
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

/**
 * Every api-key command leaves a row in the audit trail: what it did, to which key, who ran it (the OS
 * user) and from where (the host, and the SSH client's address when there is one). A command whose
 * work is done but whose row cannot be written says so and exits 1.
 */
async function audited(
  databaseUrl: string,
  env: Env,
  io: Io,
  entry: Omit<AuditEntry, 'source' | 'osUser' | 'host'>,
  outcome: Outcome,
): Promise<Outcome> {
  const actor = commandActor(env);
  try {
    await recordCommand(databaseUrl, {
      ...entry,
      osUser: actor.osUser,
      host: actor.host,
      details: { ...actor.details, ...entry.details },
    });
  } catch (e) {
    return fail(io, 1, `done, but not recorded in the audit trail: ${(e as Error).message}`);
  }
  return outcome;
}

const apiKeyCreate = (command: Extract<Command, { kind: 'api-key-create' }>, env: Env, io: Io): Promise<Outcome> =>
  withCurrentSchema(command.databaseUrl, io, async () => {
    const issued = await issueApiKey(command.databaseUrl, { email: command.email, org: command.org });
    io.stdout.write(`${issued.key}\n`);
    io.stderr.write(`This key (id ${issued.id}) is shown only once; only its hash is stored.\n`);
    return audited(
      command.databaseUrl,
      env,
      io,
      {
        operation: 'api-key create',
        outcome: 'allowed',
        keyId: issued.id,
        orgId: issued.orgId,
        details: { org: command.org, email: command.email },
      },
      { exit: 0 },
    );
  });

const LISTING_HEADER = ['id', 'organisation', 'signing e-mail', 'status', 'created', 'expires', 'last used'];

// Tabs and newlines in a name would break the columns; nothing else needs escaping.
const columnText = (value: string) => value.replace(/[\t\r\n]/g, ' ');
const columnDate = (value: Date | null) => (value === null ? '-' : value.toISOString());

function listingLine(key: ApiKeyListing): string[] {
  return [
    key.id,
    columnText(key.organisation),
    columnText(key.signingEmail),
    key.status,
    columnDate(key.createdAt),
    columnDate(key.expiresAt),
    columnDate(key.lastUsedAt),
  ];
}

const apiKeyList = (command: Extract<Command, { kind: 'api-key-list' }>, env: Env, io: Io): Promise<Outcome> =>
  withCurrentSchema(command.databaseUrl, io, async () => {
    const keys = await listApiKeys(command.databaseUrl, command.org === undefined ? {} : { org: command.org });
    const lines = [LISTING_HEADER, ...keys.map(listingLine)].map((fields) => `${fields.join('\t')}\n`);
    io.stdout.write(lines.join(''));
    const details = command.org === undefined ? { keys: keys.length } : { org: command.org, keys: keys.length };
    return audited(
      command.databaseUrl,
      env,
      io,
      { operation: 'api-key list', outcome: 'allowed', details },
      { exit: 0 },
    );
  });

const apiKeyRevoke = (command: Extract<Command, { kind: 'api-key-revoke' }>, env: Env, io: Io): Promise<Outcome> =>
  withCurrentSchema(command.databaseUrl, io, async () => {
    const result = await revokeApiKey(command.databaseUrl, command.ref);
    const operation = 'api-key revoke';
    // Given by the key itself, the row names the key only by its id once found, never by the key.
    const asked = 'id' in command.ref ? { id: command.ref.id } : { byKey: true };
    switch (result.outcome) {
      case 'unknown':
        return audited(
          command.databaseUrl,
          env,
          io,
          { operation, outcome: 'refused', errorCode: 'UNKNOWN_KEY', details: asked },
          fail(io, 1, 'id' in command.ref ? `no API key with id ${command.ref.id}` : 'no such API key'),
        );
      case 'already-revoked':
      case 'revoked': {
        io.stdout.write(
          result.outcome === 'revoked'
            ? `revoked API key ${result.id}\n`
            : `API key ${result.id} was already revoked\n`,
        );
        const details = { ...asked, result: result.outcome };
        const entry = { operation, outcome: 'allowed' as const, keyId: result.id, orgId: result.orgId, details };
        return audited(command.databaseUrl, env, io, entry, { exit: 0 });
      }
    }
  });

const apiKeyRotate = (command: Extract<Command, { kind: 'api-key-rotate' }>, env: Env, io: Io): Promise<Outcome> =>
  withCurrentSchema(command.databaseUrl, io, async () => {
    const result = await rotateApiKey(command.databaseUrl, command.id, command.graceMs);
    const operation = 'api-key rotate';
    const graceSeconds = command.graceMs / 1000;
    switch (result.outcome) {
      case 'unknown':
      case 'not-active': {
        const [code, message] =
          result.outcome === 'unknown'
            ? ['UNKNOWN_KEY', `no API key with id ${command.id}`]
            : ['KEY_NOT_ACTIVE', `API key ${command.id} is ${result.status}; only a live key is rotated`];
        const entry = {
          operation,
          outcome: 'refused' as const,
          errorCode: code,
          keyId: command.id,
          details: { graceSeconds },
        };
        return audited(command.databaseUrl, env, io, entry, fail(io, 1, message));
      }
      case 'rotated':
        io.stdout.write(`${result.key}\n`);
        io.stderr.write(
          `New key id ${result.id}, shown only once. The old key ${result.oldId} signs until ${result.oldStopsAt.toISOString()}.\n`,
        );
        return audited(
          command.databaseUrl,
          env,
          io,
          {
            operation,
            outcome: 'allowed',
            keyId: result.oldId,
            orgId: result.orgId,
            details: { newKeyId: result.id, graceSeconds, oldStopsAt: result.oldStopsAt.toISOString() },
          },
          { exit: 0 },
        );
    }
  });

const apiKeyBudget = (command: Extract<Command, { kind: 'api-key-budget' }>, env: Env, io: Io): Promise<Outcome> =>
  withCurrentSchema(command.databaseUrl, io, async () => {
    const change = {
      ...(command.perHour === undefined ? {} : { perHour: command.perHour }),
      ...(command.perDay === undefined ? {} : { perDay: command.perDay }),
    };
    const result = await setBudgets(command.databaseUrl, command.id, change);
    if (result.outcome === 'unknown') {
      const entry = {
        operation: 'api-key budget',
        outcome: 'refused' as const,
        errorCode: 'UNKNOWN_KEY',
        keyId: command.id,
        details: change,
      };
      return audited(command.databaseUrl, env, io, entry, fail(io, 1, `no API key with id ${command.id}`));
    }
    const show = (n: number | null) => (n === null ? 'off' : String(n));
    io.stdout.write(`API key ${result.id}: budget per hour ${show(result.perHour)}, per day ${show(result.perDay)}\n`);
    const entry = {
      operation: 'api-key budget',
      outcome: 'allowed' as const,
      keyId: result.id,
      orgId: result.orgId,
      details: { perHour: result.perHour, perDay: result.perDay },
    };
    return audited(command.databaseUrl, env, io, entry, { exit: 0 });
  });

function infoText(info: ApiKeyInfo): string {
  const date = columnDate;
  const budget = (n: number | null) => (n === null ? 'off' : String(n));
  const counts = (c: { allowed: number; refused: number }) => `${c.allowed} allowed, ${c.refused} refused`;
  const lines: Array<[string, string]> = [
    ['id', info.id],
    ['status', info.status],
    [
      'organisation',
      `${columnText(info.organisation.name)} (${info.organisation.id}, ${info.organisation.status ?? 'null'})`,
    ],
    ['signing e-mail', columnText(info.organisation.signingEmail)],
    ['signs with', JSON.stringify(info.signingAttrs)],
    ['created', date(info.createdAt)],
    ['expires', date(info.expiresAt)],
    ['revoked', date(info.revokedAt)],
    ['last used', date(info.lastUsedAt)],
    ['requests, last hour', counts(info.counts.lastHour)],
    ['requests, last day', counts(info.counts.lastDay)],
    ['requests, retained', counts(info.counts.retained)],
    ['budget per hour', budget(info.budgets.perHour)],
    ['budget per day', budget(info.budgets.perDay)],
    ['budget shared with', info.budgets.sharedWith ?? '-'],
    ['rotated from', info.rotatedFrom ?? '-'],
    ['rotated to', info.rotatedTo.length === 0 ? '-' : info.rotatedTo.join(', ')],
  ];
  return lines.map(([k, v]) => `${k}:\t${v}\n`).join('');
}

const apiKeyInfoCommand = (command: Extract<Command, { kind: 'api-key-info' }>, env: Env, io: Io): Promise<Outcome> =>
  withCurrentSchema(command.databaseUrl, io, async () => {
    const info = await apiKeyInfo(command.databaseUrl, command.id);
    if (info === undefined) {
      const entry = {
        operation: 'api-key info',
        outcome: 'refused' as const,
        errorCode: 'UNKNOWN_KEY',
        keyId: command.id,
      };
      return audited(command.databaseUrl, env, io, entry, fail(io, 1, `no API key with id ${command.id}`));
    }
    io.stdout.write(command.json ? `${JSON.stringify(info)}\n` : infoText(info));
    const entry = {
      operation: 'api-key info',
      outcome: 'allowed' as const,
      keyId: info.id,
      orgId: info.organisation.id,
    };
    return audited(command.databaseUrl, env, io, entry, { exit: 0 });
  });

const AUDIT_HEADER = [
  'time',
  'source',
  'operation',
  'outcome',
  'code',
  'key id',
  'organisation id',
  'from',
  'user agent',
];

function auditLine(row: AuditRow): string[] {
  const from = row.source === 'http' ? row.clientAddress : `${row.osUser ?? '?'}@${row.host ?? '?'}`;
  return [
    row.at.toISOString(),
    row.source,
    row.operation,
    row.outcome,
    row.errorCode ?? '-',
    row.keyId ?? '-',
    row.orgId ?? '-',
    columnText(from ?? '-'),
    columnText(row.userAgent ?? '-'),
  ];
}

const auditList = (command: Extract<Command, { kind: 'audit-list' }>, io: Io): Promise<Outcome> =>
  withCurrentSchema(command.databaseUrl, io, async () => {
    const now = Date.now();
    const rows = await listAudit(command.databaseUrl, {
      since: resolveTime(command.since, now),
      until: command.until === undefined ? undefined : resolveTime(command.until, now),
      keyId: command.keyId,
      limit: command.limit,
    });
    const lines = command.json
      ? rows.map((row) => `${JSON.stringify(row)}\n`)
      : [AUDIT_HEADER, ...rows.map(auditLine)].map((fields) => `${fields.join('\t')}\n`);
    io.stdout.write(lines.join(''));
    return { exit: 0 };
  });

const auditPrune = (command: Extract<Command, { kind: 'audit-prune' }>, env: Env, io: Io): Promise<Outcome> =>
  withCurrentSchema(command.databaseUrl, io, async () => {
    const actor = commandActor(env);
    const pruned = await pruneAudit(command.databaseUrl, command.retentionDays, actor);
    io.stdout.write(`deleted ${pruned} audit rows older than ${command.retentionDays} days\n`);
    return { exit: 0 };
  });

const keyDate = (seconds: number | undefined) => (seconds === undefined ? '-' : new Date(seconds * 1000).toISOString());

function keySetText(set: KeySet, json: boolean): string {
  if (json) {
    const entries = (kind: 'ibe' | 'ibs') =>
      set[kind].map(({ id, status, publicKey, notBefore, notAfter, addedAt }) => ({
        id,
        status,
        publicKey,
        notBefore: notBefore ?? null,
        notAfter: notAfter ?? null,
        addedAt: addedAt ?? null,
      }));
    return `${JSON.stringify({ ibe: entries('ibe'), ibs: entries('ibs') })}\n`;
  }
  const lines = [['kind', 'id', 'status', 'not before', 'not after', 'added']];
  for (const kind of KINDS)
    for (const k of set[kind])
      lines.push([kind, k.id, k.status, keyDate(k.notBefore), keyDate(k.notAfter), keyDate(k.addedAt)]);
  return lines.map((fields) => `${fields.join('\t')}\n`).join('');
}

/**
 * `pg-pkg keys …`: the key set read (the key-set file, or the four key files as a one-key set),
 * changed and written back atomically. With a database every command leaves an audit row, as the
 * api-key commands do; a refusal (unknown id, retiring the primary) is recorded too.
 */
async function keysCommand(command: Extract<Command, { kind: 'keys' }>, env: Env, io: Io): Promise<Outcome> {
  const { action } = command;
  const operation = `keys ${action.op}`;
  const record = async (entry: Omit<AuditEntry, 'source' | 'osUser' | 'host' | 'operation'>, outcome: Outcome) =>
    command.databaseUrl === undefined
      ? outcome
      : audited(command.databaseUrl, env, io, { operation, ...entry }, outcome);
  const run = async (): Promise<Outcome> => {
    let loaded: Awaited<ReturnType<typeof loadKeySet>>;
    try {
      loaded = await loadKeySet(command.keySetPath, command.keyPaths);
    } catch (e) {
      const errno = e as NodeJS.ErrnoException;
      if (e instanceof KeySetError || isPostGuardError(e)) return fail(io, 1, `${command.keySetPath}: ${e.message}`);
      if (typeof errno.path === 'string') return fail(io, 1, `cannot read ${errno.path} (${errno.code})`);
      throw e;
    }
    const { set } = loaded;
    try {
      switch (action.op) {
        case 'list':
          io.stdout.write(keySetText(set, action.json));
          return await record({ outcome: 'allowed', details: { source: loaded.source } }, { exit: 0 });
        case 'add': {
          const now = Math.floor(Date.now() / 1000);
          const changed = addKeys(set, {
            kinds: action.kinds,
            now,
            notBefore: action.notBefore,
            notAfter: action.notAfter,
          });
          await writeKeySet(command.keySetPath, changed.set);
          for (const { kind, key } of changed.added)
            io.stdout.write(`added ${KIND_NAMES[kind]} key ${key.id} (decrypt-only)\n`);
          if (loaded.source === 'key-files')
            io.stderr.write(`The key set is now ${command.keySetPath}; the four key files are no longer read.\n`);
          io.stderr.write('Roll the key set out to every instance before promoting (server/README.md).\n');
          const ids = changed.added.map(({ key }) => key.id);
          return await record({ outcome: 'allowed', keyId: ids.join(','), details: { added: ids } }, { exit: 0 });
        }
        case 'promote': {
          const changed = promoteKey(set, action.id);
          if (changed.previous !== undefined) await writeKeySet(command.keySetPath, changed.set);
          io.stdout.write(
            changed.previous === undefined
              ? `key ${action.id} is already the primary ${KIND_NAMES[changed.kind]} key\n`
              : `key ${action.id} is the primary ${KIND_NAMES[changed.kind]} key; ${changed.previous} is decrypt-only\n`,
          );
          const details = { kind: changed.kind, previous: changed.previous ?? null };
          return await record({ outcome: 'allowed', keyId: action.id, details }, { exit: 0 });
        }
        case 'retire': {
          const changed = retireKey(set, action.id);
          if (changed.changed) await writeKeySet(command.keySetPath, changed.set);
          io.stdout.write(changed.changed ? `key ${action.id} is retired\n` : `key ${action.id} was already retired\n`);
          return await record({ outcome: 'allowed', keyId: action.id, details: { kind: changed.kind } }, { exit: 0 });
        }
      }
    } catch (e) {
      if (!(e instanceof KeySetError)) throw e;
      const keyId = 'id' in action ? action.id : null;
      return record({ outcome: 'refused', errorCode: e.code, keyId }, fail(io, 1, e.message));
    }
  };
  return command.databaseUrl === undefined ? run() : withCurrentSchema(command.databaseUrl, io, run);
}

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
        return await apiKeyCreate(command, env, io);
      case 'api-key-list':
        return await apiKeyList(command, env, io);
      case 'api-key-revoke':
        return await apiKeyRevoke(command, env, io);
      case 'api-key-rotate':
        return await apiKeyRotate(command, env, io);
      case 'api-key-budget':
        return await apiKeyBudget(command, env, io);
      case 'api-key-info':
        return await apiKeyInfoCommand(command, env, io);
      case 'audit-list':
        return await auditList(command, io);
      case 'audit-prune':
        return await auditPrune(command, env, io);
      case 'keys':
        return await keysCommand(command, env, io);
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
