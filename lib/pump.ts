import { ErrorCode, PostGuardError } from './errors.js';
import { asBytes } from './io.js';
import type { Segmenter } from './segments.js';

/**
 * Moves a byte stream through a Segmenter into a writer, keeping up to `maxInFlight`
 * segments' AES-GCM work running while the next ones are hashed. Output order is input
 * order. The writer is closed only after the final segment succeeded; failures are thrown
 * (the caller aborts both ends with them).
 */

/** Four segments in flight saturate WebCrypto AES-GCM on the machines we measured. */
export const DEFAULT_MAX_IN_FLIGHT = 4;

export type ChunkSource = () => Promise<Uint8Array | undefined>;

export function readerSource(reader: ReadableStreamDefaultReader<unknown>): ChunkSource {
  return async () => {
    let result: ReadableStreamReadResult<unknown>;
    try {
      result = await reader.read();
    } catch (cause) {
      throw new PostGuardError(ErrorCode.SOURCE_FAILED, `the input stream failed: ${String(cause)}`, { cause });
    }
    return result.done ? undefined : asBytes(result.value);
  };
}

const sinkFailed = (cause: unknown) =>
  new PostGuardError(ErrorCode.SINK_FAILED, `the output stream failed: ${String(cause)}`, { cause });

export async function pumpSegments(
  source: ReadableStreamDefaultReader<unknown> | ChunkSource,
  writer: WritableStreamDefaultWriter<Uint8Array>,
  head: Uint8Array | undefined,
  segmenter: Segmenter,
  maxInFlight = DEFAULT_MAX_IN_FLIGHT,
): Promise<void> {
  const next = typeof source === 'function' ? source : readerSource(source);
  const queue: Promise<Uint8Array>[] = [];
  // A failed write is noticed before the next read, so a broken sink stops the source promptly.
  let sinkError: unknown;
  const checkSink = () => {
    if (sinkError !== undefined) throw sinkFailed(sinkError);
  };

  const write = async (bytes: Uint8Array): Promise<void> => {
    checkSink();
    if (bytes.length === 0) return;
    try {
      await writer.ready;
    } catch (e) {
      throw sinkFailed(e);
    }
    writer.write(bytes).catch((e) => (sinkError ??= e ?? new Error('write failed')));
  };

  const enqueue = async (segments: Promise<Uint8Array>[]): Promise<void> => {
    queue.push(...segments);
    while (queue.length > maxInFlight) await write(await queue.shift()!);
  };

  if (head) await write(head);
  for (;;) {
    checkSink();
    const chunk = await next();
    if (chunk === undefined) break;
    await enqueue(segmenter.push(chunk));
  }
  await enqueue(segmenter.finish());
  while (queue.length > 0) await write(await queue.shift()!);
  try {
    await writer.close();
  } catch (e) {
    throw sinkFailed(e);
  }
}

/** Fails both ends of a pipeline with the same reason, so the sink never looks complete. */
export async function abortBoth(
  reader: ReadableStreamDefaultReader<unknown> | { cancel(reason?: unknown): Promise<void> },
  writer: WritableStreamDefaultWriter<Uint8Array>,
  reason: unknown,
): Promise<void> {
  await Promise.all([reader.cancel(reason).catch(() => undefined), writer.abort(reason).catch(() => undefined)]);
}
