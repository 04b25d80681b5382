import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../dev-server-cli.js';
import { USAGE, banner, parseCli } from './cli.js';
import { startDevStack } from './stack.js';
import { bundledEntry } from '../../test/node-bundle.js';

/** pg-dev's command line, and the stack it starts (the PKG from this repository's sources, as `pg-pkg`). */

// pg-pkg runs in the key directory, outside the repository: bundled from the sources once
// (test/node-bundle.ts), beside server/db/migrate.ts, which reads its migrations next to itself.
const PKG_FROM_SOURCES = [
  process.execPath,
  bundledEntry(resolve(import.meta.dirname, '../../server/main.ts'), resolve(import.meta.dirname, '../../server/db')),
];
const quiet = () =>
  new Writable({
    write: (_chunk, _encoding, done) => done(),
  });

describe('parseCli', () => {
  it("defaults to loopback, 8080, 8088, 8090 (npm start's ports), temporary keys and uploads, any origin", () => {
    expect(parseCli([])).toEqual({
      kind: 'run',
      options: { host: '127.0.0.1', pkgPort: 8080, standinPort: 8088, storagePort: 8090, allowedOrigins: ['*'] },
    });
  });

  it('--public-url: where the mails link, an absolute http(s) URL', () => {
    expect(parseCli(['--public-url', 'http://localhost:5173/receive.html'])).toMatchObject({
      kind: 'run',
      options: { publicUrl: 'http://localhost:5173/receive.html' },
    });
    for (const bad of ['receive.html', 'ftp://x.example/', ''])
      expect(() => parseCli(['--public-url', bad]), bad).toThrow(ConfigError);
    expect(USAGE).toContain('--public-url');
  });

  it('maps every flag', () => {
    expect(
      parseCli([
        '--host=0.0.0.0',
        '--pkg-port',
        '0',
        '--standin-port',
        '9088',
        '--storage-port',
        '9100',
        '--key-dir',
        'keys',
        '--data-dir',
        'uploads',
        '--allowed-origins',
        'http://a.test, http://b.test',
      ]),
    ).toEqual({
      kind: 'run',
      options: {
        host: '0.0.0.0',
        pkgPort: 0,
        standinPort: 9088,
        storagePort: 9100,
        keyDir: 'keys',
        dataDir: 'uploads',
        allowedOrigins: ['http://a.test', 'http://b.test'],
      },
    });
    expect(parseCli(['-h'])).toEqual({ kind: 'help' });
    for (const flag of ['--host', '--pkg-port', '--standin-port', '--storage-port', '--key-dir', '--data-dir'])
      expect(USAGE).toContain(flag);
  });

  it('refuses what it cannot use, naming the flag', () => {
    for (const [argv, setting] of [
      [['--pkg-port', '65536'], '--pkg-port'],
      [['--standin-port', 'x'], '--standin-port'],
      [['--key-dir', ''], '--key-dir'],
      [['--nope'], undefined],
      [['extra'], undefined],
    ] as const) {
      let error: unknown;
      try {
        parseCli(argv);
      } catch (e) {
        error = e;
      }
      expect(error, argv.join(' ')).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).setting).toBe(setting);
    }
  });
});

describe('banner', () => {
  const stack = {
    pkgUrl: 'http://127.0.0.1:8080',
    standinUrl: 'http://127.0.0.1:8088',
    walletUrl: 'http://127.0.0.1:8088/standin/wallet',
    storageUrl: 'http://127.0.0.1:8090',
    publicUrl: 'http://127.0.0.1:8090/standin/receive',
    apiKeys: false,
    keyDir: '/tmp/k',
    temporaryKeys: true,
    pkgExited: new Promise<string>(() => undefined),
    close: () => Promise.resolve(),
  };

  it('says where the mails link and how API keys are switched on', () => {
    const off = banner(stack);
    expect(off).toContain("  mail links to      http://127.0.0.1:8090/standin/receive   (pg-dev's page; --public-url");
    expect(off).toMatch(/^ {2}API keys +off: pg-pkg migrate -d <postgres URL>, then start pg-dev with DATABASE_URL=/m);
    const on = banner({ ...stack, apiKeys: true, publicUrl: 'http://localhost:5173/receive.html' });
    expect(on).toMatch(/^ {2}mail links to +http:\/\/localhost:5173\/receive\.html$/m);
    expect(on).toMatch(/^ {2}API keys +on \(DATABASE_URL\): pg-pkg api-key create -d <DATABASE_URL> --email/m);
    // The lines the consumer tests read stay as they were.
    expect(off).toMatch(/^ {2}storage stand-in +http:\/\/127\.0\.0\.1:8090 /m);
    expect(off).toContain('Ctrl-C stops everything.');
  });
});

describe('startDevStack', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'pg-dev-test-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('starts PKG, stand-in and storage on free ports, keeps a given key directory, and stops them all', async () => {
    const keyDir = join(dir, 'keys');
    const options = {
      host: '127.0.0.1',
      pkgPort: 0,
      standinPort: 0,
      storagePort: 0,
      allowedOrigins: ['*'],
      keyDir,
      pkgCommand: PKG_FROM_SOURCES,
      log: quiet(),
    };
    let printed = '';
    const stack = await startDevStack({
      ...options,
      log: new Writable({ write: (chunk: Buffer, _encoding, done) => done(void (printed += chunk.toString())) }),
    });
    // The new key files are named where they are, not relative to the PKG's working directory.
    expect(printed).toContain(`IBE public key: ${join(keyDir, 'pkg_ibe.pub')}`);
    try {
      expect(await (await fetch(`${stack.pkgUrl}/health`)).text()).toBe('OK');
      expect((await fetch(stack.walletUrl)).status).toBe(200);
      expect(await (await fetch(`${stack.storageUrl}/health`)).text()).toBe('OK');
      // Storage runs strict, as Cryptify: a cross-origin page reads the token and nothing else.
      const limits = await fetch(`${stack.storageUrl}/limits`, { headers: { origin: 'http://localhost:5173' } });
      expect(limits.headers.get('access-control-expose-headers')).toBe('cryptifytoken');
      expect(stack.temporaryKeys).toBe(false);
      expect(banner(stack)).toContain(stack.walletUrl);
      // Without --public-url the mails lead to the storage stand-in's own page, which says what to do.
      expect(stack.publicUrl).toBe(`${stack.storageUrl}/standin/receive`);
      expect(banner(stack)).toMatch(/^ {2}mail links to +http:\/\/127\.0\.0\.1:\d+\/standin\/receive .*--public-url/m);
      const uuid = '0b5e3a8e-6f1c-4d2a-9a51-3f0e2b7c9d10';
      const page = await fetch(`${stack.publicUrl}?uuid=${uuid}&recipient=bob%40example.org`);
      expect(page.headers.get('content-type')).toMatch(/^text\/html/);
      const html = await page.text();
      expect(html).toContain('for <b>bob@example.org</b>');
      expect(html).toContain(`${stack.storageUrl}/filedownload/${uuid}`);
      expect(html).toContain(`pg-cli dec -p ${stack.pkgUrl}`);
      expect(stack.apiKeys).toBe((process.env['DATABASE_URL'] ?? '') !== '');
    } finally {
      await stack.close();
    }
    await expect(fetch(`${stack.pkgUrl}/health`)).rejects.toThrow();
    expect(await stack.pkgExited).toMatch(/^(exit 0|SIGTERM)$/);
    // A second start reuses the keys, so files sealed before still open.
    const key = await readFile(join(keyDir, 'pkg_ibe.sec'));
    const again = await startDevStack(options);
    await again.close();
    expect(await readFile(join(keyDir, 'pkg_ibe.sec'))).toEqual(key);
  });

  it('without a key directory, makes a temporary one and removes it on close', async () => {
    const stack = await startDevStack({
      host: '127.0.0.1',
      pkgPort: 0,
      standinPort: 0,
      storagePort: 0,
      allowedOrigins: ['*'],
      pkgCommand: PKG_FROM_SOURCES,
      log: quiet(),
    });
    expect(stack.temporaryKeys).toBe(true);
    expect(existsSync(join(stack.keyDir, 'pkg_ibs.pub'))).toBe(true);
    await stack.close();
    expect(existsSync(stack.keyDir)).toBe(false);
  });

  it('a port in use is a one-line start-up error, and nothing is left running', async () => {
    const first = await startDevStack({
      host: '127.0.0.1',
      pkgPort: 0,
      standinPort: 0,
      storagePort: 0,
      allowedOrigins: ['*'],
      pkgCommand: PKG_FROM_SOURCES,
      log: quiet(),
    });
    try {
      const port = Number(new URL(first.standinUrl).port);
      await expect(
        startDevStack({
          host: '127.0.0.1',
          pkgPort: 0,
          standinPort: port,
          storagePort: 0,
          allowedOrigins: ['*'],
          pkgCommand: PKG_FROM_SOURCES,
          log: quiet(),
        }),
      ).rejects.toMatchObject({ name: 'StartupError', message: expect.stringContaining(`port ${port}`) });
    } finally {
      await first.close();
    }
  });
});
