import { BATCH_BYTES, WINDOW_BYTES } from './port-stream.js';

/**
 * How the crypto worker's stream relays (transfer.ts over port-stream.ts) batch and window, by
 * engine. The page's side decides the batch (readableToPort) and the window of the output it
 * receives (writableToPort); the worker's side the window of the input it receives
 * (portToReadable). Both read the same user agent, so they agree.
 *
 * WebKit: 1 MiB batches in a 4 MiB window. There a MessagePort message costs more work per message
 * than elsewhere (its delivery wakes two more threads, in the network process and the web
 * process), and the relay alone, page → worker → page with no crypto, moved 64 MiB 3x faster with
 * 4 MiB windows (worker/README.md, "Where the crypto worker's time goes in WebKit"); with 1 MiB
 * batches too, a 64 MiB sealStream over the relay ran 3-39% faster at 0-16% less CPU across the
 * browser's threads in four A/B runs (unsealing: 14% faster to 24% slower, 1-9% less CPU).
 * Chromium measured no better with them; Chromium and Firefox keep 256 KiB batches in a 1 MiB
 * window: less memory in flight.
 */
export interface RelaySettings {
  /** Bytes a receiving side lets its sender have in flight. */
  readonly windowBytes: number;
  /** Size of the buffers the page's sender gathers a caller's chunks into. */
  readonly batchBytes: number;
}

export const DEFAULT_RELAY: RelaySettings = { windowBytes: WINDOW_BYTES, batchBytes: BATCH_BYTES };
export const WEBKIT_RELAY: RelaySettings = { windowBytes: 4 << 20, batchBytes: 1 << 20 };

/**
 * WebKit's engine: Safari, every browser on iOS, WebKitGTK and WPE. Blink says AppleWebKit too but
 * also Chrome/ (HeadlessChrome/ included); Gecko says neither.
 */
export const isWebKit = (userAgent: string): boolean =>
  /\bAppleWebKit\//.test(userAgent) && !/Chrome\/|Chromium\//.test(userAgent);

/** The settings for the engine this code runs in (the defaults where there is no user agent: Node). */
export function relaySettings(
  userAgent: string = (globalThis as { navigator?: { userAgent?: string } }).navigator?.userAgent ?? '',
): RelaySettings {
  return isWebKit(userAgent) ? WEBKIT_RELAY : DEFAULT_RELAY;
}
