import { parseArgs } from 'node:util';
import { ConfigError } from '../dev-server-cli.js';
import { StartupError, startDevStack, type DevStack, type DevStackOptions } from './stack.js';

/** The `pg-dev` command line: parsing (pure, testable) and running. */

export const USAGE = `Usage: pg-dev [--host <h>] [--pkg-port <n>] [--standin-port <n>] [--storage-port <n>]
              [--key-dir <d>] [--data-dir <d>] [--allowed-origins <list>] [--public-url <url>]

A PostGuard development stack on this machine, for trying it out: the PKG (pg-pkg server, from
@postguard-ts/pkg) with its master keys, the stand-in Yivi server with its simulated wallet page,
and the Cryptify stand-in (pg-storage) checking uploads against that PKG. Not for production.

  --host <h>               address all three bind (default 127.0.0.1)
  --pkg-port <n>           the PKG's port (default 8080; 0: any free port)
  --standin-port <n>       the stand-in Yivi server's port (default 8088)
  --storage-port <n>       the storage stand-in's port (default 8090, as npm start in the repository)
  --key-dir <d>            the PKG's master keys and the stand-in's JWT key: created there when missing,
                           reused when present (default: a fresh temporary directory, removed on exit)
  --data-dir <d>           where uploads are stored (default: a temporary directory, removed on exit)
  --allowed-origins <list> comma-separated origins the PKG allows by CORS (default "*")
  --public-url <url>       where the storage stand-in's mails link: your app's receive page (the links
                           add ?uuid=…&recipient=…) or an origin (<origin>/download?…, as Cryptify's);
                           default: the storage stand-in's own page, /standin/receive, which says
                           how to open the file
  -h, --help               show this help

The PKG's own environment variables (LOG_LEVEL, PKG_RATELIMIT_*, DATABASE_URL, ...) reach it.
API keys (an organisation signing as sender, the SDK's sign.apiKey) need DATABASE_URL: run
pg-pkg migrate -d <url> once, start pg-dev with DATABASE_URL=<url>, then pg-pkg api-key create.
stdout gets the URLs; logs go to stderr. Ctrl-C (SIGINT) or SIGTERM stops everything.`;

export type CliCommand = { kind: 'help' } | { kind: 'run'; options: DevStackOptions };

function port(flag: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!/^\d{1,5}$/.test(value) || Number(value) > 65_535) {
    throw new ConfigError(flag, `must be a number from 0 to 65535, got ${JSON.stringify(value)}`);
  }
  return Number(value);
}

function nonEmpty(flag: string, value: string | undefined): string | undefined {
  if (value === '') throw new ConfigError(flag, 'must not be empty');
  return value;
}

function httpUrl(flag: string, value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(flag, `must be an absolute http(s) URL, got ${JSON.stringify(value)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new ConfigError(flag, `must be an absolute http(s) URL, got ${JSON.stringify(value)}`);
  return url.href;
}

export function parseCli(argv: readonly string[]): CliCommand {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        host: { type: 'string' },
        'pkg-port': { type: 'string' },
        'standin-port': { type: 'string' },
        'storage-port': { type: 'string' },
        'key-dir': { type: 'string' },
        'data-dir': { type: 'string' },
        'allowed-origins': { type: 'string' },
        'public-url': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (e) {
    throw new ConfigError(undefined, (e as Error).message.split('\n')[0] ?? 'invalid arguments');
  }
  if (values['help'] === true) return { kind: 'help' };
  const text = (name: string) => values[name] as string | undefined;
  const origins = nonEmpty('--allowed-origins', text('allowed-origins'));
  const keyDir = nonEmpty('--key-dir', text('key-dir'));
  const dataDir = nonEmpty('--data-dir', text('data-dir'));
  const publicUrl = httpUrl('--public-url', text('public-url'));
  return {
    kind: 'run',
    options: {
      host: nonEmpty('--host', text('host')) ?? '127.0.0.1',
      pkgPort: port('--pkg-port', text('pkg-port'), 8080),
      standinPort: port('--standin-port', text('standin-port'), 8088),
      storagePort: port('--storage-port', text('storage-port'), 8090),
      allowedOrigins: origins === undefined ? ['*'] : origins.split(',').map((o) => o.trim()),
      ...(keyDir === undefined ? {} : { keyDir }),
      ...(dataDir === undefined ? {} : { dataDir }),
      ...(publicUrl === undefined ? {} : { publicUrl }),
    },
  };
}

/** What pg-dev prints once everything listens. */
export function banner(stack: DevStack): string {
  return [
    'postguard-ts development stack (not for production)',
    `  PKG                ${stack.pkgUrl}   (GET /v2/parameters, /health)`,
    `  stand-in Yivi      ${stack.standinUrl}`,
    `  simulated wallet   ${stack.walletUrl}`,
    `  storage stand-in   ${stack.storageUrl}   (mails it would send: GET /standin/outbox)`,
    `  mail links to      ${stack.publicUrl}${stack.publicUrl.endsWith('/standin/receive') ? "   (pg-dev's page; --public-url <your receive page>)" : ''}`,
    `  keys               ${stack.keyDir}${stack.temporaryKeys ? '   (temporary: removed on exit)' : ''}`,
    stack.apiKeys
      ? '  API keys           on (DATABASE_URL): pg-pkg api-key create -d <DATABASE_URL> --email <sender> --org <name>'
      : '  API keys           off: pg-pkg migrate -d <postgres URL>, then start pg-dev with DATABASE_URL=<that URL>',
    'Ctrl-C stops everything.',
    '',
  ].join('\n');
}

/**
 * Runs the command; resolves with the exit code once it has started (then the stack runs until a
 * signal, or until the PKG process ends, which stops the rest with exit code 1).
 */
export async function runCli(argv: readonly string[], overrides: Partial<DevStackOptions> = {}): Promise<number> {
  let command: CliCommand;
  try {
    command = parseCli(argv);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    process.stderr.write(`pg-dev: ${e.message} (see --help)\n`);
    return 2;
  }
  if (command.kind === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  let stack: DevStack;
  try {
    stack = await startDevStack({ ...command.options, ...overrides });
  } catch (e) {
    if (!(e instanceof StartupError)) throw e;
    process.stderr.write(`pg-dev: ${e.message}\n`);
    return 1;
  }
  process.stdout.write(banner(stack));
  let stopping = false;
  const stop = (code: number): void => {
    if (stopping) return;
    stopping = true;
    stack.close().then(
      () => process.exit(code),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', () => stop(0));
  process.once('SIGTERM', () => stop(0));
  process.once('SIGHUP', () => stop(0)); // the terminal closed: leave no PKG process behind
  void stack.pkgExited.then((how) => {
    if (stopping) return;
    process.stderr.write(`pg-dev: the PKG stopped (${how}); stopping the rest\n`);
    stop(1);
  });
  return 0;
}
