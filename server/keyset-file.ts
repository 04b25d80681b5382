import { randomBytes } from 'node:crypto';
import { open, readFile, rename, stat, unlink } from 'node:fs/promises';
import { readPkgKeys, type PkgKeyPaths } from './keyfiles.js';
import { KINDS, KeySetError, checkKeySet, oneKeySet, type KeySet, type MasterKey } from './keyset.js';

/**
 * The key set on disk: one JSON file (mode 0600: it holds the master secrets), `./pkg_keys.json`
 * by default. Until the first `pg-pkg keys add` there is none, and the four key files of
 * `pg-pkg gen` are read as a set of one primary per kind; `keys add` writes the file, with those
 * keys in it, and from then on the file is the key set (the four files are no longer read).
 * Writes go to a temporary file that is renamed over the old one, so an instance that (re)starts
 * while a command runs reads the old set or the new, never half of one.
 */

export const DEFAULT_KEY_SET_PATH = './pkg_keys.json';
const FORMAT = 'pg-pkg key set';

export interface LoadedKeySet {
  set: KeySet;
  /** Where it came from: the key-set file, or the four key files. */
  source: 'key-set' | 'key-files';
  /** Last-Modified of the published keys: the key-set file's mtime, or each public key file's. */
  modified: { mpk: Date; vk: Date };
}

const exists = (path: string) =>
  stat(path).then(
    () => true,
    (e: NodeJS.ErrnoException) => {
      if (e.code === 'ENOENT') return false;
      throw e;
    },
  );

function parseEntry(value: unknown, where: string): MasterKey {
  const o = (typeof value === 'object' && value !== null ? value : {}) as Record<string, unknown>;
  const text = (name: string) => {
    if (typeof o[name] !== 'string') throw new KeySetError('INVALID_KEY_SET', `${where}: ${name} is missing`);
    return o[name];
  };
  const time = (name: string) => {
    const v = o[name];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'number') throw new KeySetError('INVALID_KEY_SET', `${where}: ${name} is not Unix seconds`);
    return v;
  };
  return {
    id: text('id'),
    status: text('status') as MasterKey['status'],
    publicKey: text('publicKey'),
    secretKey: text('secretKey'),
    notBefore: time('notBefore'),
    notAfter: time('notAfter'),
    addedAt: time('addedAt'),
  };
}

/** Parses and checks a key-set file's text (checkKeySet's rules). Throws KeySetError INVALID_KEY_SET. */
export function parseKeySet(text: string): KeySet {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new KeySetError('INVALID_KEY_SET', 'the key-set file is not JSON');
  }
  const o = (typeof json === 'object' && json !== null ? json : {}) as Record<string, unknown>;
  if (o['format'] !== FORMAT || o['version'] !== 1)
    throw new KeySetError('INVALID_KEY_SET', `not a key-set file (format "${FORMAT}", version 1)`);
  const kind = (name: 'ibe' | 'ibs') => {
    const list = o[name];
    if (!Array.isArray(list)) throw new KeySetError('INVALID_KEY_SET', `${name}: expected a list of keys`);
    return list.map((entry, i) => parseEntry(entry, `${name}[${i}]`));
  };
  return checkKeySet({ ibe: kind('ibe'), ibs: kind('ibs') });
}

export function serializeKeySet(set: KeySet): string {
  const entries = (keys: readonly MasterKey[]) =>
    keys.map((k) => ({
      id: k.id,
      status: k.status,
      publicKey: k.publicKey,
      secretKey: k.secretKey,
      ...(k.notBefore === undefined ? {} : { notBefore: k.notBefore }),
      ...(k.notAfter === undefined ? {} : { notAfter: k.notAfter }),
      ...(k.addedAt === undefined ? {} : { addedAt: k.addedAt }),
    }));
  const body: Record<string, unknown> = { format: FORMAT, version: 1 };
  for (const kind of KINDS) body[kind] = entries(set[kind]);
  return `${JSON.stringify(body, null, 2)}\n`;
}

/** The key set: the key-set file when it exists, else the four key files as a one-key set. */
export async function loadKeySet(keySetPath: string, keyPaths: PkgKeyPaths): Promise<LoadedKeySet> {
  if (await exists(keySetPath)) {
    const [text, info] = await Promise.all([readFile(keySetPath, 'utf8'), stat(keySetPath)]);
    return { set: parseKeySet(text), source: 'key-set', modified: { mpk: info.mtime, vk: info.mtime } };
  }
  const keys = await readPkgKeys(keyPaths);
  const [mpk, vk] = await Promise.all([stat(keyPaths.ibePublic), stat(keyPaths.ibsPublic)]);
  return { set: oneKeySet(keys), source: 'key-files', modified: { mpk: mpk.mtime, vk: vk.mtime } };
}

/** Replaces the key-set file atomically (a temporary file beside it, mode 0600, renamed over it). */
export async function writeKeySet(keySetPath: string, set: KeySet): Promise<void> {
  const temporary = `${keySetPath}.${randomBytes(6).toString('hex')}.tmp`;
  const handle = await open(temporary, 'wx', 0o600);
  let renamed = false;
  try {
    await handle.writeFile(serializeKeySet(checkKeySet(set)));
    await handle.sync();
    await handle.close();
    await rename(temporary, keySetPath);
    renamed = true;
  } finally {
    if (!renamed) {
      await handle.close().catch(() => undefined);
      await unlink(temporary).catch(() => undefined);
    }
  }
}
