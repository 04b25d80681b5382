import { parseArgs } from 'node:util';
import { buildStorage, storageDataDir } from './app.js';
import type { StorageOptions } from './settings.js';
import { resolveSettings } from './settings.js';

/** The `pg-storage` command line: parsing (pure, testable) and running. */

export const USAGE = `Usage: pg-storage --port <n> [--host <h>] [--data-dir <d>] [--pkg-url <u>] [--public-url <u>]
                  [--chunk-size <n>] [--email-attribute <t>]

A stand-in for Cryptify, PostGuard's file store, for development and tests. Notification e-mails are
not sent: GET /standin/outbox lists what would have been mailed.

  --port <n>              TCP port to listen on (0: any free port)
  --host <h>              address to bind (default 127.0.0.1)
  --data-dir <d>          where uploads are stored (default: a temporary directory, removed on exit)
  --pkg-url <u>           the PKG: its verifying key checks finalized uploads, and it validates API keys
                          (without it the sender is read from the header unverified)
  --public-url <u>        website base for the download links in mails (default https://postguard.eu)
  --chunk-size <n>        largest chunk per PUT in bytes (default 5000000)
  --email-attribute <t>   attribute type of the sender's e-mail (default pbdf.sidn-pbdf.email.email)
  -h, --help              show this help

Logs go to stderr; stdout gets one "listening on <url>" line.`;

export class CliError extends Error {
  override readonly name = 'CliError';
}

export type CliCommand = { kind: 'help' } | { kind: 'run'; port: number; host: string; options: StorageOptions };

export function parseCli(argv: readonly string[]): CliCommand {
  let values;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        port: { type: 'string' },
        host: { type: 'string' },
        'data-dir': { type: 'string' },
        'pkg-url': { type: 'string' },
        'public-url': { type: 'string' },
        'chunk-size': { type: 'string' },
        'email-attribute': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (e) {
    throw new CliError((e as Error).message.split('\n')[0] ?? 'invalid arguments');
  }
  if (values.help === true) return { kind: 'help' };
  if (values.port === undefined) throw new CliError('--port is required');
  if (!/^\d{1,5}$/.test(values.port) || Number(values.port) > 65_535) {
    throw new CliError(`--port must be a number from 0 to 65535, got ${JSON.stringify(values.port)}`);
  }
  const options: StorageOptions = { logger: { level: 'info', stream: process.stderr } };
  if (values['data-dir'] !== undefined) {
    if (values['data-dir'] === '') throw new CliError('--data-dir must not be empty');
    options.dataDir = values['data-dir'];
  }
  if (values['pkg-url'] !== undefined) options.pkgUrl = values['pkg-url'];
  if (values['public-url'] !== undefined) options.publicUrl = values['public-url'];
  if (values['email-attribute'] !== undefined) options.emailAttribute = values['email-attribute'];
  if (values['chunk-size'] !== undefined) {
    if (!/^\d{1,15}$/.test(values['chunk-size'])) throw new CliError('--chunk-size must be a positive integer');
    options.chunkSize = Number(values['chunk-size']);
  }
  try {
    resolveSettings(options);
  } catch (e) {
    throw new CliError((e as Error).message.replace(/^storage option (\w+)/, (_, name: string) => `--${kebab(name)}`));
  }
  return { kind: 'run', port: Number(values.port), host: values.host ?? '127.0.0.1', options };
}

const kebab = (name: string) => name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

/** Runs the command; resolves with the exit code (the server keeps running until a signal). */
export async function runCli(argv: readonly string[]): Promise<number> {
  let command: CliCommand;
  try {
    command = parseCli(argv);
  } catch (e) {
    if (!(e instanceof CliError)) throw e;
    process.stderr.write(`pg-storage: ${e.message} (see --help)\n`);
    return 2;
  }
  if (command.kind === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const app = buildStorage(command.options);
  const stop = (): void => {
    app.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    await app.listen({ port: command.port, host: command.host });
  } catch (e) {
    process.stderr.write(`pg-storage: ${(e as Error).message}\n`);
    await app.close().catch(() => undefined);
    return 1;
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : command.port;
  const host = command.host.includes(':') ? `[${command.host}]` : command.host;
  app.log.info({ dataDir: storageDataDir(app) }, 'storing uploads');
  process.stdout.write(`listening on http://${host}:${port}\n`);
  return 0;
}
