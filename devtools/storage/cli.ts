import { ConfigError, parseServerCli, runServerCli, type ServerCommand } from '../dev-server-cli.js';
import { buildStorage, storageDataDir } from './app.js';
import type { StorageOptions } from './settings.js';
import { resolveSettings } from './settings.js';

/** The `pg-storage` command line: parsing (pure, testable) and running. */

export const USAGE = `Usage: pg-storage --port <n> [--host <h>] [--data-dir <d>] [--pkg-url <u>] [--public-url <u>]
                  [--chunk-size <n>] [--email-attribute <t>] [--unfinalized-ttl-seconds <s>]
                  [--max-unfinalized-uploads <n>] [--strict]

A stand-in for Cryptify, PostGuard's file store, for development and tests. Notification e-mails are
not sent: GET /standin/outbox lists what would have been mailed.

  --port <n>              TCP port to listen on (0: any free port)
  --host <h>              address to bind (default 127.0.0.1)
  --data-dir <d>          where uploads are stored (default: a temporary directory, removed on exit)
  --pkg-url <u>           the PKG: its verifying key checks finalized uploads, and it validates API keys
                          (without it the sender is read from the header unverified)
  --public-url <u>        where mail links lead (default https://postguard.eu): an origin gives
                          <origin>/download?uuid=…&recipient=…, a page gets ?uuid=…&recipient=…
  --chunk-size <n>        largest chunk per PUT in bytes (default 5000000)
  --email-attribute <t>   attribute type of the sender's e-mail (default pbdf.sidn-pbdf.email.email)
  --unfinalized-ttl-seconds <s>
                          an upload not finalized this long after init is dropped, with its file
                          (default 86400)
  --max-unfinalized-uploads <n>
                          uploads begun and not finalized at once; init beyond answers 503 (default 1000)
  --strict                behave as Cryptify's current release: CORS exposes only cryptifytoken, and a
                          rolling-limit 413 does not tell the sender's usage (pg-dev runs strict)
  -h, --help              show this help

Logs go to stderr; stdout gets one "listening on <url>" line.`;

export { ConfigError };

export type CliCommand = ServerCommand<StorageOptions>;

export function parseCli(argv: readonly string[]): CliCommand {
  return parseServerCli(
    argv,
    {
      'data-dir': { type: 'string' },
      'pkg-url': { type: 'string' },
      'public-url': { type: 'string' },
      'chunk-size': { type: 'string' },
      'email-attribute': { type: 'string' },
      'unfinalized-ttl-seconds': { type: 'string' },
      'max-unfinalized-uploads': { type: 'string' },
      strict: { type: 'boolean' },
    },
    (values) => {
      const text = (name: string) => (typeof values[name] === 'string' ? (values[name] as string) : undefined);
      const options: StorageOptions = { logger: { level: 'info', stream: process.stderr } };
      const dataDir = text('data-dir');
      if (dataDir !== undefined) {
        if (dataDir === '') throw new ConfigError('--data-dir', 'must not be empty');
        options.dataDir = dataDir;
      }
      if (text('pkg-url') !== undefined) options.pkgUrl = text('pkg-url')!;
      if (text('public-url') !== undefined) options.publicUrl = text('public-url')!;
      if (text('email-attribute') !== undefined) options.emailAttribute = text('email-attribute')!;
      if (values['strict'] === true) options.strict = true;
      const chunkSize = text('chunk-size');
      if (chunkSize !== undefined) {
        if (!/^\d{1,15}$/.test(chunkSize)) throw new ConfigError('--chunk-size', 'must be a positive integer');
        options.chunkSize = Number(chunkSize);
      }
      for (const [flag, key] of [
        ['unfinalized-ttl-seconds', 'unfinalizedTtlSeconds'],
        ['max-unfinalized-uploads', 'maxUnfinalizedUploads'],
      ] as const) {
        const raw = text(flag);
        if (raw === undefined) continue;
        if (!/^\d{1,12}$/.test(raw)) throw new ConfigError(`--${flag}`, 'must be a positive integer');
        options[key] = Number(raw);
      }
      try {
        resolveSettings(options);
      } catch (e) {
        throw new ConfigError(
          undefined,
          (e as Error).message.replace(/^storage option (\w+)/, (_, name: string) => `--${kebab(name)}:`),
        );
      }
      return options;
    },
  );
}

const kebab = (name: string) => name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

/** Runs the command; resolves with the exit code (the server keeps running until a signal). */
export const runCli = (argv: readonly string[]): Promise<number> =>
  runServerCli('pg-storage', USAGE, argv, parseCli, buildStorage, (app) =>
    app.log.info({ dataDir: storageDataDir(app) }, 'storing uploads'),
  );
