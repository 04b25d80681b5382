import type { FastifyInstance } from 'fastify';
import { parseArgs, type ParseArgsConfig } from 'node:util';

/**
 * The shared shape of the development servers' command lines (pg-standin, pg-storage): strict flag
 * parsing with --help, --port and --host, one-line usage errors with exit code 2, a "listening on
 * <url>" line on stdout, and a clean exit on SIGINT or SIGTERM.
 */

/** A command-line setting is wrong: the same shape as pg-pkg's ConfigError, kept here so the dev tools need none of the PKG's code. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  constructor(
    /** The flag at fault, e.g. "--port"; undefined when the problem names it itself (the parser's own messages). */
    readonly setting: string | undefined,
    problem: string,
  ) {
    super(setting === undefined ? problem : `${setting}: ${problem}`);
  }
}

export type ServerCommand<O> = { kind: 'help' } | { kind: 'run'; port: number; host: string; options: O };

type Values = Record<string, string | boolean | undefined>;

/** Parses argv with the common flags plus `extra`; `toOptions` reads the server's own flags. */
export function parseServerCli<O>(
  argv: readonly string[],
  extra: NonNullable<ParseArgsConfig['options']>,
  toOptions: (values: Values) => O,
): ServerCommand<O> {
  let values: Values;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: { port: { type: 'string' }, host: { type: 'string' }, help: { type: 'boolean', short: 'h' }, ...extra },
    }));
  } catch (e) {
    throw new ConfigError(undefined, (e as Error).message.split('\n')[0] ?? 'invalid arguments');
  }
  if (values.help === true) return { kind: 'help' };
  const port = values.port;
  if (typeof port !== 'string') throw new ConfigError('--port', 'is required');
  if (!/^\d{1,5}$/.test(port) || Number(port) > 65_535) {
    throw new ConfigError('--port', `must be a number from 0 to 65535, got ${JSON.stringify(port)}`);
  }
  const host = typeof values.host === 'string' ? values.host : '127.0.0.1';
  return { kind: 'run', port: Number(port), host, options: toOptions(values) };
}

/** Runs a parsed command; resolves with the exit code (the server keeps running until a signal). */
export async function runServerCli<O>(
  name: string,
  usage: string,
  argv: readonly string[],
  parse: (argv: readonly string[]) => ServerCommand<O>,
  build: (options: O) => FastifyInstance,
  announce?: (app: FastifyInstance) => void,
): Promise<number> {
  let command: ServerCommand<O>;
  try {
    command = parse(argv);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    process.stderr.write(`${name}: ${e.message} (see --help)\n`);
    return 2;
  }
  if (command.kind === 'help') {
    process.stdout.write(`${usage}\n`);
    return 0;
  }
  const app = build(command.options);
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
    process.stderr.write(`${name}: ${(e as Error).message}\n`);
    await app.close().catch(() => undefined);
    return 1;
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : command.port;
  const host = command.host.includes(':') ? `[${command.host}]` : command.host;
  announce?.(app);
  process.stdout.write(`listening on http://${host}:${port}\n`);
  return 0;
}
