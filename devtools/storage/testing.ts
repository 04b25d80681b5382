import type { FastifyInstance } from 'fastify';
import { buildStorage, storageDataDir } from './app.js';
import type { OutboxMail } from './outbox.js';
import type { StorageOptions } from './settings.js';

/** Helpers for tests that need a running storage stand-in (the SDK's, the CLI's, e2e). */

export interface RunningStorage {
  app: FastifyInstance;
  /** Base URL, e.g. http://127.0.0.1:41234 (no trailing slash). */
  url: string;
  dataDir: string;
  outbox(): Promise<OutboxMail[]>;
  /** Arms a chunk fault (see PUT /standin/faults/chunk). */
  failChunks(fault: {
    times?: number;
    always?: boolean;
    status?: number;
    reset?: boolean;
    hang?: boolean;
    afterCommit?: boolean;
    fromOffset?: number;
  }): Promise<void>;
  /** How many chunk requests failed on purpose so far. */
  faultsTriggered(): Promise<number>;
  /**
   * Arms a download fault (see POST /standin/faults/download): after `skip` (0) whole downloads, the
   * next `times` (1) are reset after `cutAfterBytes`, or with `hold` kept waiting there until cleared.
   */
  cutDownloads(fault: { cutAfterBytes: number; times?: number; hold?: boolean; skip?: number }): Promise<void>;
  /** How many downloads were cut on purpose so far. */
  downloadsCut(): Promise<number>;
  /** Disarms every fault and drops the connections of hung chunk requests. */
  clearFaults(): Promise<void>;
  /** The stand-in's view of an upload: session progress (null once gone) and file size (null if none). */
  upload(
    uuid: string,
  ): Promise<{ session: { uploaded: number; finalized: number } | null; fileBytes: number | null } | undefined>;
  close(): Promise<void>;
}

/** Builds a storage stand-in on 127.0.0.1 at a free port (data in a temporary directory unless given). */
export async function startStorage(options: StorageOptions = {}): Promise<RunningStorage> {
  const app = buildStorage(options);
  try {
    await app.listen({ port: 0, host: '127.0.0.1' });
  } catch (error) {
    await app.close().catch(() => undefined);
    throw error;
  }
  const address = app.server.address();
  if (typeof address !== 'object' || address === null) throw new Error('storage did not bind a TCP port');
  const url = `http://127.0.0.1:${address.port}`;
  const json = async (path: string, init?: RequestInit) => {
    // A stand-in that stops answering fails the test instead of hanging it.
    const response = await fetch(`${url}${path}`, { signal: AbortSignal.timeout(30_000), ...init });
    if (response.status === 404) return undefined;
    if (!response.ok) throw new Error(`${path}: HTTP ${response.status} ${await response.text()}`);
    return response.status === 204 ? undefined : response.json();
  };
  return {
    app,
    url,
    dataDir: storageDataDir(app),
    outbox: async () => ((await json('/standin/outbox')) as { mails: OutboxMail[] }).mails,
    failChunks: async (fault) => {
      await json('/standin/faults/chunk', {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(fault),
      });
    },
    faultsTriggered: async () => ((await json('/standin/faults')) as { triggered: number }).triggered,
    cutDownloads: async (fault) => {
      await json('/standin/faults/download', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(fault),
      });
    },
    downloadsCut: async () => ((await json('/standin/faults')) as { downloadsCut: number }).downloadsCut,
    clearFaults: async () => {
      await json('/standin/faults', { method: 'DELETE' });
    },
    upload: async (uuid) => json(`/standin/uploads/${uuid}`),
    close: () => app.close(),
  };
}

/** An upload of {@link uploadWhole}: its id, the Cryptify token after the chunk, init's challenge (bytes). */
export interface WholeUpload {
  uuid: string;
  token: string;
  challenge: Uint8Array;
}

/**
 * Inits an upload to bob@example.org at the storage at `url` (`init` adds to or overrides the init
 * body) and sends all of `file` in one chunk, not finalized. Throws unless both answer 200.
 */
export async function uploadWhole(
  url: string,
  file: Uint8Array<ArrayBuffer>,
  init: Record<string, unknown> = {},
): Promise<WholeUpload> {
  const started = await fetch(`${url}/fileupload/init`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ recipient: 'bob@example.org', mailContent: '', mailLang: 'EN', confirm: false, ...init }),
  });
  if (started.status !== 200) throw new Error(`init: HTTP ${started.status} ${await started.text()}`);
  const { uuid, challenge } = (await started.json()) as { uuid: string; challenge: string };
  const put = await fetch(`${url}/fileupload/${uuid}`, {
    method: 'PUT',
    headers: {
      cryptifytoken: started.headers.get('cryptifytoken')!,
      'content-range': `bytes 0-${file.length}/*`,
      'content-type': 'application/octet-stream',
    },
    body: file,
  });
  if (put.status !== 200) throw new Error(`chunk: HTTP ${put.status} ${await put.text()}`);
  return { uuid, token: put.headers.get('cryptifytoken')!, challenge: new Uint8Array(Buffer.from(challenge, 'hex')) };
}
