#!/usr/bin/env node
// pg-dev: a PKG, the stand-in Yivi server and the storage stand-in in one command (see cli.ts for the flags).
import { runCli } from './cli.js';

const code = await runCli(process.argv.slice(2));
if (code !== 0) process.exit(code);
