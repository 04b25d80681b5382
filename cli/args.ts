import { readFileSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { usage } from './exit.js';
import { DEFAULT_PKG_URL } from './pkg.js';
import { parsePointerSink, type Output, type PointerSink } from './terminal.js';

/** The process around a command, passed in so tests can run commands in-process too. */
export interface CliIo {
  stdin: Readable & { isTTY?: boolean };
  stdout: Output;
  stderr: Output;
  env: Readonly<Record<string, string | undefined>>;
  /** Fires on SIGINT / SIGTERM: the command stops, removes partial output and cancels its session. */
  signal: AbortSignal;
  version: string;
}

type Options = NonNullable<ParseArgsConfig['options']>;

/** Flags every command takes. */
export const COMMON_OPTIONS = {
  pkg: { type: 'string', short: 'p' },
  output: { type: 'string', short: 'o' },
  force: { type: 'boolean', short: 'f' },
  progress: { type: 'boolean' },
  json: { type: 'boolean' },
  'qr-json': { type: 'string' },
  'no-qr': { type: 'boolean' },
  'session-timeout': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  // Hidden: prints the peak resident set size at exit (memory tests).
  'report-max-rss': { type: 'boolean' },
} as const satisfies Options;

export const COMMON_HELP = `
Common options:
  -p, --pkg <url>             the PKG (default: $PKG_URL, else ${DEFAULT_PKG_URL})
  -o, --output <path>         where to write the result
  -f, --force                 overwrite an existing output file
      --progress              show progress even when stderr is not a terminal
      --json                  print the result on stdout as one JSON object
      --qr-json <fd|path>     also write each identity session's pointer as a JSON line
                              to a file descriptor (e.g. 3) or a file, for scripts
      --no-qr                 do not draw the QR code (the link is still printed)
      --session-timeout <s>   give up on an identity session after this many seconds (default 600)
  -h, --help                  show this help
`;

/** Parsed option values, read through these two so every command reads them the same way. */
export type Values = Readonly<Record<string, unknown>>;

/** parseArgs with its errors turned into one-line usage errors. */
export function parseCommand(
  command: string,
  argv: readonly string[],
  options: Options,
): { values: Values; positionals: string[] } {
  try {
    return parseArgs({ args: [...argv], options, allowPositionals: true, strict: true });
  } catch (error) {
    const message = (error as Error).message.split('\n')[0] ?? 'bad arguments';
    throw usage(`${command}: ${message.replace(/\. To specify a positional argument.*$/, '')}`);
  }
}

/** The one input file a command takes. */
export function onePositional(command: string, positionals: readonly string[]): string {
  if (positionals.length === 0) throw usage(`${command}: which file? (see pg-cli ${command} --help)`);
  if (positionals.length > 1)
    throw usage(`${command}: expected one file, got ${positionals.length}: ${positionals.join(' ')}`);
  return positionals[0]!;
}

/** A JSON argument given inline, or as @file to read it from a file. */
export function jsonText(flag: string, value: string): string {
  if (!value.startsWith('@')) return value;
  try {
    return readFileSync(value.slice(1), 'utf8');
  } catch (error) {
    throw usage(`${flag}: cannot read ${value.slice(1)}: ${(error as Error).message}`);
  }
}

export interface CommonSettings {
  pkgUrl: string;
  output: string | undefined;
  force: boolean;
  progress: boolean;
  json: boolean;
  qr: boolean;
  pointerSink: PointerSink | undefined;
  sessionTimeoutMs: number;
  reportMaxRss: boolean;
}

export const str = (values: Values, key: string): string | undefined => {
  const value = values[key];
  return typeof value === 'string' ? value : undefined;
};
export const bool = (values: Values, key: string): boolean => values[key] === true;

export function commonSettings(values: Values, io: CliIo): CommonSettings {
  let sessionTimeoutMs = 600_000;
  const timeout = str(values, 'session-timeout');
  if (timeout !== undefined) {
    const seconds = Number(timeout);
    if (!/^\d+$/.test(timeout) || seconds <= 0 || seconds > 86_400)
      throw usage('--session-timeout: a whole number of seconds from 1 to 86400');
    sessionTimeoutMs = seconds * 1000;
  }
  const pkgUrl = str(values, 'pkg') ?? io.env['PKG_URL'];
  const qrJson = str(values, 'qr-json');
  return {
    pkgUrl: pkgUrl === undefined || pkgUrl === '' ? DEFAULT_PKG_URL : pkgUrl,
    output: str(values, 'output'),
    force: bool(values, 'force'),
    progress: bool(values, 'progress') || io.stderr.isTTY,
    json: bool(values, 'json'),
    qr: !bool(values, 'no-qr') && io.stderr.isTTY,
    pointerSink: qrJson === undefined ? undefined : parsePointerSink(qrJson),
    sessionTimeoutMs,
    reportMaxRss: bool(values, 'report-max-rss'),
  };
}
