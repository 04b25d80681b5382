import { open, readFile, unlink } from 'node:fs/promises';
import { decodePkgKeyFiles, encodePkgKeyFiles, type PkgKeyFiles, type PkgKeys } from 'postguard-ts/keys';

// pg-pkg's key files on disk. The encodings and their validation are the library's
// (postguard-ts/keys); reading and writing files is the server's business, so the browser
// library carries no file-system code.

export interface PkgKeyPaths {
  ibePublic: string;
  ibeSecret: string;
  ibsPublic: string;
  ibsSecret: string;
}

/** pg-pkg's default file names, relative to the working directory. */
export const DEFAULT_PKG_KEY_PATHS: Readonly<PkgKeyPaths> = Object.freeze({
  ibePublic: './pkg_ibe.pub',
  ibeSecret: './pkg_ibe.sec',
  ibsPublic: './pkg_ibs.pub',
  ibsSecret: './pkg_ibs.sec',
});

/** Reads and validates the four key files (see decodePkgKeyFiles). I/O errors propagate as they are. */
export async function readPkgKeys(paths: PkgKeyPaths = DEFAULT_PKG_KEY_PATHS): Promise<PkgKeys> {
  const [ibePublic, ibeSecret, ibsPublic, ibsSecret] = await Promise.all(
    [paths.ibePublic, paths.ibeSecret, paths.ibsPublic, paths.ibsSecret].map(async (p) => {
      const b = await readFile(p);
      return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
    }),
  );
  return decodePkgKeyFiles({
    ibePublic: ibePublic!,
    ibeSecret: ibeSecret!,
    ibsPublic: ibsPublic!,
    ibsSecret: ibsSecret!,
  });
}

/**
 * Writes the four key files, as pg-pkg gen does: each created exclusively (an existing file is
 * never overwritten; the error is EEXIST) with mode 0600. All four are created before any is
 * written, and the ones created are removed again if that fails, so a refusal leaves nothing
 * behind.
 */
export async function writePkgKeys(paths: PkgKeyPaths, keys: PkgKeys): Promise<void> {
  const files = encodePkgKeyFiles(keys);
  const order: Array<keyof PkgKeyFiles> = ['ibePublic', 'ibeSecret', 'ibsPublic', 'ibsSecret'];
  const handles: Array<{ path: string; handle: Awaited<ReturnType<typeof open>> }> = [];
  let written = false;
  try {
    for (const name of order) handles.push({ path: paths[name], handle: await open(paths[name], 'wx', 0o600) });
    for (const [i, name] of order.entries()) await handles[i]!.handle.writeFile(files[name]);
    written = true;
  } finally {
    await Promise.all(handles.map(({ handle }) => handle.close().catch(() => undefined)));
    if (!written) await Promise.all(handles.map(({ path }) => unlink(path).catch(() => undefined)));
  }
}
