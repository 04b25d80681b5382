import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readPkgKeys, writePkgKeys } from './keyfiles.js';
import pg from 'pg';
import { createApiKeyStore } from './db.js';
import { loadMigrations, migrationLabel, MIGRATIONS_TABLE, schemaState } from './db/migrate.js';
import { closedPort, createTestSchema, type TestSchema } from './db/testing.js';
import { startStandin, type RunningStandin } from '../devtools/standin/testing.js';
import { testKeys } from './testing.js';
import { bundledEntry } from '../test/node-bundle.js';

/**
 * pg-pkg as a process: exit codes, one-line errors, key files, a running server that stops cleanly on
 * SIGTERM, and a node:cluster whose workers share one set of rate-limit buckets and one /metrics.
 */

const MAIN = fileURLToPath(new URL('./main.ts', import.meta.url));
// Bundled once (test/node-bundle.ts) beside server/db/migrate.ts, which reads ./migrations/ next to itself.
const ENTRY = bundledEntry(MAIN, fileURLToPath(new URL('./db/', import.meta.url)));
const EMAIL = 'irma-demo.sidn-pbdf.email.email';

/** Working directory of the server runs: holds a set of key files under pg-pkg's default names. */
let dir: string;
let yivi: RunningStandin;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'pg-pkg-cli-'));
  const at = (name: string) => join(dir, name);
  await writePkgKeys(
    {
      ibePublic: at('pkg_ibe.pub'),
      ibeSecret: at('pkg_ibe.sec'),
      ibsPublic: at('pkg_ibs.pub'),
      ibsSecret: at('pkg_ibs.sec'),
    },
    testKeys(),
  );
  yivi = await startStandin({ sweepIntervalMs: 0 });
});

afterAll(async () => {
  yivi.app.server.closeAllConnections();
  await yivi?.close();
  await rm(dir, { recursive: true, force: true });
});

/** Environment without the PKG's own variables of the machine running the tests. */
function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!/^(?:PKG_|DATABASE_URL|IDENTITY_SERVER|IRMA_TOKEN|RUST_LOG|LOG_LEVEL)/.test(k)) env[k] = v;
  }
  return { ...env, ...extra };
}

function start(args: string[], env: Record<string, string> = {}, cwd = dir): ChildProcess {
  return spawn(process.execPath, [ENTRY, ...args], {
    cwd,
    env: cleanEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

interface Finished {
  code: number | null;
  stdout: string;
  stderr: string;
}

function finish(child: ChildProcess): Promise<Finished> {
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

const run = (args: string[], env: Record<string, string> = {}, cwd = dir): Promise<Finished> =>
  finish(start(args, env, cwd));

/** Waits for the "listening on <url>" line; returns the URL and the rest of the line. */
function listening(child: ChildProcess, timeoutMs = 30_000): Promise<{ url: string; rest: string }> {
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`no listening line in time; stderr: ${err}`)), timeoutMs);
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const match = /pg-pkg listening on (http:\/\/\S+)([^\S\n].*)?\n/.exec(out);
      if (match) {
        clearTimeout(timer);
        resolve({ url: match[1]!, rest: match[2] ?? '' });
      }
    });
    child.on('close', (code) => reject(new Error(`exited ${code} before listening; stderr: ${err}`)));
  });
}

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) resolve(child.exitCode);
    else child.once('exit', (code) => resolve(code));
  });
}

describe('configuration errors', () => {
  it('exit 2 with one line on stderr naming the setting', async () => {
    for (const [args, env, named] of [
      [['server'], {}, 'PKG_ALLOWED_ORIGINS'],
      [['server', '--port', 'x'], { PKG_ALLOWED_ORIGINS: '*' }, '--port'],
      [['server'], { PKG_ALLOWED_ORIGINS: '*', PKG_RATELIMIT_BURST: '0' }, 'PKG_RATELIMIT_BURST'],
      [['server', '--allowed-origins', '*', '--ibe-public-path', 'missing.pub'], {}, '--ibe-public-path'],
      // A cluster primary refuses the same way (it checks before forking, inside its promise).
      [
        ['server', '--allowed-origins', '*', '--workers', '2', '--ibe-public-path', 'missing.pub'],
        {},
        '--ibe-public-path',
      ],
      [['launch'], {}, 'command'],
    ] as Array<[string[], Record<string, string>, string]>) {
      const result = await run(args, env);
      expect(result.code).toBe(2);
      expect(result.stdout).toBe('');
      const lines = result.stderr.trimEnd().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/^pg-pkg: /);
      expect(lines[0]).toContain(named);
    }
  });

  it('--help exits 0', async () => {
    const result = await run(['server', '--help']);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('--allowed-origins');
  });
});

describe('gen', () => {
  it('writes the four key files with mode 0600 and refuses to overwrite them', async () => {
    const genDir = await mkdtemp(join(dir, 'gen-'));
    const first = await run(['gen'], {}, genDir);
    expect(first.code).toBe(0);
    for (const name of ['pkg_ibe.pub', 'pkg_ibe.sec', 'pkg_ibs.pub', 'pkg_ibs.sec']) {
      expect((await stat(join(genDir, name))).mode & 0o777).toBe(0o600);
    }
    const keys = await readPkgKeys({
      ibePublic: join(genDir, 'pkg_ibe.pub'),
      ibeSecret: join(genDir, 'pkg_ibe.sec'),
      ibsPublic: join(genDir, 'pkg_ibs.pub'),
      ibsSecret: join(genDir, 'pkg_ibs.sec'),
    });
    expect(keys.mpk).toHaveLength(896);
    const before = await readFile(join(genDir, 'pkg_ibe.sec'));
    const second = await run(['gen'], {}, genDir);
    expect(second.code).toBe(1);
    expect(second.stderr).toMatch(/already exists; refusing to overwrite/);
    expect(await readFile(join(genDir, 'pkg_ibe.sec'))).toEqual(before);
  });

  it('--if-missing keeps a complete set (exit 0), writes a new one where none is, refuses a partial one', async () => {
    const genDir = await mkdtemp(join(dir, 'gen-'));
    const first = await run(['gen', '--if-missing'], {}, genDir);
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(/^Generated the PKG master keys/);
    const before = await readFile(join(genDir, 'pkg_ibe.sec'));
    const second = await run(['gen', '--if-missing'], {}, genDir);
    expect(second).toMatchObject({ code: 0, stderr: '' });
    expect(second.stdout).toMatch(/exist; keeping them/);
    expect(await readFile(join(genDir, 'pkg_ibe.sec'))).toEqual(before);

    await rm(join(genDir, 'pkg_ibs.pub'));
    const partial = await run(['gen', '--if-missing'], {}, genDir);
    expect(partial.code).toBe(1);
    expect(partial.stderr).toMatch(
      /^pg-pkg: \.\/pkg_ibs\.pub missing beside existing key files; refusing to write a partial set\n$/,
    );
    expect(await readFile(join(genDir, 'pkg_ibe.sec'))).toEqual(before);
  });

  it('takes the paths from the flags', async () => {
    const genDir = await mkdtemp(join(dir, 'gen-'));
    const paths = [
      '--ibe-public-path',
      'a',
      '--ibe-secret-path',
      'b',
      '--ibs-public-path',
      'c',
      '--ibs-secret-path',
      'd',
    ];
    expect((await run(['gen', ...paths], {}, genDir)).code).toBe(0);
    const keys = await readPkgKeys({
      ibePublic: join(genDir, 'a'),
      ibeSecret: join(genDir, 'b'),
      ibsPublic: join(genDir, 'c'),
      ibsSecret: join(genDir, 'd'),
    });
    expect(keys.vk).toHaveLength(44);
  });
});

describe('server', () => {
  it('serves, and stops cleanly on SIGTERM', async () => {
    const child = start([
      'server',
      '-H',
      '127.0.0.1',
      '-p',
      '0',
      '-i',
      yivi.url,
      '--allowed-origins',
      'https://app.example',
    ]);
    const { url } = await listening(child);
    const health = await fetch(`${url}/health`);
    expect(await health.text()).toBe('OK');
    const params = await (await fetch(`${url}/v2/parameters`)).json();
    expect(params.publicKey).toHaveLength(896);
    const session = await fetch(`${url}/v2/request/start`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ con: [{ t: EMAIL }] }),
    });
    expect(session.status).toBe(200);
    child.kill('SIGTERM');
    expect(await exited(child)).toBe(0);
  });

  it('refuses to start (exit 1) when its database cannot be reached', async () => {
    const port = await closedPort();
    const result = await run([
      'server',
      '--allowed-origins',
      '*',
      '-p',
      '0',
      '-d',
      `postgres://postgres@127.0.0.1:${port}/test`,
    ]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/pg-pkg: cannot reach the API-key database/);
  });

  it('--workers 2: one port, rate limits across workers, metrics summed over workers', async () => {
    const child = start(
      ['server', '-H', '127.0.0.1', '-p', '0', '-i', yivi.url, '--allowed-origins', '*', '--workers', '2'],
      { PKG_RATELIMIT_SENSITIVE_BURST: '4', PKG_RATELIMIT_SENSITIVE_PER_SECOND: '1', LOG_LEVEL: 'warn' },
    );
    try {
      const { url: base, rest } = await listening(child, 60_000);
      expect(rest).toBe(' (2 workers)');
      // Fresh connections: the primary hands them to the workers in turn (node:cluster round-robin).
      const statuses: number[] = [];
      for (let i = 0; i < 8; i++) {
        const response = await fetch(`${base}/v2/irma/key/1`, { headers: { connection: 'close' } });
        await response.arrayBuffer();
        statuses.push(response.status);
      }
      // Per worker the burst would allow 8; across the cluster it is 4.
      expect(statuses.filter((s) => s === 401)).toHaveLength(4);
      expect(statuses.filter((s) => s === 429)).toHaveLength(4);

      for (let i = 0; i < 6; i++)
        await (await fetch(`${base}/v2/sign/parameters`, { headers: { connection: 'close' } })).arrayBuffer();
      const text = await (await fetch(`${base}/metrics`, { headers: { connection: 'close' } })).text();
      expect(text).toMatch(/postguard_clients\{path="\/v2\/sign\/parameters",[^}]*status="200"\} 6\b/);
      expect(text).toMatch(/postguard_clients\{path="\/v2\/irma\/key\/:timestamp",[^}]*status="401"\} 4\b/);
    } finally {
      child.kill('SIGTERM');
      expect(await exited(child)).toBe(0);
    }
  });
});

describe('api-key create', () => {
  let schema: TestSchema;

  beforeAll(async () => {
    schema = await createTestSchema();
  });

  afterAll(async () => {
    await schema?.drop();
  });

  it('prints a new key once; the PKG then knows it', async () => {
    const result = await run(['api-key', 'create', '--email', 'sender@example.org', '--org', 'Example BV'], {
      DATABASE_URL: schema.url,
    });
    expect(result.code).toBe(0);
    const key = result.stdout.trim();
    expect(key).toMatch(/^PG-[\w-]{43}$/);
    const store = createApiKeyStore(schema.url, { emailAttribute: EMAIL });
    try {
      expect((await store.lookup(key))?.publicAttributes).toEqual([{ t: EMAIL, v: 'sender@example.org' }]);
    } finally {
      await store.close();
    }
  });

  it('an unreachable database is exit 1', async () => {
    const port = await closedPort();
    const result = await run([
      'api-key',
      'create',
      '--email',
      'a@example.org',
      '--org',
      'X',
      '-d',
      `postgres://postgres@127.0.0.1:${port}/test`,
    ]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^pg-pkg: /);
  });
});

/** The single `pg-pkg: …` line on stderr, after checking there is nothing else (no stack). */
function oneLine(result: Finished): string {
  const lines = result.stderr.trimEnd().split('\n');
  expect(lines).toHaveLength(1);
  expect(result.stderr).not.toMatch(/^[ \t]+at /m);
  expect(lines[0]).toMatch(/^pg-pkg: /);
  return lines[0]!;
}

describe('migrate, and databases without the schema', () => {
  const schemas: TestSchema[] = [];
  const fresh = async (migrated: boolean) => {
    const schema = await createTestSchema(undefined, { migrated });
    schemas.push(schema);
    return schema.url;
  };

  afterAll(async () => {
    await Promise.all(schemas.map((s) => s.drop()));
  });

  it('api-key create, list and revoke on an unmigrated database: one line naming the fix, exit 1', async () => {
    const url = await fresh(false);
    for (const args of [
      ['api-key', 'create', '--email', 'a@example.org', '--org', 'X'],
      ['api-key', 'list'],
      ['api-key', 'revoke', '--key', 'PG-whatever'],
    ]) {
      const result = await run(args, { DATABASE_URL: url });
      expect(result.code).toBe(1);
      expect(result.stdout).toBe('');
      expect(oneLine(result)).toBe('pg-pkg: database schema missing: run `pg-pkg migrate`');
    }
  });

  it('migrate, then create, list and revoke a key; migrating again is a no-op', async () => {
    const url = await fresh(false);
    const migrated = await run(['migrate', '-d', url]);
    expect(migrated.code).toBe(0);
    const migrations = await loadMigrations();
    const latest = migrations.length;
    expect(migrated.stdout).toBe(
      `${migrations.map((m) => `applied ${migrationLabel(m)}\n`).join('')}database schema is at version ${latest}\n`,
    );
    const again = await run(['migrate'], { DATABASE_URL: url });
    expect(again.code).toBe(0);
    expect(again.stdout).toBe(`database schema is up to date (version ${latest})\n`);

    const created = await run(['api-key', 'create', '--email', 'sender@example.org', '--org', 'Example BV', '-d', url]);
    expect(created.code).toBe(0);
    const key = created.stdout.trim();
    expect(key).toMatch(/^PG-[\w-]{43}$/);

    const listed = await run(['api-key', 'list'], { DATABASE_URL: url });
    expect(listed.code).toBe(0);
    const [header, row, ...rest] = listed.stdout.trimEnd().split('\n');
    expect(header).toBe('id\torganisation\tsigning e-mail\tstatus\tcreated\texpires\tlast used');
    expect(rest).toEqual([]);
    const fields = row!.split('\t');
    expect(fields.slice(1, 4)).toEqual(['Example BV', 'sender@example.org', 'active']);
    expect(listed.stdout).not.toContain(key.slice(3));

    const revoked = await run(['api-key', 'revoke', '--id', fields[0]!], { DATABASE_URL: url });
    expect(revoked).toMatchObject({ code: 0, stdout: `revoked API key ${fields[0]}\n` });
    expect((await run(['api-key', 'list', '--org', 'Example BV'], { DATABASE_URL: url })).stdout).toContain(
      '\trevoked\t',
    );
    const store = createApiKeyStore(url, { emailAttribute: EMAIL });
    try {
      expect(await store.lookup(key)).toBeUndefined();
    } finally {
      await store.close();
    }
    const unknown = await run(['api-key', 'revoke', '--id', '00000000-0000-0000-0000-000000000000'], {
      DATABASE_URL: url,
    });
    expect(unknown.code).toBe(1);
    expect(oneLine(unknown)).toBe('pg-pkg: no API key with id 00000000-0000-0000-0000-000000000000');
  });

  it('server refuses an unmigrated database: one line, exit 1, nothing listening', async () => {
    const url = await fresh(false);
    const result = await run([
      'server',
      '-H',
      '127.0.0.1',
      '-p',
      '0',
      '-i',
      yivi.url,
      '--allowed-origins',
      '*',
      '-d',
      url,
    ]);
    expect(result.code).toBe(1);
    expect(result.stdout).not.toContain('listening');
    expect(oneLine(result)).toBe('pg-pkg: database schema missing: run `pg-pkg migrate`');
  });

  it('server refuses a database whose schema is newer than it knows', async () => {
    const url = await fresh(true);
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query(`INSERT INTO ${MIGRATIONS_TABLE} (version, name) VALUES (9999, 'from_the_future')`);
    await client.end();
    const result = await run([
      'server',
      '-H',
      '127.0.0.1',
      '-p',
      '0',
      '-i',
      yivi.url,
      '--allowed-origins',
      '*',
      '-d',
      url,
      '--migrate',
    ]);
    expect(result.code).toBe(1);
    expect(oneLine(result)).toMatch(
      /^pg-pkg: database schema is at version 9999, newer than this pg-pkg knows \(\d+\): upgrade pg-pkg$/,
    );
    const migrate = await run(['migrate', '-d', url]);
    expect(migrate.code).toBe(1);
    expect(oneLine(migrate)).toContain('newer than this pg-pkg knows');
  });

  it('server with PKG_MIGRATE=true migrates an empty database at start, then serves', async () => {
    const url = await fresh(false);
    const child = start(['server', '-H', '127.0.0.1', '-p', '0', '-i', yivi.url, '--allowed-origins', '*'], {
      DATABASE_URL: url,
      PKG_MIGRATE: 'true',
    });
    try {
      const { url: base } = await listening(child);
      expect(await schemaState(url)).toMatchObject({ kind: 'current' });
      const validate = await fetch(`${base}/v2/api-key/validate`, { headers: { authorization: 'Bearer PG-unknown' } });
      expect(validate.status).toBe(401);
    } finally {
      child.kill('SIGTERM');
      expect(await exited(child)).toBe(0);
    }
  });
});
