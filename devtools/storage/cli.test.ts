import { spawn } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ConfigError, parseCli } from './cli.js';
import { bundledEntry } from '../../test/node-bundle.js';

const MAIN = fileURLToPath(new URL('./main.ts', import.meta.url));

/** Runs pg-storage as a child process (through tsx, as the source is TypeScript). */
function run(args: string[]) {
  const child = spawn(process.execPath, [bundledEntry(MAIN), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, exited, out: () => stdout, err: () => stderr };
}

/** The URL the server reports on stdout. */
function listening(server: ReturnType<typeof run>): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no listening line; stderr: ${server.err()}`)), 30_000);
    server.child.stdout.on('data', () => {
      const match = /listening on (http:\/\/\S+)/.exec(server.out());
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    });
  });
}

describe('parseCli', () => {
  it('maps flags to options', () => {
    expect(parseCli(['--port', '8100'])).toMatchObject({ kind: 'run', port: 8100, host: '127.0.0.1' });
    expect(
      parseCli([
        '--port=0',
        '--host',
        '0.0.0.0',
        '--data-dir',
        '/tmp/x',
        '--pkg-url',
        'http://localhost:8087',
        '--public-url',
        'https://pg.example',
        '--chunk-size',
        '1000',
        '--email-attribute',
        'irma-demo.sidn-pbdf.email.email',
      ]),
    ).toMatchObject({
      kind: 'run',
      port: 0,
      host: '0.0.0.0',
      options: {
        dataDir: '/tmp/x',
        pkgUrl: 'http://localhost:8087',
        publicUrl: 'https://pg.example',
        chunkSize: 1000,
        emailAttribute: 'irma-demo.sidn-pbdf.email.email',
      },
    });
    expect(parseCli(['--help'])).toEqual({ kind: 'help' });
    expect(parseCli(['-h', '--port', 'junk'])).toEqual({ kind: 'help' });
  });

  it('maps --strict to strict mode, off without it', () => {
    expect(parseCli(['--port', '1', '--strict'])).toMatchObject({ options: { strict: true } });
    const plain = parseCli(['--port', '1']);
    expect(plain.kind === 'run' && plain.options.strict).toBeFalsy();
    expect(() => parseCli(['--port', '1', '--strict=yes'])).toThrow(ConfigError);
  });

  it('maps the upload bounds', () => {
    expect(
      parseCli(['--port', '1', '--unfinalized-ttl-seconds', '600', '--max-unfinalized-uploads', '5']),
    ).toMatchObject({
      options: { unfinalizedTtlSeconds: 600, maxUnfinalizedUploads: 5 },
    });
  });

  it('rejects bad flags with one-line messages', () => {
    const cases: Array<[string[], RegExp]> = [
      [[], /--port: is required/],
      [['--port'], /--port/],
      [['--port', '65536'], /0 to 65535/],
      [['--port', 'x'], /0 to 65535/],
      [['--port', '1', '--verbose'], /Unknown option '--verbose'/],
      [['--port', '1', 'extra'], /positional/],
      [['--port', '1', '--data-dir', ''], /--data-dir: must not be empty/],
      [['--port', '1', '--pkg-url', 'not a url'], /--pkg-url: must be an absolute http\(s\) URL/],
      [['--port', '1', '--public-url', 'ftp://x'], /--public-url: must be an absolute http\(s\) URL/],
      [['--port', '1', '--chunk-size', '0'], /--chunk-size: must be a positive integer/],
      [['--port', '1', '--chunk-size', '-5'], /--chunk-size/],
      [['--port', '1', '--email-attribute', ''], /--email-attribute: must not be empty/],
      [['--port', '1', '--unfinalized-ttl-seconds', '0'], /--unfinalized-ttl-seconds: must be a positive integer/],
      [['--port', '1', '--max-unfinalized-uploads', 'lots'], /--max-unfinalized-uploads: must be a positive integer/],
      [['--port', '1', '--max-unfinalized-uploads', '0'], /--max-unfinalized-uploads: must be a positive integer/],
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

describe('pg-storage', () => {
  it('exits 2 with a one-line error on a bad flag, and 0 on --help', async () => {
    const bad = run(['--port', '0', '--frobnicate']);
    expect(await bad.exited).toBe(2);
    expect(bad.err().trim().split('\n')).toEqual(["pg-storage: Unknown option '--frobnicate' (see --help)"]);
    expect(bad.out()).toBe('');
    const help = run(['--help']);
    expect(await help.exited).toBe(0);
    expect(help.out()).toMatch(/^Usage: pg-storage --port <n>/);
  });

  it('with --strict exposes only cryptifytoken to a cross-origin page', async () => {
    const exposed = async (args: string[]) => {
      const server = run(['--port', '0', ...args]);
      try {
        const url = await listening(server);
        const response = await fetch(`${url}/limits`, {
          headers: { origin: 'https://app.example' },
          signal: AbortSignal.timeout(10_000),
        });
        expect(await response.json()).toMatchObject({ window_days: 14 });
        return response.headers.get('access-control-expose-headers');
      } finally {
        // SIGTERM, so the server removes its temporary data directory.
        server.child.kill('SIGTERM');
        await server.exited;
      }
    };
    expect(await exposed(['--strict'])).toBe('cryptifytoken');
    expect(await exposed([])).toBe('cryptifytoken, content-range, accept-ranges');
  });

  it('serves uploads into --data-dir on the port it reports, and stops on SIGTERM', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pg-storage-cli-'));
    const server = run(['--port', '0', '--data-dir', dir]);
    try {
      const url = await listening(server);
      expect(await (await fetch(`${url}/health`)).text()).toBe('OK');
      const init = await fetch(`${url}/fileupload/init`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ recipient: 'bob@example.org', mailContent: '', mailLang: 'EN', confirm: false }),
      });
      const { uuid } = (await init.json()) as { uuid: string };
      expect(await readdir(dir)).toEqual([uuid]);
      // Logs never carry the upload id (it is a download capability).
      expect(server.err()).not.toContain(uuid);
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);
      // A given data directory is the caller's: it stays.
      expect(await readdir(dir)).toEqual([uuid]);
    } finally {
      server.child.kill('SIGKILL');
      await rm(dir, { recursive: true, force: true });
    }
  });
});
