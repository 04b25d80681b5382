import { parseArgs } from 'node:util';
import { buildStandin } from './app.js';
import type { StandinOptions } from './settings.js';
import { normalizePublicUrl } from './settings.js';

/** The `pg-standin` command line: parsing (pure, testable) and running. */

export const USAGE = `Usage: pg-standin --port <n> [--host <h>] [--public-url <u>] [--token <t>] [--key-path <p>]

A local stand-in for the Yivi (IRMA) server, for development, demos and tests.

  --port <n>         TCP port to listen on (0: any free port)
  --host <h>         address to bind (default 127.0.0.1; 0.0.0.0 to reach it from a phone)
  --public-url <u>   base URL wallets and browsers use to reach this server (default: the Host of each
                     POST /session); session pointers become <u>/irma/session/<token>
  --token <t>        requestor token: POST /session then needs "Authorization: <t>" (default: no auth)
  --key-path <p>     RSA key for result JWTs, created on first use (default $STANDIN_KEY_PATH,
                     else .keys/standin-jwt.pem)
  -h, --help         show this help

Wallet page: <url>/standin/wallet. Logs go to stderr; stdout gets one "listening on <url>" line.`;

export class CliError extends Error {
  override readonly name = 'CliError';
}

export type CliCommand =
  | { kind: 'help' }
  | { kind: 'run'; port: number; host: string; options: StandinOptions };

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
        'public-url': { type: 'string' },
        token: { type: 'string' },
        'key-path': { type: 'string' },
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
  const options: StandinOptions = { logger: { level: 'info', stream: process.stderr } };
  if (values['public-url'] !== undefined) {
    try {
      normalizePublicUrl(values['public-url']);
    } catch (e) {
      throw new CliError((e as Error).message);
    }
    options.publicUrl = values['public-url'];
  }
  if (values.token !== undefined) {
    if (values.token === '') throw new CliError('--token must not be empty');
    options.requestorToken = values.token;
  }
  if (values['key-path'] !== undefined) options.keyPath = values['key-path'];
  return { kind: 'run', port: Number(values.port), host: values.host ?? '127.0.0.1', options };
}

/** Runs the command; resolves with the exit code (the server itself keeps running until a signal). */
export async function runCli(argv: readonly string[]): Promise<number> {
  let command: CliCommand;
  try {
    command = parseCli(argv);
  } catch (e) {
    if (!(e instanceof CliError)) throw e;
    process.stderr.write(`pg-standin: ${e.message} (see --help)\n`);
    return 2;
  }
  if (command.kind === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const app = buildStandin(command.options);
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
    process.stderr.write(`pg-standin: ${(e as Error).message}\n`);
    return 1;
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : command.port;
  const host = command.host.includes(':') ? `[${command.host}]` : command.host;
  process.stdout.write(`listening on http://${host}:${port}\n`);
  return 0;
}
