#!/usr/bin/env node
// pg-standin: the stand-in Yivi server (see cli.ts for the flags).
import { runCli } from './cli.js';

const code = await runCli(process.argv.slice(2));
if (code !== 0) process.exit(code);
