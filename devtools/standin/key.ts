import { createPrivateKey, createPublicKey, generateKeyPair, randomBytes } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { chmod, link, mkdir, readFile, unlink, writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { promisify } from 'node:util';

/**
 * The stand-in's RSA key for signing result JWTs. It must survive restarts: a PKG fetches /publickey
 * once and keeps it, so a fresh key per start would make it reject every JWT until it restarts too.
 * Stored as PKCS#8 PEM with mode 0600, outside git by default (`.keys/` is ignored).
 */

export const DEFAULT_KEY_PATH = '.keys/standin-jwt.pem';
export const KEY_PATH_ENV = 'STANDIN_KEY_PATH';
const MIN_MODULUS_BITS = 2048;

export interface JwtKey {
  privateKey: KeyObject;
  /** SPKI PEM, what GET /publickey serves. */
  publicKeyPem: string;
}

/** Explicit path, else $STANDIN_KEY_PATH, else `.keys/standin-jwt.pem` under the working directory. */
export function resolveKeyPath(
  explicit: string | undefined,
  env: Readonly<Record<string, string | undefined>> = process.env,
  cwd: string = process.cwd(),
): string {
  const fromEnv = env[KEY_PATH_ENV];
  const chosen = explicit ?? (fromEnv !== undefined && fromEnv !== '' ? fromEnv : DEFAULT_KEY_PATH);
  return resolve(cwd, chosen);
}

export function keyFromPem(pem: string | Buffer, source: string): JwtKey {
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(pem);
  } catch (e) {
    throw new Error(`${source}: not a PEM private key`, { cause: e });
  }
  if (privateKey.asymmetricKeyType !== 'rsa') {
    throw new Error(`${source}: expected an RSA key, got ${privateKey.asymmetricKeyType ?? 'unknown'}`);
  }
  const bits = privateKey.asymmetricKeyDetails?.modulusLength ?? 0;
  if (bits < MIN_MODULUS_BITS) throw new Error(`${source}: RSA key of ${bits} bits is too small for RS256`);
  const publicKeyPem = createPublicKey(privateKey).export({ type: 'spki', format: 'pem' }).toString();
  return { privateKey, publicKeyPem };
}

/**
 * Reads the key at `path`, or creates it (2048-bit RSA) if the file does not exist. Creation is
 * atomic and exclusive: the key is written to a private temporary file and hard-linked into place,
 * so two processes starting at once agree on one key and nobody reads a half-written file.
 */
export async function loadOrCreateKey(path: string): Promise<JwtKey> {
  const existing = await readIfExists(path);
  if (existing !== undefined) return keyFromPem(existing, path);

  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const { privateKey } = await promisify(generateKeyPair)('rsa', { modulusLength: 2048 });
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const tmp = `${path}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  await writeFile(tmp, pem, { mode: 0o600, flag: 'wx' });
  // writeFile's mode is filtered by the umask; make sure no one else may read the key.
  await chmod(tmp, 0o600);
  try {
    await link(tmp, path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    // Another process won the race: use its key.
    await unlink(tmp);
    return keyFromPem(await readFile(path), path);
  }
  await unlink(tmp);
  return keyFromPem(pem, path);
}

async function readIfExists(path: string): Promise<Buffer | undefined> {
  try {
    return await readFile(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}
