import { PostGuard } from '@e4a/pg-js';
import { EMAIL, FILES, RECIPIENT, SENDER, UPLOAD_CHUNK, fileBytes } from '../files.js';
import { oursOpen, oursSend } from './ours.js';
import { walletSession, type SessionLog } from './session.js';
import { base64, described } from './wire.js';

/**
 * The interop spec's page: the published @e4a/pg-js 1.6.0, as an app bundles it, pointed at our
 * PKG and storage stand-in, beside our client (ours.ts). The spec drives both through
 * `window.pgjs`; arguments and results cross as JSON (wire.ts).
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
        signal: AbortSignal.timeout(60_000),
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

const api = { send, receive, oursSend, oursOpen };
export type PgJsPage = typeof api;
(window as unknown as { pgjs: PgJsPage }).pgjs = api;
document.body.dataset['ready'] = 'true';
