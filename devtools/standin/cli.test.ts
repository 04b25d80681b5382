import { spawn } from 'node:child_process';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ConfigError, parseCli } from './cli.js';
import { bundledEntry } from '../../test/node-bundle.js';

const MAIN = fileURLToPath(new URL('./main.ts', import.meta.url));

/** Runs pg-standin as a child process (through tsx, as the source is TypeScript). */
function run(args: string[], env: Record<string, string> = {}) {
  const child = spawn(process.execPath, [bundledEntry(MAIN), ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, exited, out: () => stdout, err: () => stderr };
}

describe('parseCli', () => {
  it('maps flags to options', () => {
    expect(parseCli(['--port', '8088'])).toMatchObject({ kind: 'run', port: 8088, host: '127.0.0.1' });
    const full = parseCli([
      '--port=0',
      '--host',
      '0.0.0.0',
      '--public-url',
      'http://192.168.1.5:8088',
      '--token',
      't0k',
      '--key-path',
      '/k.pem',
    ]);
    expect(full).toMatchObject({
      kind: 'run',
      port: 0,
      host: '0.0.0.0',
      options: { publicUrl: 'http://192.168.1.5:8088', requestorToken: 't0k', keyPath: '/k.pem' },
    });
    expect(parseCli(['--port', '1', '--max-sessions', '50'])).toMatchObject({ options: { maxPendingSessions: 50 } });
    for (const bad of ['0', '-1', 'many', '1e3'])
      expect(() => parseCli(['--port', '1', '--max-sessions', bad]), bad).toThrow(ConfigError);
    expect(parseCli(['--help'])).toEqual({ kind: 'help' });
    expect(parseCli(['-h', '--port', 'junk'])).toEqual({ kind: 'help' });
  });

  it('rejects bad flags with one-line messages', () => {
    const cases: Array<[string[], RegExp]> = [
      [[], /--port: is required/],
      [['--port'], /--port/],
      [['--port', '65536'], /0 to 65535/],
      [['--port', '-1'], /--port/],
      [['--port', '80a'], /0 to 65535/],
      [['--port', '1', '--verbose'], /Unknown option '--verbose'/],
      [['--port', '1', 'extra'], /positional/],
      [['--port', '1', '--public-url', 'not a url'], /not an absolute URL/],
      [['--port', '1', '--public-url', 'ftp://x'], /must be http/],
      [['--port', '1', '--token', ''], /--token: must not be empty/],
    ];
    for (const [argv, message] of cases) {
      let error: unknown;
      try {
        parseCli(argv);
      } catch (e) {
        error = e;
      }
      expect(error, argv.join(' ')).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toMatch(message);
      expect((error as Error).message).not.toContain('\n');
    }
  });
});

describe('pg-standin', () => {
  it('exits 2 with a one-line error on an invalid flag, and 0 on --help', async () => {
    const bad = run(['--port', '0', '--frobnicate']);
    expect(await bad.exited).toBe(2);
    expect(bad.err().trim().split('\n')).toEqual(["pg-standin: Unknown option '--frobnicate' (see --help)"]);
    expect(bad.out()).toBe('');

    const help = run(['--help']);
    expect(await help.exited).toBe(0);
    expect(help.out()).toMatch(/^Usage: pg-standin --port <n>/);
  });

  it('serves on the port it reports, with its key from $STANDIN_KEY_PATH, and stops on SIGTERM', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'standin-cli-'));
    const keyPath = join(dir, 'k.pem');
    const server = run(['--port', '0'], { STANDIN_KEY_PATH: keyPath });
    try {
      await expect.poll(() => server.out(), { timeout: 20_000 }).toMatch(/^listening on http:\/\/127\.0\.0\.1:\d+\n$/);
      const url = server.out().trim().slice('listening on '.length);
      const health = await fetch(`${url}/health`);
      expect(await health.text()).toBe('OK');
      expect((await stat(keyPath)).mode & 0o777).toBe(0o600);
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);
      // Logs went to stderr as JSON lines.
      expect(server.err()).toContain('"msg":"Server listening at');
    } finally {
      server.child.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    }
  });
});
