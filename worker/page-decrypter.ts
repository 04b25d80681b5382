/**
 * The page's crypto worker, as the decrypting service worker's helper: a PostGuardWorker (client.ts)
 * offers itself here when it starts, and prepareDownload (download.ts) asks it for a port to hand the
 * service worker with a Blob or URL download, which the crypto worker then decrypts for it
 * (sw-offload.ts). Kept apart from client.ts so that the page side of the service worker
 * (postguard-ts/sw) does not carry the crypto worker's client.
 */

/** How long prepareDownload waits for the crypto worker's port (a worker still starting is not waited for). */
const PORT_WAIT_MS = 1000;

let offered: (() => Promise<MessagePort>) | undefined;

/** Offers a crypto worker's ports to this page's downloads (the latest offer wins); returns its withdrawal. */
export function offerPageDecrypter(port: () => Promise<MessagePort>): () => void {
  offered = port;
  return () => {
    if (offered === port) offered = undefined;
  };
}

/** A port to this page's crypto worker, or undefined if it has none (or it did not answer in time). */
export async function pageDecrypterPort(): Promise<MessagePort | undefined> {
  if (offered === undefined) return undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), PORT_WAIT_MS)));
  const asked = offered();
  // A port that comes after the wait is closed, not left open in the crypto worker.
  void Promise.race([asked, late]).then((port) => {
    if (port === undefined)
      void asked.then(
        (p) => p.close(),
        () => undefined,
      );
  });
  try {
    return await Promise.race([asked, late]);
  } catch {
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}
