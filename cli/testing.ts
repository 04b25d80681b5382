import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import type { ManualClock } from '../devtools/standin/testing.js';
import { bundledEntry } from '../test/node-bundle.js';

/**
 * Helpers for tests that run pg-cli as a process: the real entry point bundled from the sources
 * once per test file (test/node-bundle.ts: a start under the tsx loader costs five times more), the
 * session pointers it writes to file descriptor 3 (--qr-json 3) handed to a callback that plays
 * the wallet, and the exit code, output and peak memory collected.
 */

const MAIN = fileURLToPath(new URL('./main.ts', import.meta.url));

export interface SessionLine {
  purpose: 'sign' | 'decrypt';
  sessionPtr: { u: string; irmaqr: string };
  qr: string;
}

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  sessions: SessionLine[];
  /** From --report-max-rss. */
  maxRssBytes?: number;
}

export interface CliRunOptions {
  cwd?: string;
  env?: Record<string, string>;
  /** Plays the phone for each session the CLI starts (its pointer arrives on fd 3). */
  wallet?: (session: SessionLine, index: number) => Promise<unknown>;
  /** Text for stdin; stdin is /dev/null otherwise. */
  stdin?: string;
  /** Do not add --qr-json 3. */
  noPointerFd?: boolean;
}

export interface CliProcess {
  child: ChildProcess;
  result: Promise<CliResult>;
}

/** The environment without the CLI's own variables of the machine running the tests. */
function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!/^(?:PKG_URL|PG_API_KEY)$/.test(k)) env[k] = v;
  }
  return { ...env, ...extra };
}

function lines(stream: Readable, onLine: (line: string) => void): void {
  let buffered = '';
  stream.on('data', (d: Buffer) => {
    buffered += d.toString();
    let nl: number;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      onLine(buffered.slice(0, nl));
      buffered = buffered.slice(nl + 1);
    }
  });
}

export function startCli(args: readonly string[], options: CliRunOptions = {}): CliProcess {
  const argv = options.noPointerFd === true ? [...args] : [...args, '--qr-json', '3'];
  const child = spawn(process.execPath, [bundledEntry(MAIN), ...argv], {
    cwd: options.cwd,
    env: cleanEnv(options.env ?? {}),
    stdio: [options.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe', 'pipe'],
  });
  if (options.stdin !== undefined) child.stdin!.end(options.stdin);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const sessions: SessionLine[] = [];
  const walletRuns: Promise<unknown>[] = [];
  lines(child.stdio[3] as Readable, (line) => {
    const session = JSON.parse(line) as SessionLine;
    sessions.push(session);
    if (options.wallet) walletRuns.push(options.wallet(session, sessions.length - 1).catch((e: unknown) => e));
  });
  const result = new Promise<CliResult>((resolve) => {
    child.on('close', (code, signal) => {
      void Promise.all(walletRuns).then(() => {
        const rss = /max-rss-bytes=(\d+)/.exec(stderr);
        resolve({ code, signal, stdout, stderr, sessions, ...(rss ? { maxRssBytes: Number(rss[1]) } : {}) });
      });
    });
  });
  return { child, result };
}

export const runCliProcess = (args: readonly string[], options: CliRunOptions = {}): Promise<CliResult> =>
  startCli(args, options).result;

/**
 * A clock for the PKG and the stand-in that follows real time: pg-cli seals at the real current
 * time, and the PKG refuses keys for timestamps in its future.
 */
export function realClock(): ManualClock {
  let offset = 0;
  return {
    now: () => Math.floor(Date.now() / 1000) + offset,
    set: (seconds) => {
      offset = seconds - Math.floor(Date.now() / 1000);
    },
    advance: (seconds) => {
      offset += seconds;
    },
  };
}
