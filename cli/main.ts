#!/usr/bin/env node
import { removeTempFilesSync } from './files.js';
import { Exit } from './exit.js';
import { readVersion, runCli } from './run.js';

/**
 * pg-cli: the process around runCli. Signals: the first SIGINT / SIGTERM removes any partial
 * output at once (synchronously, so not even a forced exit leaves one), then lets the command
 * wind down (it cancels its identity session at the identity server); a second signal, or a
 * command that takes longer than a few seconds to stop, ends the process.
 */

const controller = new AbortController();
const SIGNAL_EXITS = { SIGINT: Exit.SIGINT, SIGTERM: Exit.SIGTERM } as const;

for (const name of ['SIGINT', 'SIGTERM'] as const) {
  process.on(name, () => {
    removeTempFilesSync();
    if (controller.signal.aborted) process.exit(SIGNAL_EXITS[name]);
    controller.abort(name);
    setTimeout(() => process.exit(SIGNAL_EXITS[name]), 3000).unref();
  });
}

const stream = (s: NodeJS.WriteStream) => ({ write: (text: string) => void s.write(text), isTTY: s.isTTY === true });
const stderr = stream(process.stderr);

const argv = process.argv.slice(2);
const code = await runCli(argv, {
  stdin: process.stdin,
  stdout: stream(process.stdout),
  stderr,
  env: process.env,
  signal: controller.signal,
  version: readVersion(),
});
if (argv.includes('--report-max-rss')) {
  // maxRSS is in KiB.
  stderr.write(`max-rss-bytes=${process.resourceUsage().maxRSS * 1024}\n`);
}
// Exit explicitly once stdout and stderr have taken everything: a socket kept alive by the HTTP
// client, or anything else left running, must not keep a script waiting.
const flushed = (s: NodeJS.WriteStream) => new Promise<void>((resolve) => s.write('', () => resolve()));
await Promise.all([flushed(process.stdout), flushed(process.stderr)]);
process.exit(code);
