import { ConfigError, parseServerCli, runServerCli, type ServerCommand } from '../dev-server-cli.js';
import { buildStandin } from './app.js';
import type { StandinOptions } from './settings.js';
import { normalizePublicUrl } from './settings.js';

/** The `pg-standin` command line: parsing (pure, testable) and running. */

export const USAGE = `Usage: pg-standin --port <n> [--host <h>] [--public-url <u>] [--token <t>] [--key-path <p>] [--max-sessions <n>]

A local stand-in for the Yivi (IRMA) server, for development, demos and tests.

  --port <n>         TCP port to listen on (0: any free port)
  --host <h>         address to bind (default 127.0.0.1; 0.0.0.0 to reach it from a phone)
  --public-url <u>   base URL wallets and browsers use to reach this server (default: the Host of each
                     POST /session); session pointers become <u>/irma/session/<token>
  --token <t>        requestor token: POST /session then needs "Authorization: <t>" (default: no auth)
  --key-path <p>     RSA key for result JWTs, created on first use (default $STANDIN_KEY_PATH,
                     else .keys/standin-jwt.pem)
  --max-sessions <n> sessions in progress at once; POST /session beyond it fails (default 1000)
  -h, --help         show this help

Wallet page: <url>/standin/wallet. Logs go to stderr; stdout gets one "listening on <url>" line.`;

export { ConfigError };

export type CliCommand = ServerCommand<StandinOptions>;

export function parseCli(argv: readonly string[]): CliCommand {
  return parseServerCli(
    argv,
    {
      'public-url': { type: 'string' },
      token: { type: 'string' },
      'key-path': { type: 'string' },
      'max-sessions': { type: 'string' },
    },
    (values) => {
      const options: StandinOptions = { logger: { level: 'info', stream: process.stderr } };
      const publicUrl = values['public-url'];
      if (typeof publicUrl === 'string') {
        try {
          normalizePublicUrl(publicUrl);
        } catch (e) {
          throw new ConfigError('--public-url', (e as Error).message);
        }
        options.publicUrl = publicUrl;
      }
      const token = values.token;
      if (typeof token === 'string') {
        if (token === '') throw new ConfigError('--token', 'must not be empty');
        options.requestorToken = token;
      }
      if (typeof values['key-path'] === 'string') options.keyPath = values['key-path'];
      const maxSessions = values['max-sessions'];
      if (typeof maxSessions === 'string') {
        if (!/^\d{1,9}$/.test(maxSessions) || Number(maxSessions) < 1)
          throw new ConfigError('--max-sessions', `must be a positive integer, got ${JSON.stringify(maxSessions)}`);
        options.maxPendingSessions = Number(maxSessions);
      }
      return options;
    },
  );
}

/** Runs the command; resolves with the exit code (the server itself keeps running until a signal). */
export const runCli = (argv: readonly string[]): Promise<number> =>
  runServerCli('pg-standin', USAGE, argv, parseCli, buildStandin);
