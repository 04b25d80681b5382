import { withDeadlineSignal } from '../lib/net/waits.js';
import { ClientError, ClientErrorCode } from './errors.js';

/**
 * An upload's overall deadline (`timeouts.uploadMs`, 0: none): `run` gets one signal that aborts
 * on the caller's signal or when the deadline passes, and a failure the deadline caused is
 * TIMED_OUT, keeping the upload's id and confirmed bytes so it can still be resumed. The
 * per-request deadlines (`storageMs`, `finalizeMs`) bound each exchange; this bounds the whole,
 * which a service that answers every chunk just in time would otherwise stretch without end.
 */
export async function withinUploadDeadline<T>(
  signal: AbortSignal | undefined,
  ms: number,
  run: (signal: AbortSignal | undefined) => Promise<T>,
): Promise<T> {
  if (ms === 0) return run(signal);
  const deadline = withDeadlineSignal(signal, ms);
  try {
    return await run(deadline.signal);
  } catch (error) {
    if (!deadline.expired()) throw error;
    const details = error instanceof ClientError ? error : undefined;
    throw new ClientError(ClientErrorCode.TIMED_OUT, `the upload did not finish within ${ms} ms (timeouts.uploadMs)`, {
      cause: error,
      ...(details?.uuid === undefined ? {} : { uuid: details.uuid }),
      ...(details?.uploadedBytes === undefined ? {} : { uploadedBytes: details.uploadedBytes }),
    });
  }
}
