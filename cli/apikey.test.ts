import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey, createApiKeyStore, type ApiKeyStore } from '../server/db.js';
import { createTestSchema, type TestSchema } from '../server/db/testing.js';
import { disclose } from '../devtools/standin/wallet.js';
import { startPkg, type RunningPkg } from '../server/testing.js';
import { Exit } from './exit.js';
import { realClock, runCliProcess } from './testing.js';

/**
 * pg-cli enc --api-key: signing as an organisation through the real PKG and its PostgreSQL API-key
 * store, with no identity session; the recipient sees the organisation's e-mail as the sender.
 */

const EMAIL = 'irma-demo.sidn-pbdf.email.email';
const BOB = 'bob@example.org';
const ORG_EMAIL = 'noreply@acme.example';

let schema: TestSchema;
let store: ApiKeyStore;
let pkg: RunningPkg;
let apiKey: string;
let dir: string;

beforeAll(async () => {
  schema = await createTestSchema();
  apiKey = await createApiKey(schema.url, { email: ORG_EMAIL, org: 'ACME' });
  store = createApiKeyStore(schema.url, { emailAttribute: EMAIL, connectionTimeoutMs: 2000 });
  pkg = await startPkg({ apiKeys: store, clock: realClock() });
  dir = await mkdtemp(join(tmpdir(), 'pg-cli-apikey-'));
});

afterAll(async () => {
  await pkg?.close();
  await store?.close();
  await schema?.drop();
  await rm(dir, { recursive: true, force: true });
});

const recipients = JSON.stringify({ [BOB]: [{ t: EMAIL, v: BOB }] });

describe('enc --api-key', () => {
  it('signs with the organisation identity without a session; dec verifies it', async () => {
    const file = join(dir, 'invoice.txt');
    await writeFile(file, 'invoice 42\n');
    const sealed = await runCliProcess(['enc', '--pkg', pkg.url, '-i', recipients, '--api-key', apiKey, file]);
    expect(sealed.stderr).not.toMatch(/error/);
    expect(sealed.code).toBe(0);
    expect(sealed.sessions).toEqual([]);
    expect(sealed.stdout).toContain(`Signed as: ${EMAIL} (demo credential) = "${ORG_EMAIL}"`);

    await rm(file);
    const opened = await runCliProcess(['dec', '--pkg', pkg.url, `${file}.enc`], {
      wallet: (s) => disclose(s, { [EMAIL]: BOB }),
    });
    expect(opened.code).toBe(0);
    expect(await readFile(file, 'utf8')).toBe('invoice 42\n');
    expect(opened.stdout).toContain(`Verified sender: ${EMAIL} (demo credential) = "${ORG_EMAIL}"`);
  });

  it('reads the key from $PG_API_KEY too', async () => {
    const file = join(dir, 'env.txt');
    await writeFile(file, 'from the environment\n');
    const sealed = await runCliProcess(['enc', '--pkg', pkg.url, '-i', recipients, file], {
      env: { PG_API_KEY: apiKey },
    });
    expect(sealed.code).toBe(0);
    expect(sealed.sessions).toEqual([]);
  });

  it('an unknown key → 5 (the PKG refused), no output; a key without the PG- prefix → 2', async () => {
    const file = join(dir, 'refused.txt');
    await writeFile(file, 'x');
    const refused = await runCliProcess([
      'enc',
      '--pkg',
      pkg.url,
      '-i',
      recipients,
      '--api-key',
      'PG-not-a-key-we-issued',
      file,
    ]);
    expect(refused.code).toBe(Exit.PKG_REFUSED);
    expect(refused.stderr).toMatch(/^pg-cli: error: the PKG refused the credential/);
    expect(refused.stderr.split('\n')).toHaveLength(2);
    await expect(stat(`${file}.enc`)).rejects.toThrow();

    const malformed = await runCliProcess(['enc', '--pkg', pkg.url, '-i', recipients, '--api-key', 'secret', file]);
    expect(malformed.code).toBe(Exit.USAGE);
    expect(malformed.stderr).toBe('pg-cli: error: --api-key: PostGuard API keys start with "PG-"\n');
  });
});
