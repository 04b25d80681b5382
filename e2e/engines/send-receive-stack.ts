import { mkdtemp, rm } from 'node:fs/promises';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'vite';
import { demoConfig } from '../../demo/vite.js';
import { startDev, type DevStack } from '../../scripts/dev.js';

/**
 * The stack the send/receive spec runs against: `npm start`'s (scripts/dev.ts: the demo's
 * production build, the PKG, the stand-in Yivi server and the storage stand-in in strict mode) on
 * free ports, with storage limits small enough to cross in a test: chunks of 64 KiB (so an
 * upload of a megabyte has sixteen, and can be stopped half-way) and 4 MiB per upload.
 */

export const CHUNK_SIZE = 64 * 1024;
export const PER_UPLOAD_LIMIT = 4 * 1024 * 1024;

export interface SendReceiveStack {
  demoUrl: string;
  storageUrl: string;
  /** Body and header bytes the storage stand-in has written to its sockets so far. */
  storageBytesServed(): number;
  close(): Promise<void>;
}

/** Counts what a server writes, over every connection it ever had (live ones included). */
function bytesWrittenCounter(server: { on(event: 'connection', listener: (socket: Socket) => void): unknown }) {
  const live = new Set<Socket>();
  let closed = 0;
  server.on('connection', (socket) => {
    live.add(socket);
    socket.once('close', () => {
      closed += socket.bytesWritten;
      live.delete(socket);
    });
  });
  return () => closed + [...live].reduce((sum, s) => sum + s.bytesWritten, 0);
}

/** Another stack than the default: larger limits (Cryptify's chunk size), over a demo already built there. */
export interface StackOptions {
  /** Bytes per upload; default {@link PER_UPLOAD_LIMIT}. */
  perUploadLimit?: number;
  /** Bytes per chunk; default {@link CHUNK_SIZE}. */
  chunkSize?: number;
  /** The demo is already built in `demoBuild` (by another stack). */
  built?: boolean;
}

export async function startSendReceiveStack(demoBuild: string, options: StackOptions = {}): Promise<SendReceiveStack> {
  const dir = await mkdtemp(join(tmpdir(), 'pg-send-receive-'));
  let dev: DevStack | undefined;
  const close = async () => {
    await dev?.close();
    await rm(dir, { recursive: true, force: true });
  };
  try {
    if (options.built !== true)
      await build({
        ...demoConfig({ outDir: demoBuild }),
        build: { ...demoConfig().build, outDir: demoBuild, sourcemap: false },
      });
    dev = await startDev(
      {
        host: '127.0.0.1',
        pkgPort: 0,
        standinPort: 0,
        storagePort: 0,
        demoPort: 0,
        demo: 'build',
        demoDir: demoBuild,
        origins: [],
        keyDir: join(dir, 'keys'),
        storage: {
          chunkSize: options.chunkSize ?? CHUNK_SIZE,
          perUploadLimit: options.perUploadLimit ?? PER_UPLOAD_LIMIT,
          dataDir: join(dir, 'uploads'),
        },
      },
      { LOG_LEVEL: 'error', PKG_RATELIMIT_DISABLED: 'true' },
    );
    const served = bytesWrittenCounter(dev.storage.app.server);
    return { demoUrl: dev.demoUrl!, storageUrl: dev.storage.url, storageBytesServed: served, close };
  } catch (error) {
    await close();
    throw error;
  }
}

/** Calls a stand-in knob (/standin/…) and fails loudly on anything but 2xx. */
export async function knob(storageUrl: string, path: string, method: string, body?: unknown): Promise<unknown> {
  const response = await fetch(`${storageUrl}/standin${path}`, {
    method,
    signal: AbortSignal.timeout(30_000),
    ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
  });
  if (!response.ok) throw new Error(`${method} /standin${path}: HTTP ${response.status} ${await response.text()}`);
  return response.status === 204 ? undefined : response.json();
}
