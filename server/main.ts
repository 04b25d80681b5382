#!/usr/bin/env node
// pg-pkg: the PostGuard key generator (see cli.ts for the commands, config.ts for the options).
import { runCli } from './cli.js';

const outcome = await runCli(process.argv.slice(2), process.env, process);
if ('exit' in outcome) {
  // Let pending output drain instead of exiting on the spot.
  process.exitCode = outcome.exit;
} else {
  process.exit(await outcome.serving);
}
