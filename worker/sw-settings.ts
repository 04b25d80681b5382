import { DOWNLOAD_PATH } from './sw-protocol.js';

/** How the decrypter answers: its path, lifetimes, limits and timeouts; every one has a default. */
export interface DecrypterOptions {
  /** Path under the scope that the worker answers; default 'pg-download/'. */
  path?: string;
  /** Lifetime of an unused registration. 5 minutes by default, at most 1 hour. */
  defaultTtlMs?: number;
  /** The longest lifetime a page may ask for (`ttlMs`). 1 hour. */
  maxTtlMs?: number;
  /**
   * Lifetime of a seekable registration, counted again from each request it answers (a playing
   * video keeps it). 30 minutes by default, at most `maxTtlMs`.
   */
  seekableTtlMs?: number;
  /** Most registrations waiting at once. 64. */
  maxRegistrations?: number;
  /** Minimum interval between progress messages. 250 ms. */
  progressIntervalMs?: number;
  /** Longest a fetch event is extended while its body streams. 270 s (Chromium stops workers at 300). */
  maxEventMs?: number;
  /**
   * Most plaintext held in memory to authenticate a file before its first byte is sent: a file up
   * to this size is served only once it verified completely; of a larger Blob, read twice, the
   * first reading keeps this much and the second reads only the rest. 16 MiB.
   */
  holdLimitBytes?: number;
  /** A source read that brings nothing for this long fails the download with SOURCE_FAILED. 30 s. */
  stallTimeoutMs?: number;
  /**
   * For a download registered with `paced` (read through PreparedDownload.fetch): how far the
   * worker may run ahead of what the page acknowledged reading. 4 MiB.
   */
  pacingWindowBytes?: number;
  /** How often a download being answered tells its page the worker is still there. 10 s (download.ts waits 45 s). */
  heartbeatMs?: number;
  /** The fetch for URL sources; default the worker's own. */
  fetch?: typeof fetch;
  /**
   * A download that its page's crypto worker decrypts is taken over by this worker when that crypto
   * worker says nothing for this long (its page closed, or it stalled). 4 s.
   */
  offloadSilenceMs?: number;
}

/** How often a worker with a download in progress tells its page that it is still there. */
export const HEARTBEAT_MS = 10_000;

/** The options with their defaults filled in, as every part of the decrypter reads them. */
export interface DecrypterSettings {
  readonly path: string;
  readonly defaultTtlMs: number;
  readonly maxTtlMs: number;
  readonly seekableTtlMs: number;
  readonly maxRegistrations: number;
  readonly progressIntervalMs: number;
  readonly maxEventMs: number;
  readonly holdLimitBytes: number;
  readonly stallMs: number;
  readonly pacingWindowBytes: number;
  readonly heartbeatMs: number;
  readonly fetch: typeof fetch;
  readonly offloadSilenceMs: number;
}

export function decrypterSettings(scope: ServiceWorkerGlobalScope, options: DecrypterOptions): DecrypterSettings {
  return {
    path: options.path ?? DOWNLOAD_PATH,
    defaultTtlMs: options.defaultTtlMs ?? 5 * 60_000,
    maxTtlMs: options.maxTtlMs ?? 60 * 60_000,
    seekableTtlMs: options.seekableTtlMs ?? 30 * 60_000,
    maxRegistrations: options.maxRegistrations ?? 64,
    progressIntervalMs: options.progressIntervalMs ?? 250,
    maxEventMs: options.maxEventMs ?? 270_000,
    holdLimitBytes: options.holdLimitBytes ?? 16 * 1024 * 1024,
    stallMs: options.stallTimeoutMs ?? 30_000,
    pacingWindowBytes: options.pacingWindowBytes ?? 4 * 1024 * 1024,
    heartbeatMs: options.heartbeatMs ?? HEARTBEAT_MS,
    offloadSilenceMs: options.offloadSilenceMs ?? 4000,
    fetch: options.fetch ?? ((input: RequestInfo | URL, init?: RequestInit) => scope.fetch(input, init)),
  };
}
