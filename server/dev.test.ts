import { mkdtemp, readFile, rm, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readPkgKeys } from '../lib/keys.js';
import { DEV_ORIGINS, devSettings, ensureDevKeys } from './dev.js';

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
  it('defaults to loopback, 8080, 8088 and the demo on Vite\'s dev server at 5173, and the demo origins; the environment overrides', () => {
    expect(devSettings({})).toEqual({
      host: '127.0.0.1',
      pkgPort: 8080,
      standinPort: 8088,
      demoPort: 5173,
      demo: 'dev',
      origins: DEV_ORIGINS,
      keyDir: '.keys',
    });
    expect(
      devSettings({
        PKG_PORT: '9000',
        STANDIN_PORT: '9001',
        DEMO_PORT: '9002',
        DEMO: 'build',
        DEV_ORIGINS: 'http://a.test,http://b.test',
        DEV_HOST: '0.0.0.0',
      }),
    ).toMatchObject({
      host: '0.0.0.0',
      pkgPort: 9000,
      standinPort: 9001,
      demoPort: 9002,
      demo: 'build',
      origins: ['http://a.test', 'http://b.test'],
    });
    expect(devSettings({ DEMO: 'off' }).demo).toBe('off');
  });

  it('refuses an unknown demo mode', () => {
    expect(() => devSettings({ DEMO: 'prod' })).toThrow(expect.objectContaining({ name: 'ConfigError', setting: 'DEMO' }));
  });
});
