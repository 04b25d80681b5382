import { PkgClient, type StartRequest } from 'postguard-ts/pkg';
import type { IdentitySession } from 'postguard-ts/pkg';
import { universalLink } from 'postguard-ts/pkg';
import { memoryStore } from 'postguard-ts/pkg';
import { CliError, Exit, usage } from './exit.js';
import { emitPointer, renderQr, type Output, type PointerSink } from './terminal.js';

/**
 * The PKG as pg-cli uses it, through the library's PKG client (lib/pkg): public keys, the identity
 * session (status events with a polling fallback), key requests. A terminal process keeps nothing
 * between runs, so the client's cache is memory only.
 */

export const DEFAULT_PKG_URL = 'http://localhost:8080';

/** How long one PKG request may take. The identity session has its own, longer limit. */
const REQUEST_TIMEOUT_MS = 30_000;

export function pkgClient(url: string, version: string): PkgClient {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw usage(`--pkg: not a URL: ${url}`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw usage(`--pkg: must be an http(s) URL: ${url}`);
  return new PkgClient({
    url,
    store: memoryStore(),
    timeoutMs: REQUEST_TIMEOUT_MS,
    // The PKG counts clients by this header (server/README.md, Metrics): host, host version, client, client version.
    headers: { 'x-postguard-client-version': `node,${process.versions.node},pg-cli,${version}` },
  });
}

export interface SessionDisplay {
  out: Output;
  /** Draw the QR (on a terminal); the link is printed either way. */
  qr: boolean;
  /** Where to write the session pointer as JSON for scripts and tests. */
  pointerSink?: PointerSink | undefined;
  /** Gives up (and cancels the session) after this long. */
  timeoutMs: number;
  signal: AbortSignal;
}

/**
 * The stand-in's simulated wallet page (`/standin/wallet` on the session server, devtools/standin)
 * when the session server runs on this machine, as pg-dev's and npm start's do; a real Yivi server
 * is not on loopback. Printed beside the Yivi link, whether or not a QR is drawn (a script's log).
 */
export function simulatedWallet(sessionUrl: string): string | undefined {
  let url: URL;
  try {
    url = new URL(sessionUrl);
  } catch {
    return undefined;
  }
  const loopback =
    url.hostname === 'localhost' || url.hostname === '[::1]' || /^127(?:\.\d{1,3}){3}$/.test(url.hostname);
  return loopback ? `${url.origin}/standin/wallet` : undefined;
}

const STATUS_LINES: Partial<Record<string, string>> = {
  CONNECTED: 'The Yivi app has the request; waiting for you to share the attributes…',
  PAIRING: 'Waiting for pairing in the Yivi app…',
};

/**
 * Runs one identity session: starts it at the PKG, shows it, waits for the person to disclose,
 * and returns the session-result JWT. Rejects with the PKG client's SESSION_* / NOT_VALID errors,
 * or a SESSION CliError on our own time limit.
 */
export async function identitySession(
  client: PkgClient,
  request: StartRequest,
  purpose: 'sign' | 'decrypt',
  display: SessionDisplay,
): Promise<string> {
  const { out, signal } = display;
  signal.throwIfAborted();
  // The session is not tied to `signal`: on an interrupt we cancel it ourselves and wait for the
  // identity server to hear it, before the process exits.
  const starting = client.startSession(request, {
    onStatus: (status) => {
      const line = STATUS_LINES[status];
      if (line !== undefined) out.write(`${line}\n`);
    },
  });
  const interrupted = new Promise<never>((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
  interrupted.catch(() => undefined);
  let session: IdentitySession;
  try {
    session = await Promise.race([starting, interrupted]);
  } catch (error) {
    // Interrupted while the PKG was starting it: cancel it if it did start.
    void starting.then(
      (late) => late.cancel(),
      () => undefined,
    );
    throw error;
  }
  const what = purpose === 'sign' ? 'sign the file as the sender' : 'get the key that opens the file';
  if (display.qr) {
    out.write(`Scan this QR code with the Yivi app to ${what}:\n`);
    out.write(renderQr(session.qrText, out.isTTY));
    out.write(`Or open this link on the phone that has the Yivi app: ${universalLink(session.pointer)}\n`);
  } else {
    out.write(`To ${what}, open this link on the phone that has the Yivi app: ${universalLink(session.pointer)}\n`);
  }
  const wallet = simulatedWallet(session.pointer.u);
  if (wallet !== undefined)
    out.write(`On a development stack (pg-dev, npm start), open the simulated wallet instead: ${wallet}\n`);
  if (display.pointerSink !== undefined) {
    try {
      emitPointer(display.pointerSink, purpose, session.pointer);
    } catch (error) {
      await session.cancel();
      throw error;
    }
  }

  let timer: NodeJS.Timeout | undefined;
  let cancelling: Promise<void> | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      cancelling = session.cancel();
      reject(
        new CliError(
          Exit.SESSION,
          `the identity session was not completed within ${Math.round(display.timeoutMs / 1000)} s`,
        ),
      );
    }, display.timeoutMs);
  });
  try {
    return await Promise.race([session.result(), timedOut, interrupted]);
  } catch (error) {
    // Let the identity server hear the cancellation before the error ends the process.
    if (signal.aborted) await session.cancel();
    await cancelling;
    throw error;
  } finally {
    clearTimeout(timer);
  }
}
