import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generatePkgKeys } from '../lib/keys.js';
import { listAudit } from './audit.js';
import { runCli } from './cli.js';
import { createTestSchema, type TestSchema } from './db/testing.js';
import { writePkgKeys, type PkgKeyPaths } from './keyfiles.js';
import { addKeys, checkKeySet, issuesFor, keyIdOf, oneKeySet, promoteKey, retireKey, type KeySet } from './keyset.js';
import { loadKeySet, parseKeySet, serializeKeySet } from './keyset-file.js';
import { startPkg } from './testing.js';

/**
 * Key sets (server/keyset.ts, keyset-file.ts) and `pg-pkg keys`: the rules of the set and every
 * refusal, the file, the commands and their audit rows, and what the PKG publishes and issues
 * (server/routes/parameters.ts, keys.ts). The rotation across clients is client/key-rotation.test.ts.
 */

const keys = generatePkgKeys();
const NOW = 1_800_000_000;

describe('the key-set rules', () => {
  const base = oneKeySet(keys);

  it('reads the four key files as one primary per kind, ids from the public keys', () => {
    expect(base.ibe.map((k) => [k.id, k.status])).toEqual([[keyIdOf(keys.mpk), 'primary']]);
    expect(base.ibs.map((k) => [k.id, k.status])).toEqual([[keyIdOf(keys.vk), 'primary']]);
    expect(keyIdOf(keys.mpk)).toMatch(/^[0-9a-f]{16}$/);
  });

  it('adds decrypt-only keys, promotes one (the old primary stays decrypt-only), retires the old one', () => {
    const { set: added, added: fresh } = addKeys(base, { kinds: ['ibe'], now: NOW });
    expect(fresh.map(({ kind, key }) => [kind, key.status, key.addedAt])).toEqual([['ibe', 'decrypt-only', NOW]]);
    expect(added.ibs).toBe(base.ibs);
    const b = fresh[0]!.key.id;
    const promoted = promoteKey(added, b);
    expect(promoted.previous).toBe(base.ibe[0]!.id);
    expect(promoted.set.ibe.map((k) => k.status)).toEqual(['decrypt-only', 'primary']);
    const retired = retireKey(promoted.set, base.ibe[0]!.id);
    expect(retired.set.ibe.map((k) => k.status)).toEqual(['retired', 'primary']);
    // Promoting the primary again and retiring a retired key change nothing.
    expect(promoteKey(retired.set, b).set).toBe(retired.set);
    expect(retireKey(retired.set, base.ibe[0]!.id).changed).toBe(false);
  });

  it('refuses an unknown id, retiring the primary and reviving a retired key', () => {
    const { set, added } = addKeys(base, { kinds: ['ibs'], now: NOW });
    expect(() => promoteKey(set, '0000000000000000')).toThrow(expect.objectContaining({ code: 'UNKNOWN_KEY' }));
    expect(() => retireKey(set, base.ibs[0]!.id)).toThrow(expect.objectContaining({ code: 'KEY_IS_PRIMARY' }));
    const retired = retireKey(set, added[0]!.key.id).set;
    expect(() => promoteKey(retired, added[0]!.key.id)).toThrow(expect.objectContaining({ code: 'KEY_RETIRED' }));
  });

  it('refuses a set that breaks a rule: two primaries, a forged id, a mismatched pair, a window out of order', () => {
    const other = generatePkgKeys();
    const second = oneKeySet(other).ibe[0]!;
    const cases: Array<[string, KeySet, RegExp]> = [
      ['two primaries', { ...base, ibe: [...base.ibe, second] }, /2 primary/],
      ['no primary', { ...base, ibe: [{ ...second, status: 'decrypt-only' }] }, /0 primary/],
      ['forged id', { ...base, ibe: [{ ...base.ibe[0]!, id: second.id }] }, /not its public key's/],
      ['mismatched pair', { ...base, ibe: [{ ...base.ibe[0]!, secretKey: other.msk }] }, /does not belong/],
      ['window', { ...base, ibs: [{ ...base.ibs[0]!, notBefore: 10, notAfter: 5 }] }, /notBefore is after/],
      ['a key twice', { ...base, ibe: [base.ibe[0]!, { ...base.ibe[0]!, status: 'retired' }] }, /twice/],
    ];
    for (const [name, set, message] of cases)
      expect(() => checkKeySet(set), name).toThrow(
        expect.objectContaining({ code: 'INVALID_KEY_SET', message: expect.stringMatching(message) }),
      );
  });

  it('issues user keys only for timestamps inside a key window, and never under a retired key', () => {
    const key = { ...base.ibe[0]!, notBefore: 100, notAfter: 200 };
    expect([99, 100, 200, 201].map((ts) => issuesFor(key, ts))).toEqual([false, true, true, false]);
    expect(issuesFor({ ...base.ibe[0]!, status: 'retired' }, 150)).toBe(false);
  });

  it('round-trips through the file format, and refuses a file that is not one', () => {
    const { set } = addKeys(base, { kinds: ['ibe', 'ibs'], now: NOW, notAfter: NOW + 10 });
    expect(parseKeySet(serializeKeySet(set))).toEqual(set);
    expect(() => parseKeySet('{"format":"something else","version":1}')).toThrow(/not a key-set file/);
    expect(() => parseKeySet('not json')).toThrow(/not JSON/);
    const text = serializeKeySet(set).replace(/"primary"/, '"decrypt-only"');
    expect(() => parseKeySet(text)).toThrow(/0 primary/);
  });
});

describe('pg-pkg keys, audited, and what the PKG then serves', () => {
  let dir: string;
  let paths: PkgKeyPaths;
  let keySetPath: string;
  let schema: TestSchema;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'pg-keyset-'));
    const at = (name: string) => join(dir, name);
    paths = { ibePublic: at('a.pub'), ibeSecret: at('a.sec'), ibsPublic: at('s.pub'), ibsSecret: at('s.sec') };
    keySetPath = at('keys.json');
    await writePkgKeys(paths, keys);
    schema = await createTestSchema();
  });

  afterAll(async () => {
    await schema?.drop();
    await rm(dir, { recursive: true, force: true });
  });

  const run = async (...args: string[]) => {
    const out: string[] = [];
    const err: string[] = [];
    const io = { stdout: { write: (s: string) => out.push(s) }, stderr: { write: (s: string) => err.push(s) } };
    const files = ['--key-set', keySetPath, '--ibe-public-path', paths.ibePublic, '--ibe-secret-path', paths.ibeSecret];
    files.push('--ibs-public-path', paths.ibsPublic, '--ibs-secret-path', paths.ibsSecret);
    const outcome = await runCli(['keys', ...args, ...files], { DATABASE_URL: schema.url }, io as never);
    return { outcome, out: out.join(''), err: err.join('') };
  };

  it('add writes the key set (0600) with the four files in it; promote and retire change it; each is audited', async () => {
    const since = new Date(Date.now() - 1000);
    const listed = await run('list');
    expect(listed.outcome).toEqual({ exit: 0 });
    expect(listed.out).toContain(`ibe\t${keyIdOf(keys.mpk)}\tprimary`);

    const added = await run('add', '--kind', 'ibe', '--not-before', '2026-01-01');
    expect(added.outcome).toEqual({ exit: 0 });
    const b = /key ([0-9a-f]{16})/.exec(added.out)![1]!;
    expect(added.err).toContain('no longer read');
    expect((await stat(keySetPath)).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await readFile(keySetPath, 'utf8')).ibe[1]).toMatchObject({ id: b, notBefore: 1_767_225_600 });

    // A PKG started now publishes both, and a new ETag.
    const before = await startPkg({ keys });
    const { set } = await loadKeySet(keySetPath, paths);
    const after = await startPkg({ keys, keySet: set, yivi: before.yivi });
    try {
      const [old, now] = await Promise.all([before, after].map((p) => fetch(`${p.url}/v2/parameters`)));
      expect(now!.headers.get('etag')).not.toBe(old!.headers.get('etag'));
      const body = (await now!.json()) as { publicKey: string; keys: unknown[] };
      expect(body.publicKey).toBe(keys.mpk); // still the primary, as pg-js reads it
      expect(body.keys).toEqual([
        { id: keyIdOf(keys.mpk), publicKey: keys.mpk, status: 'primary', notBefore: null, notAfter: null },
        { id: b, publicKey: set.ibe[1]!.publicKey, status: 'decrypt-only', notBefore: 1_767_225_600, notAfter: null },
      ]);
    } finally {
      await after.close();
      await before.close();
    }

    expect((await run('retire', '--id', b)).outcome).toEqual({ exit: 0 });
    const refused = await run('promote', '--id', b);
    expect(refused.outcome).toEqual({ exit: 1 });
    expect(refused.err).toMatch(/retired/);
    const primary = await run('retire', '--id', keyIdOf(keys.mpk));
    expect(primary.outcome).toEqual({ exit: 1 });
    expect(primary.err).toMatch(/primary/);

    const trail = await listAudit(schema.url, { since, limit: 100 });
    expect(trail.map((r) => [r.operation, r.outcome, r.errorCode, r.keyId])).toEqual([
      ['keys list', 'allowed', null, null],
      ['keys add', 'allowed', null, b],
      ['keys retire', 'allowed', null, b],
      ['keys promote', 'refused', 'KEY_RETIRED', b],
      ['keys retire', 'refused', 'KEY_IS_PRIMARY', keyIdOf(keys.mpk)],
    ]);
    expect(trail.every((r) => r.source === 'command' && r.osUser !== null)).toBe(true);
  });

  it('the server refuses a broken key-set file at start, naming --key-set', async () => {
    const broken = join(dir, 'broken.json');
    await writeFile(broken, '{"format":"pg-pkg key set","version":1,"ibe":[],"ibs":[]}');
    const err: string[] = [];
    const io = { stdout: { write: () => undefined }, stderr: { write: (s: string) => err.push(s) } };
    const argv = ['server', '--allowed-origins', '*', '-p', '0', '--key-set', broken];
    expect(await runCli(argv, {}, io as never)).toEqual({ exit: 2 });
    expect(err.join('')).toMatch(/--key-set \/ PKG_KEY_SET: .*no IBE \(encryption\) keys/);
  });
});
