import type { IncomingMessage } from 'node:http';

/**
 * Reads a chunk body of exactly `expected` bytes as a stream: every byte goes to `sink` in order
 * (memory stays bounded by the socket's buffers; the stream is paused while `sink` works) and the
 * count decides "complete". Past `expected + slack` bytes it stops reading, so a client cannot
 * make the server read forever; the caller then answers with `Connection: close`.
 */

export interface BodyResult {
  /** Bytes the client sent (up to where reading stopped). */
  received: number;
  /** Exactly `expected` bytes and then the end of the body. */
  complete: boolean;
  /** Reading stopped early because the body went on past `expected + slack`. */
  abandoned: boolean;
  /** The client went away before the body ended. */
  disconnected: boolean;
}

export function readExactBody(
  body: IncomingMessage,
  expected: number,
  slack: number,
  sink: (bytes: Uint8Array) => Promise<void> | void,
): Promise<BodyResult> {
  if (body.readableEnded) {
    return Promise.resolve({ received: 0, complete: expected === 0, abandoned: false, disconnected: false });
  }
  return new Promise<BodyResult>((resolve, reject) => {
    let received = 0;
    let settled = false;
    let work: Promise<void> = Promise.resolve();
    const finish = (result: Omit<BodyResult, 'received'> | Error): void => {
      if (settled) return;
      settled = true;
      body.off('data', onData);
      body.off('end', onEnd);
      body.off('close', onClose);
      body.off('error', onClose);
      if (result instanceof Error) reject(result);
      else resolve({ received, ...result });
    };
    const onData = (piece: Buffer): void => {
      body.pause();
      work = work.then(async () => {
        if (settled) return;
        const wanted = Math.max(0, expected - received);
        if (wanted > 0) await sink(piece.length <= wanted ? piece : piece.subarray(0, wanted));
        received += piece.length;
        if (received > expected + slack) finish({ complete: false, abandoned: true, disconnected: false });
        else body.resume();
      });
      work.catch((error: unknown) => finish(error instanceof Error ? error : new Error(String(error))));
    };
    const onEnd = (): void => {
      void work.then(() => finish({ complete: received === expected, abandoned: false, disconnected: false }));
    };
    const onClose = (): void => {
      if (!body.complete) void work.then(() => finish({ complete: false, abandoned: false, disconnected: true }));
    };
    body.on('data', onData);
    body.on('end', onEnd);
    body.on('close', onClose);
    body.on('error', onClose);
    body.resume();
  });
}
