import { mkdtemp, readFile, rm, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../server/db.js';
import { createTestSchema } from '../server/db/testing.js';
import { readPkgKeys } from '../server/keyfiles.js';
import { createServer, type Server } from 'node:net';
import { DEV_ORIGINS, devSettings, ensureDevKeys, startDev, type DevSettings } from './dev.js';

/** `npm start`'s pieces that have rules: the dev key directory and the settings. */

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'pg-pkg-dev-'));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('ensureDevKeys', () => {
  it('creates the key set on first use and reuses it afterwards', async () => {
    const keyDir = join(dir, 'keys');
    const paths = await ensureDevKeys(keyDir);
    const first = await readPkgKeys(paths);
    const again = await ensureDevKeys(keyDir);
    expect(again).toEqual(paths);
    expect(await readPkgKeys(again)).toEqual(first);
  });

  it('refuses a half set instead of replacing it', async () => {
    const keyDir = join(dir, 'half');
    const paths = await ensureDevKeys(keyDir);
    const secret = await readFile(paths.ibeSecret);
    await unlink(paths.ibsPublic);
    await expect(ensureDevKeys(keyDir)).rejects.toMatchObject({ name: 'StartupError' });
    expect(await readFile(paths.ibeSecret)).toEqual(secret);
  });
});

describe('devSettings', () => {
  it("defaults to loopback, 8080, 8088, storage at 8090 and the demo on Vite's dev server at 5173, and the demo origins; the environment overrides", () => {
    expect(devSettings({})).toEqual({
      host: '127.0.0.1',
      pkgPort: 8080,
      standinPort: 8088,
      storagePort: 8090,
      demoPort: 5173,
      demo: 'dev',
      origins: DEV_ORIGINS,
      keyDir: '.keys',
      docs: 'build',
    });
    expect(
      devSettings({
        PKG_PORT: '9000',
        STANDIN_PORT: '9001',
        STORAGE_PORT: '9003',
        DEMO_PORT: '9002',
        DEMO: 'build',
        DEV_ORIGINS: 'http://a.test,http://b.test',
        DEV_HOST: '0.0.0.0',
      }),
    ).toMatchObject({
      host: '0.0.0.0',
      pkgPort: 9000,
      standinPort: 9001,
      storagePort: 9003,
      demoPort: 9002,
      demo: 'build',
      origins: ['http://a.test', 'http://b.test'],
    });
    expect(devSettings({ DEMO: 'off' }).demo).toBe('off');
  });

  it('refuses an unknown demo mode', () => {
    expect(() => devSettings({ DEMO: 'prod' })).toThrow(
      expect.objectContaining({ name: 'ConfigError', setting: 'DEMO' }),
    );
  });
});

describe('startDev', () => {
  const onFreePorts = (keyDir: string, demo: DevSettings['demo']): DevSettings => ({
    host: '127.0.0.1',
    pkgPort: 0,
    standinPort: 0,
    demoPort: 0,
    demo,
    origins: [],
    keyDir,
  });

  it("serves the demo on Vite's dev server beside the PKG and the stand-in, and the API reference; the page learns where they are", async () => {
    // The reference is missing, so the start builds it (in the background) before serving it.
    const docsDir = join(dir, 'api');
    const stack = await startDev(
      { ...onFreePorts(join(dir, 'stack'), 'dev'), docs: 'build', docsDir },
      { LOG_LEVEL: 'error' },
    );
    try {
      expect(stack.docsUrl).toBe(`${stack.demoUrl}api/`);
      const building = await fetch(stack.docsUrl!);
      expect([200, 503]).toContain(building.status);
      await stack.docsReady;
      // The index: the package name once, "start here", the entries by group, the client's internals apart.
      const index = await (await fetch(stack.docsUrl!)).text();
      expect(index.match(/<h1[^>]*>[^<]*<\/h1>/g)).toEqual(['<h1>postguard-ts</h1>']);
      const headings = [...index.matchAll(/<h3 id="[^"]+" class="tsd-anchor-link">([^<]+)/g)].map((m) => m[1]);
      expect(headings).toEqual(['Start here', 'Node', 'The format and keys', 'Build tools']);
      expect(index).toContain('Internals: upload keepers');
      for (const entry of ['postguard-ts/client', 'postguard-ts/worker', 'postguard-ts/sw', 'postguard-ts/sw/install'])
        expect(index.slice(index.indexOf('id="start-here"'), index.indexOf('id="node"'))).toContain(
          `<code>${entry}</code>`,
        );
      const client = await fetch(`${stack.docsUrl}modules/postguard-ts_client.html`);
      expect(client.headers.get('content-type')).toBe('text/html; charset=utf-8');
      const groups = [...(await client.text()).matchAll(/<h2[^>]*>([^<]+)/g)].map((m) => m[1]);
      expect(groups.slice(-3)).toEqual([
        'Internals: upload keepers',
        'Internals: ZIP reader',
        'Internals: crypto engines',
      ]);
      expect((await fetch(`${stack.docsUrl}..%2F..%2Fpackage.json`)).status).toBe(404);
      const demoOrigin = new URL(stack.demoUrl!).origin;
      expect(await (await fetch(`${stack.demoUrl}config.json`)).json()).toEqual({
        pkgUrl: stack.pkg.url,
        walletUrl: `${stack.standinUrl}/standin/wallet`,
        cryptifyUrl: stack.storage.url,
      });
      // The storage stand-in answers the demo's origin as Cryptify does (strict: only the token readable), and no other.
      const limits = await fetch(`${stack.storage.url}/limits`, { headers: { origin: demoOrigin } });
      expect(limits.status).toBe(200);
      expect(limits.headers.get('access-control-allow-origin')).toBe(demoOrigin);
      expect(limits.headers.get('access-control-expose-headers')).toBe('cryptifytoken');
      const stranger = await fetch(`${stack.storage.url}/limits`, { headers: { origin: 'http://evil.test' } });
      expect(stranger.headers.get('access-control-allow-origin')).toBeNull();
      // Cryptify's mail link opens the receive page.
      const mailLink = await fetch(`${stack.demoUrl}download?uuid=x&recipient=y`, { redirect: 'manual' });
      expect(mailLink.status).toBe(302);
      expect(mailLink.headers.get('location')).toBe('/receive.html?uuid=x&recipient=y');
      expect(await (await fetch(`${stack.demoUrl}send.html`)).text()).toContain('<h1>Send</h1>');
      expect(await (await fetch(`${stack.demoUrl}receive.html`)).text()).toContain('<h1>Receive</h1>');
      expect(await (await fetch(stack.demoUrl!)).text()).toContain('<h1>Encrypt</h1>');
      expect(await (await fetch(`${stack.demoUrl}decrypt.html`)).text()).toContain('<h1>Decrypt</h1>');
      // The service worker is bundled on request: one classic script with the decrypter and the saver.
      const sw = await fetch(`${stack.demoUrl}sw.js`);
      expect(sw.headers.get('content-type')).toMatch(/javascript/);
      const code = await sw.text();
      expect(code).toContain('pg-download/');
      expect(code).toContain('pg-save/');
      expect(code).not.toMatch(/^[ \t]*(?:import|export)\s/m);
      // The PKG on its free port allows the demo's free-port origin.
      const params = await fetch(`${stack.pkg.url}/v2/parameters`, { headers: { origin: demoOrigin } });
      expect(params.status).toBe(200);
      expect(params.headers.get('access-control-allow-origin')).toBe(demoOrigin);
      expect((await fetch(stack.walletUrl)).status).toBe(200);
    } finally {
      await stack.close();
    }
  });

  it('without the demo, only the PKG and the stand-in run', async () => {
    const stack = await startDev(
      { ...onFreePorts(join(dir, 'nodemo'), 'off'), origins: ['http://app.test'] },
      { LOG_LEVEL: 'error' },
    );
    try {
      expect(stack.demoUrl).toBeUndefined();
      expect((await fetch(`${stack.pkg.url}/health`)).status).toBe(200);
    } finally {
      await stack.close();
    }
  });

  it('with DATABASE_URL the start migrates the database first, so an API key works at once (it answered 503 DB_UNAVAILABLE)', async () => {
    const schema = await createTestSchema(undefined, { migrated: false });
    try {
      const stack = await startDev(
        { ...onFreePorts(join(dir, 'db'), 'off'), origins: ['http://app.test'] },
        {
          LOG_LEVEL: 'error',
          DATABASE_URL: schema.url,
        },
      );
      try {
        expect(stack.database).toMatch(/migrated to version \d+ \(applied /);
        const apiKey = await createApiKey(schema.url, { email: 'news@example.com', org: 'Example BV' });
        const response = await fetch(`${stack.pkg.url}/v2/irma/sign/key`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
          body: JSON.stringify({ pubSignId: [{ t: 'pbdf.sidn-pbdf.email.email' }] }),
        });
        expect(response.status).toBe(200);
        expect(await response.json()).toMatchObject({ status: 'DONE', proofStatus: 'VALID' });
      } finally {
        await stack.close();
      }
      // A second start finds it current and says so.
      const again = await startDev(
        { ...onFreePorts(join(dir, 'db'), 'off'), origins: ['http://app.test'] },
        {
          LOG_LEVEL: 'error',
          DATABASE_URL: schema.url,
        },
      );
      await again.close();
      expect(again.database).toMatch(/schema up to date \(version \d+\)/);
    } finally {
      await schema.drop();
    }
  });

  it('an unreachable database stops the start with a StartupError, and nothing is left listening', async () => {
    const listen = (port: number) =>
      new Promise<Server>((resolve, reject) => {
        const server = createServer();
        server.once('error', reject);
        server.listen(port, '127.0.0.1', () => resolve(server));
      });
    const close = (server: Server) => new Promise((resolve) => server.close(resolve));
    const probe = await listen(0);
    const standinPort = (probe.address() as { port: number }).port;
    await close(probe);
    const settings = { ...onFreePorts(join(dir, 'nodb'), 'off'), standinPort, origins: ['http://app.test'] };
    await expect(
      startDev(settings, { LOG_LEVEL: 'error', DATABASE_URL: 'postgres://127.0.0.1:1/none' }),
    ).rejects.toMatchObject({ name: 'StartupError', message: expect.stringContaining('DATABASE_URL') });
    // The stand-in had started before the database was tried: its port is free again.
    await close(await listen(standinPort));
  });

  it('a taken port is a StartupError that names it', async () => {
    const blocker: Server = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as { port: number }).port;
    try {
      const settings = { ...onFreePorts(join(dir, 'busy'), 'off'), standinPort: port };
      await expect(startDev(settings, { LOG_LEVEL: 'error' })).rejects.toMatchObject({
        name: 'StartupError',
        message: expect.stringContaining(String(port)),
      });
    } finally {
      await new Promise((resolve) => blocker.close(resolve));
    }
  });
});
