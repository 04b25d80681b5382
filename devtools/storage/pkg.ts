/**
 * The two things the storage service asks the PKG: its verifying key (at start-up, to check the
 * headers of finalized uploads) and whether a `PG-…` API key is valid (at init, to pick the
 * upload tier).
 */

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Retries with backoff (0.5 s doubling to 5 s) until `budgetMs` is spent; throws the last failure. */
export async function fetchVerifyingKey(pkgUrl: string, budgetMs: number): Promise<string> {
  const deadline = Date.now() + budgetMs;
  let wait = 500;
  for (;;) {
    try {
      const response = await fetch(`${pkgUrl}/v2/sign/parameters`, { signal: AbortSignal.timeout(10_000) });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const body = (await response.json()) as { publicKey?: unknown };
      if (typeof body.publicKey !== 'string') throw new Error('no publicKey in the response');
      return body.publicKey;
    } catch (error) {
      if (Date.now() + wait > deadline) {
        throw new Error(`could not fetch the verifying key from ${pkgUrl}: ${(error as Error).message}`, {
          cause: error,
        });
      }
      await delay(wait);
      wait = Math.min(wait * 2, 5_000);
    }
  }
}

export type ApiKeyCheck =
  | { outcome: 'valid'; tenant: string }
  | { outcome: 'rejected' }
  /** The PKG could not be asked: the upload gets the default tier, flagged (see the chunk route). */
  | { outcome: 'unreachable' };

/** The bearer token of `Authorization: Bearer PG-…` (either spelling of the scheme), else undefined. */
export function apiKeyFromHeader(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const match = /^[Bb]earer (.*)$/s.exec(header);
  const token = match?.[1]?.trim();
  return token !== undefined && token.startsWith('PG-') ? token : undefined;
}

/** One attempt with a 5 s timeout (Cryptify retries for up to 30 s; the stand-in does not wait that long). */
export async function validateApiKey(pkgUrl: string, apiKey: string): Promise<ApiKeyCheck> {
  try {
    const response = await fetch(`${pkgUrl}/v2/api-key/validate`, {
      headers: { authorization: `Bearer ${apiKey}` },
      signal: AbortSignal.timeout(5_000),
    });
    if (response.status === 401 || response.status === 403) return { outcome: 'rejected' };
    if (!response.ok) return { outcome: 'unreachable' };
    const body = (await response.json()) as { tenant_id?: unknown };
    return typeof body.tenant_id === 'string'
      ? { outcome: 'valid', tenant: body.tenant_id }
      : { outcome: 'unreachable' };
  } catch {
    return { outcome: 'unreachable' };
  }
}
