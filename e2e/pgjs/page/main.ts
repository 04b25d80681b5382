import { PostGuard } from '@e4a/pg-js';
import { EMAIL, FILES, RECIPIENT, SENDER, UPLOAD_CHUNK, fileBytes } from '../files.js';
import { walletSession, type SessionLog } from './session.js';

/**
 * The pg-js side of the interop spec: the published @e4a/pg-js 1.6.0, as an app bundles it, pointed
 * at our PKG and storage stand-in. The spec drives it through `window.pgjs`; arguments and results
 * cross as JSON (every engine's driver allows only that), so the plaintext comes back as base64.
 */

export interface Services {
  pkgUrl: string;
  storageUrl: string;
}

export interface Sent {
  uuid: string;
  sessions: SessionLog;
  progress: number[];
}

export interface Received {
  files: string[];
  recipients: string[];
  /**
   * The sender as pg-js reports it: the e-mail it picks out, and the identity it got from pg-wasm's
   * `public_identity()`.
   */
  sender: { email: string | null; raw: unknown } | null;
  /** The decrypted bundle, as pg-js hands it over (a ZIP), in base64. */
  zip: string;
  sessions: SessionLog;
}

/** pg-js's errors carry an HTTP status and body that the driver's JSON would drop: keep them in the message. */
function described(error: unknown): Error {
  if (!(error instanceof Error)) return new Error(String(error));
  const { status, body } = error as { status?: number; body?: string };
  const extra = status === undefined ? '' : ` (HTTP ${status}: ${String(body).slice(0, 300)})`;
  return new Error(`${error.name}: ${error.message}${extra}`, { cause: error });
}

function base64(bytes: Uint8Array): string {
  let text = '';
  for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(text);
}

async function send({ pkgUrl, storageUrl }: Services): Promise<Sent> {
  const sessions: SessionLog = [];
  const progress: number[] = [];
  const pg = new PostGuard({ pkgUrl, cryptifyUrl: storageUrl, uploadChunkSize: UPLOAD_CHUNK });
  const files = FILES.map((spec) => new File([fileBytes(spec)], spec.name));
  try {
    const { uuid } = await pg
      .encrypt({
        files,
        recipients: [pg.recipient.email(RECIPIENT)],
        sign: pg.sign.session(walletSession(pkgUrl, { [EMAIL]: SENDER }, sessions), { senderEmail: SENDER }),
        onProgress: (pct) => void progress.push(pct),
      })
      .upload();
    return { uuid, sessions, progress };
  } catch (error) {
    throw described(error);
  }
}

async function receive({ pkgUrl, storageUrl, uuid }: Services & { uuid: string }): Promise<Received> {
  const sessions: SessionLog = [];
  const pg = new PostGuard({ pkgUrl, cryptifyUrl: storageUrl });
  try {
    const opened = pg.open({ uuid, signal: AbortSignal.timeout(60_000) });
    const { recipients } = await opened.inspect();
    const result = await opened.decrypt({ session: walletSession(pkgUrl, { [EMAIL]: RECIPIENT }, sessions) });
    if (!('blob' in result)) throw new Error('pg-js opened an upload as data, not files');
    return {
      files: result.files,
      recipients,
      sender: result.sender === null ? null : { email: result.sender.email, raw: result.sender.raw },
      zip: base64(new Uint8Array(await result.blob.arrayBuffer())),
      sessions,
    };
  } catch (error) {
    throw described(error);
  }
}

const api = { send, receive };
export type PgJsPage = typeof api;
(window as unknown as { pgjs: PgJsPage }).pgjs = api;
document.body.dataset['ready'] = 'true';
