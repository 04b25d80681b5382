import { webcrypto } from 'node:crypto';
import { mkdir, open, readFile, stat } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { ClientError, ClientErrorCode, keyBox } from 'postguard-ts/client';

/**
 * The key that seals the folder keeper's recovery tokens, kept apart from the folder: a copy of the
 * folder (a backup, a shared volume, a support tarball) then holds sealed bytes and ciphertext
 * only, and cannot finish an upload in the sender's name. Where it comes from, first that is set:
 * the caller's 32 bytes, the environment (`POSTGUARD_KEEPER_KEY`, base64), or a key file (made
 * with mode 0600 in a 0700 folder, by default in the user's configuration folder). A key file
 * that others can read is refused, as ssh refuses such a private key.
 */

/** 32 bytes, or the path of a key file (made if missing). */
export type TokenKey = Uint8Array | { file: string };

/** The environment variable a token key may come from: 32 bytes as base64. */
export const TOKEN_KEY_ENV = 'POSTGUARD_KEEPER_KEY';

/** The key file used when nothing else is given: `$XDG_CONFIG_HOME/postguard-ts/keeper.key` (else ~/.config/…). */
export function defaultTokenKeyFile(env: NodeJS.ProcessEnv = process.env): string {
  const base = env['XDG_CONFIG_HOME'] || join(homedir(), '.config');
  return join(base, 'postguard-ts', 'keeper.key');
}

const KEY_BYTES = 32;
const badKey = (message: string, cause?: unknown) =>
  new ClientError(ClientErrorCode.INVALID_INPUT, `the keeper's token key: ${message}`, { cause });

function exactly32(bytes: Uint8Array, where: string): Uint8Array {
  if (!(bytes instanceof Uint8Array) || bytes.length !== KEY_BYTES) throw badKey(`${where} is not ${KEY_BYTES} bytes`);
  return bytes;
}

/** The key file's bytes, made (random, 0600) if it is missing; refused if others may read it. */
async function keyFile(path: string): Promise<Uint8Array> {
  try {
    const handle = await open(path, 'wx', 0o600);
    try {
      await handle.writeFile(crypto.getRandomValues(new Uint8Array(KEY_BYTES)));
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
      await mkdir(dirname(path), { recursive: true, mode: 0o700 });
      return keyFile(path);
    }
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw badKey(`cannot make ${path}`, error);
  }
  const seen = await stat(path);
  if (process.platform !== 'win32' && (seen.mode & 0o077) !== 0)
    throw badKey(`${path} can be read by others (chmod 600 it)`);
  return exactly32(new Uint8Array(await readFile(path)), path);
}

async function loadKey(given: TokenKey | undefined): Promise<webcrypto.CryptoKey> {
  let raw: Uint8Array;
  if (given instanceof Uint8Array) raw = exactly32(given, 'the key given');
  else if (given !== undefined) raw = await keyFile(given.file);
  else if (process.env[TOKEN_KEY_ENV])
    raw = exactly32(Buffer.from(process.env[TOKEN_KEY_ENV], 'base64'), TOKEN_KEY_ENV);
  else raw = await keyFile(defaultTokenKeyFile());
  return crypto.subtle.importKey('raw', new Uint8Array(raw), 'AES-GCM', false, ['encrypt', 'decrypt']);
}

/**
 * The keeper's secret box over the token key (AES-256-GCM, each token bound to its upload by the
 * keeper). Its `ready()` loads the key, or says why it cannot, before anything is listed: a
 * missing or refused key must stop the keeper, not read as tokens that do not open (which the
 * keeper would throw away with their uploads).
 */
export const tokenBox = (given: TokenKey | undefined) => keyBox(() => loadKey(given));
