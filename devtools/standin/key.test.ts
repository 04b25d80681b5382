import { generateKeyPairSync } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { importSPKI, jwtVerify } from 'jose';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_KEY_PATH, keyFromPem, loadOrCreateKey, resolveKeyPath } from './key.js';
import { startStandin } from './testing.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'standin-key-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('the persistent JWT key', () => {
  it('is created on first use with mode 0600 in a fresh directory, and read back unchanged', async () => {
    const path = join(dir, 'nested', '.keys', 'standin-jwt.pem');
    const first = await loadOrCreateKey(path);
    const info = await stat(path);
    expect(info.mode & 0o777).toBe(0o600);
    expect(first.privateKey.asymmetricKeyDetails?.modulusLength).toBe(2048);
    expect(await readFile(path, 'utf8')).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
    const second = await loadOrCreateKey(path);
    expect(second.publicKeyPem).toBe(first.publicKeyPem);
  });

  it('ends up as one key when two processes race to create it', async () => {
    const path = join(dir, 'race.pem');
    const [a, b] = await Promise.all([loadOrCreateKey(path), loadOrCreateKey(path)]);
    expect(a.publicKeyPem).toBe(b.publicKeyPem);
    expect((await loadOrCreateKey(path)).publicKeyPem).toBe(a.publicKeyPem);
  });

  it('survives a restart: a JWT from one instance verifies with the key the next instance publishes', async () => {
    const keyPath = join(dir, 'standin-jwt.pem');
    const first = await startStandin({ keyPath });
    const started = await fetch(`${first.url}/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        '@context': 'https://irma.app/ld/request/disclosure/v2',
        disclose: [[['irma-demo.a.b.c']]],
      }),
    });
    const { token } = (await started.json()) as { token: string };
    const jwt = await (await fetch(`${first.url}/session/${token}/result-jwt`)).text();
    const pemBefore = await (await fetch(`${first.url}/publickey`)).text();
    await first.close();
    expect((await stat(keyPath)).mode & 0o777).toBe(0o600);

    const second = await startStandin({ keyPath });
    try {
      const pemAfter = await (await fetch(`${second.url}/publickey`)).text();
      expect(pemAfter).toBe(pemBefore);
      const { payload } = await jwtVerify(jwt, await importSPKI(pemAfter, 'RS256'), { algorithms: ['RS256'] });
      expect(payload.token).toBe(token);
    } finally {
      await second.close();
    }
  });

  it('refuses files that are not a usable RSA key', async () => {
    const garbage = join(dir, 'garbage.pem');
    await writeFile(garbage, 'not a key');
    await expect(loadOrCreateKey(garbage)).rejects.toThrow(/not a PEM private key/);

    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' });
    expect(() => keyFromPem(ec, 'ec.pem')).toThrow(/expected an RSA key, got ec/);

    const small = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({
      type: 'pkcs1',
      format: 'pem',
    });
    expect(() => keyFromPem(small, 'small.pem')).toThrow(/1024 bits is too small/);

    // An app with a bad key fails to start rather than serving without one.
    await expect(startStandin({ keyPath: garbage })).rejects.toThrow(/not a PEM private key/);
  });

  it('finds its path in the option, then $STANDIN_KEY_PATH, then .keys/ under the working directory', () => {
    expect(resolveKeyPath('/abs/k.pem', { STANDIN_KEY_PATH: '/env/k.pem' }, '/cwd')).toBe('/abs/k.pem');
    expect(resolveKeyPath('rel/k.pem', {}, '/cwd')).toBe('/cwd/rel/k.pem');
    expect(resolveKeyPath(undefined, { STANDIN_KEY_PATH: '/env/k.pem' }, '/cwd')).toBe('/env/k.pem');
    expect(resolveKeyPath(undefined, { STANDIN_KEY_PATH: '' }, '/cwd')).toBe(`/cwd/${DEFAULT_KEY_PATH}`);
    expect(resolveKeyPath(undefined, {}, '/cwd')).toBe('/cwd/.keys/standin-jwt.pem');
  });
});
