import type { SessionCallback, SessionRequest } from '@e4a/pg-js';
import { disclose, type AttributeValues } from '../../../devtools/standin/wallet.js';

/**
 * pg-js's session callback as an e-mail add-on would write it, with the stand-in's wallet playing
 * the phone from this page: start the identity session at the PKG, disclose, fetch the result JWT.
 * Signing sessions go through /v2/request (the route pg-js's Yivi signing uses), decryption
 * sessions through /v2/irma (pg-js's decryption route), so both of the PKG's prefixes are crossed.
 */

/** What pg-js asked for, kept for the test to check. */
export type SessionLog = SessionRequest[];

/** Every network wait of a session is bounded by this, so a stuck service fails the test instead of hanging it. */
const SESSION_TIMEOUT_MS = 30_000;

async function expectOk(response: Response, what: string): Promise<Response> {
  if (response.ok) return response;
  throw new Error(`${what}: HTTP ${response.status} ${(await response.text()).slice(0, 300)}`);
}

/** A SessionCallback whose wallet holds `attributes` (attribute type → value). */
export function walletSession(pkgUrl: string, attributes: AttributeValues, log: SessionLog): SessionCallback {
  return async (request) => {
    log.push(structuredClone(request));
    const base = `${pkgUrl}/v2/${request.sort === 'Signing' ? 'request' : 'irma'}`;
    const signal = AbortSignal.timeout(SESSION_TIMEOUT_MS);
    const started = await expectOk(
      await fetch(`${base}/start`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ con: request.con }),
        signal,
      }),
      'session start',
    );
    const { sessionPtr, token } = (await started.json()) as { sessionPtr: object; token: string };
    const report = await disclose(sessionPtr, attributes, { signal });
    if (report.proofStatus !== 'VALID') throw new Error(`the wallet's disclosure was ${report.proofStatus}`);
    const jwt = await expectOk(await fetch(`${base}/jwt/${token}`, { signal }), 'session result');
    return jwt.text();
  };
}
