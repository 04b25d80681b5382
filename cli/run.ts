import { readFileSync } from 'node:fs';
import type { CliIo } from './args.js';
import { dec, DEC_HELP } from './dec.js';
import { enc, ENC_HELP } from './enc.js';
import { Exit, describeFailure, type ExitCode } from './exit.js';
import { inspect, INSPECT_HELP } from './inspect.js';

export const MAIN_HELP = `Usage: pg-cli <command> [options]

Identity-based encryption of files with PostGuard (compatible with PostGuard's pg-cli and
@e4a/pg-wasm): encrypt for people by their attributes (an e-mail address, ...), decrypt
after proving those attributes with the Yivi app.

Commands:
  enc <file>        encrypt and sign <file> (writes <file>.enc)
  dec <file>.enc    decrypt <file>.enc (writes <file>)
  inspect <file>    show who a file is for and who it claims is the sender (no key, no network)
  help [command]    show help

Options:
  -h, --help        show help
  -V, --version     show the version

Run 'pg-cli <command> --help' for a command's options. Exit codes are listed in the README:
0 ok, 2 usage, 3 file, 4 PKG unavailable, 5 PKG refused, 6 identity session, 7 wrong key,
8 damaged or tampered file, 130/143 interrupted.
`;

/** The version in package.json (two levels up from dist/cli, one from cli/ when run from source). */
export function readVersion(): string {
  // cli/package.json: beside dist/ when installed, the folder above in the sources.
  for (const relative of ['../package.json', './package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(relative, import.meta.url), 'utf8')) as {
        name?: unknown;
        version?: unknown;
      };
      if (pkg.name === '@postguard-ts/cli' && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // try the next
    }
  }
  return '0.0.0';
}

const COMMANDS: Record<string, { run: (argv: readonly string[], io: CliIo) => Promise<ExitCode>; help: string }> = {
  enc: { run: enc, help: ENC_HELP },
  dec: { run: dec, help: DEC_HELP },
  inspect: { run: inspect, help: INSPECT_HELP },
};

/**
 * Runs one pg-cli command and returns its exit code. Failures become one line on stderr
 * ("pg-cli: error: …"); nothing is thrown.
 */
export async function runCli(argv: readonly string[], io: CliIo): Promise<ExitCode> {
  const [first, ...rest] = argv;
  if (first === undefined || first === '-h' || first === '--help') {
    (first === undefined ? io.stderr : io.stdout).write(MAIN_HELP);
    return first === undefined ? Exit.USAGE : Exit.OK;
  }
  if (first === '-V' || first === '--version') {
    io.stdout.write(`pg-cli ${io.version}\n`);
    return Exit.OK;
  }
  if (first === 'help') {
    const topic = rest[0];
    const command = topic === undefined ? undefined : COMMANDS[topic];
    if (topic !== undefined && command === undefined)
      return fail(io, Exit.USAGE, `unknown command ${JSON.stringify(topic)}`);
    io.stdout.write(command?.help ?? MAIN_HELP);
    return Exit.OK;
  }
  const command = COMMANDS[first];
  if (command === undefined)
    return fail(
      io,
      Exit.USAGE,
      `unknown command ${JSON.stringify(first)} (commands: enc, dec, inspect; see pg-cli --help)`,
    );
  try {
    return await command.run(rest, io);
  } catch (error) {
    if (io.signal.aborted) {
      const reason: unknown = io.signal.reason;
      return fail(
        io,
        reason === 'SIGTERM' ? Exit.SIGTERM : Exit.SIGINT,
        `interrupted (${String(reason)}); no output was written`,
      );
    }
    const { exitCode, message } = describeFailure(error);
    return fail(io, exitCode, message);
  }
}

function fail(io: CliIo, exitCode: ExitCode, message: string): ExitCode {
  io.stderr.write(`pg-cli: error: ${message.replace(/(?<!\s)\s*\n\s*/g, ' ')}\n`);
  return exitCode;
}
