/**
 * What crosses the engine drivers, which carry JSON only: bytes as base64, and errors as one
 * message that keeps what the JSON would drop (a ClientError's code, pg-js's HTTP status and body).
 */

export function base64(bytes: Uint8Array): string {
  let text = '';
  for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(text);
}

export function described(error: unknown): Error {
  if (!(error instanceof Error)) return new Error(String(error));
  const { status, body, code, cause } = error as { status?: number; body?: string; code?: string; cause?: unknown };
  const http = status === undefined || body === undefined ? '' : ` (HTTP ${status}: ${String(body).slice(0, 300)})`;
  const because = cause instanceof Error ? ` [cause: ${cause.name}: ${cause.message}]` : '';
  return new Error(`${error.name}${code === undefined ? '' : ` ${code}`}: ${error.message}${http}${because}`, {
    cause: error,
  });
}
