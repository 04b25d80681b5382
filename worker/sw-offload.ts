import { tampered } from '../lib/errors.js';
import type { VerificationResult } from '../lib/signatures.js';
import { reviveError } from './errors.js';
import { portToReadable } from './port-stream.js';
import type { OffloadEvent, OffloadOpen, RegisterRequest } from './sw-protocol.js';
import type { DecrypterSettings } from './sw-settings.js';
import type { Authenticated, Unsealing } from './sw-whole.js';

/**
 * A download decrypted by the page's crypto worker, for the service worker (worker/README.md,
 * "Where a service-worker download's time goes"): the service worker's own thread is the browser's
 * pipe to the page, so where a page with a crypto worker registered the download, the hashing,
 * AES-GCM and signature checks run there (offload-serve.ts) and this thread only moves plaintext.
 *
 * The page may go away at any moment (its tab closed: its crypto worker with it). The crypto
 * worker says it is there every OFFLOAD_ALIVE_MS; after `offloadSilenceMs` of silence (or a crypto
 * worker that never answers: an older one, or a stalled one) the service worker takes over: it
 * opens the source itself, requires the very same header (so the same key and the same segment
 * positions), authenticates the file from its start as it always does, and skips the plaintext
 * already handed on. A failure the crypto worker reports (TAMPERED, WRONG_KEY, ...) is the
 * download's failure, as if the service worker had found it.
 */

/** Plaintext the crypto worker may have in flight to this worker. */
const PLAIN_WINDOW_BYTES = 4 << 20;

/** The crypto worker went silent: not a failure of the download, a reason to take it over. */
class DecrypterLost extends Error {}

/** Ports whose crypto worker went silent: later readings of the registration do not wait on it again. */
const lost = new WeakSet<MessagePort>();
/** The last job number used on each port. */
const jobs = new WeakMap<MessagePort, number>();

/** Whether a registration's decryption goes to its page's crypto worker. */
export const offloadable = (r: RegisterRequest): r is RegisterRequest & { decrypter: MessagePort } =>
  r.decrypter instanceof MessagePort && (r.source.kind === 'blob' || r.source.kind === 'url') && !lost.has(r.decrypter);

const sameBytes = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((x, i) => x === b[i]);

/** `unsealing` without its first `bytes` of plaintext. */
function skipping(unsealing: Unsealing, bytes: number): Unsealing {
  let left = bytes;
  return {
    async next() {
      while (left > 0) {
        const chunk = await unsealing.next();
        if (chunk === undefined) return undefined;
        if (chunk.byteLength <= left) {
          left -= chunk.byteLength;
          continue;
        }
        const rest = chunk.subarray(left);
        left = 0;
        return rest;
      }
      return unsealing.next();
    },
    size: unsealing.size,
    result: unsealing.result,
    etag: unsealing.etag,
    header: unsealing.header,
    pass: unsealing.pass,
    cancel: (reason) => unsealing.cancel(reason),
  };
}

/**
 * The registration's plaintext from its page's crypto worker; `local(ifMatch)` opens it here instead,
 * from the start (what a takeover uses). Throws the coded error if the header or the key fails.
 */
export async function offloadedUnsealing(
  r: RegisterRequest & { decrypter: MessagePort },
  settings: DecrypterSettings,
  signal: AbortSignal,
  ifMatch: string | undefined,
  authenticated: Authenticated | undefined,
  local: (ifMatch: string | undefined) => Promise<Unsealing>,
): Promise<Unsealing> {
  const port = r.decrypter;
  const job = (jobs.get(port) ?? 0) + 1;
  jobs.set(port, job);
  const { port1: reply, port2 } = new MessageChannel();

  let heard = Date.now();
  let silent!: (error: DecrypterLost) => void;
  const silence = new Promise<never>((_, reject) => (silent = reject));
  silence.catch(() => undefined);
  let settleOpened!: { resolve(e: Extract<OffloadEvent, { type: 'opened' }>): void; reject(e: unknown): void };
  const opened = new Promise<Extract<OffloadEvent, { type: 'opened' }>>(
    (resolve, reject) => (settleOpened = { resolve, reject }),
  );
  opened.catch(() => undefined);
  let settleRemote!: { resolve(r: VerificationResult): void; reject(e: unknown): void };
  const remoteResult = new Promise<VerificationResult>((resolve, reject) => (settleRemote = { resolve, reject }));
  remoteResult.catch(() => undefined);

  const watch = setInterval(
    () => {
      if (Date.now() - heard <= settings.offloadSilenceMs) return;
      lost.add(port);
      silent(new DecrypterLost(`the page's crypto worker went silent for ${settings.offloadSilenceMs} ms`));
      letGo();
    },
    Math.max(10, settings.offloadSilenceMs / 4),
  );
  const letGo = () => {
    clearInterval(watch);
    reply.onmessage = null;
    reply.close();
  };
  reply.onmessage = ({ data }: MessageEvent<OffloadEvent>) => {
    heard = Date.now();
    switch (data?.type) {
      case 'opened':
        settleOpened.resolve(data);
        break;
      case 'done':
        settleRemote.resolve(data.result);
        letGo();
        break;
      case 'failed': {
        const error = reviveError(data.error);
        settleOpened.reject(error);
        settleRemote.reject(error);
        letGo();
        break;
      }
    }
  };
  const cancelRemote = (reason: unknown) => {
    try {
      reply.postMessage({ type: 'cancel', reason: String(reason) });
    } catch {
      // already let go
    }
    letGo();
  };
  const aborted = new Promise<never>((_, reject) => {
    const stop = () => reject(signal.reason);
    if (signal.aborted) stop();
    else signal.addEventListener('abort', stop, { once: true });
  });
  aborted.catch(() => undefined);

  const reopen =
    authenticated !== undefined && 'job' in authenticated.pass && authenticated.pass.port === port
      ? { reopen: authenticated.pass.job }
      : {};
  const request: OffloadOpen = {
    type: 'open',
    job,
    source: r.source,
    recipientId: r.recipientId,
    usk: r.usk,
    vk: r.vk,
    ...(r.size !== undefined ? { size: r.size } : {}),
    ...(ifMatch !== undefined ? { ifMatch } : {}),
    ...reopen,
  };
  let head: Extract<OffloadEvent, { type: 'opened' }>;
  try {
    port.postMessage(request, [port2]);
    head = await Promise.race([opened, silence, aborted]);
  } catch (error) {
    if (error instanceof DecrypterLost) return local(ifMatch);
    cancelRemote(error);
    throw error;
  }

  // A window of 16 segments: each hop between three threads waits for a time slice on a busy machine,
  // and the window, not the work, then sets the pace (4 MiB, the pacing window's size).
  const reader = portToReadable<Uint8Array>(head.plain, { windowBytes: PLAIN_WINDOW_BYTES }).getReader();
  let delivered = 0;
  let takenOver: Unsealing | undefined;
  let settle!: { resolve(r: VerificationResult): void; reject(e: unknown): void };
  const result = new Promise<VerificationResult>((resolve, reject) => (settle = { resolve, reject }));
  result.catch(() => undefined);
  remoteResult.then(settle.resolve, (error: unknown) => {
    if (!(error instanceof DecrypterLost)) settle.reject(error);
  });

  /** Reads the rest here: the same file (its header), from the start, what was handed on skipped. */
  const takeOver = async (): Promise<Unsealing> => {
    void reader.cancel().catch(() => undefined);
    const mine = await local(ifMatch ?? head.etag);
    if (!sameBytes(mine.header, head.header)) {
      const error = tampered('the ciphertext changed between its two readings');
      await mine.cancel(error);
      throw error;
    }
    mine.result.then(settle.resolve, settle.reject);
    return skipping(mine, delivered);
  };

  return {
    async next() {
      if (takenOver !== undefined) return takenOver.next();
      try {
        const { done, value } = await Promise.race([reader.read(), silence]);
        if (!done) {
          delivered += value.byteLength;
          return value;
        }
        // The relay ended, so the crypto worker verified the end; its verdict comes on the reply port.
        await Promise.race([remoteResult, silence]);
        return undefined;
      } catch (error) {
        if (!(error instanceof DecrypterLost)) throw error;
        takenOver = await takeOver();
        return takenOver.next();
      }
    },
    size: head.size,
    result,
    etag: head.etag,
    header: head.header,
    pass: { job, port },
    async cancel(reason) {
      if (takenOver !== undefined) return takenOver.cancel(reason);
      cancelRemote(reason);
      await reader.cancel(reason).catch(() => undefined);
    },
  };
}
