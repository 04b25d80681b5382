import { ErrorCode, PostGuardError } from '../lib/errors.js';
import type { VerificationResult } from '../lib/signatures.js';
import { StreamUnsealer } from '../lib/unseal.js';
import { encodeError } from './errors.js';
import { readableToPort } from './port-stream.js';
import { OFFLOAD_ALIVE_MS, type OffloadEvent, type OffloadOpen } from './sw-protocol.js';
import { openSource, type OpenedSource } from './sw-source.js';

/**
 * The crypto worker's side of a service-worker download it decrypts for the service worker
 * (sw-offload.ts is the other side, sw-protocol.ts the messages): it opens the registration's
 * source itself (a Blob, or a URL with resumableDownload, as the service worker would), runs the
 * library's StreamUnsealer on it, with the hashing on this worker's hashing thread where it has
 * one, and relays the authenticated plaintext, moving each segment's buffer, never copying it. The
 * service worker then only moves plaintext into its response.
 */

/** How long a verified Blob reading is kept for a second reading that only decrypts (verifyFirst). */
const KEEP_VERIFIED_MS = 60_000;
/** A source read that brings nothing for this long fails, as in the service worker (sw-settings.ts). */
const STALL_MS = 30_000;

/** Serves decryption jobs on `port` (one per registration) until the port is dropped. */
export function serveDecrypter(port: MessagePort, doFetch: typeof fetch = (input, init) => fetch(input, init)): void {
  /** Blob readings verified in full, by job: a second reading of the same Blob only decrypts. */
  const verified = new Map<number, { unsealer: StreamUnsealer; result: VerificationResult }>();
  port.onmessage = ({ data, ports }: MessageEvent<OffloadOpen>) => {
    const reply = ports[0];
    if (data?.type !== 'open' || reply === undefined) return;
    void runJob(data, reply, verified, doFetch);
  };
}

async function runJob(
  job: OffloadOpen,
  reply: MessagePort,
  verified: Map<number, { unsealer: StreamUnsealer; result: VerificationResult }>,
  doFetch: typeof fetch,
): Promise<void> {
  const tell = (event: OffloadEvent, transfer: Transferable[] = []) => {
    try {
      reply.postMessage(event, transfer);
    } catch {
      // the service worker let go of the job
    }
  };
  tell({ type: 'alive' });
  const alive = setInterval(() => tell({ type: 'alive' }), OFFLOAD_ALIVE_MS);
  const abort = new AbortController();
  reply.onmessage = ({ data }: MessageEvent<{ type?: unknown; reason?: unknown }>) => {
    if (data?.type === 'cancel')
      abort.abort(new PostGuardError(ErrorCode.CANCELLED, 'the service worker cancelled the decryption'));
  };
  let source: OpenedSource | undefined;
  try {
    source = await openSource(job.source, job.size, doFetch, abort.signal, STALL_MS, job.ifMatch);
    const unsealer = await StreamUnsealer.new(
      source.stream,
      job.vk,
      source.size === undefined ? undefined : { size: source.size },
    );
    const earlier = job.reopen === undefined ? undefined : verified.get(job.reopen);
    if (job.reopen !== undefined) verified.delete(job.reopen);
    const opened =
      earlier === undefined
        ? await unsealer.open(job.recipientId, job.usk)
        : await unsealer.reopen(job.recipientId, job.usk, earlier);
    // Cancelled while opening: nobody will read it. Once relayed, a cancel comes through the relay.
    if (abort.signal.aborted) {
      await opened.readable.cancel(abort.signal.reason).catch(() => undefined);
      return;
    }
    const plain = readableToPort(opened.readable, { owned: true });
    tell(
      {
        type: 'opened',
        size: opened.size,
        header: unsealer.headerBytes.slice(),
        ...(source.etag !== undefined ? { etag: source.etag } : {}),
        plain,
      },
      [plain],
    );
    const result = await opened.result;
    if (job.source.kind === 'blob') {
      verified.set(job.job, { unsealer, result });
      setTimeout(() => verified.delete(job.job), KEEP_VERIFIED_MS);
    }
    tell({ type: 'done', result });
  } catch (error) {
    await source?.stream.cancel(error).catch(() => undefined);
    // A stall or a short source is what really happened; the unsealer only saw its read fail.
    tell({ type: 'failed', error: encodeError(source?.failure ?? error) });
  } finally {
    clearInterval(alive);
    reply.onmessage = null;
  }
}
