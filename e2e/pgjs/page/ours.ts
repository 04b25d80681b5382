import { PostGuard } from 'postguard-ts/client';
import { EMAIL, FILES, RECIPIENT, SENDER, UPLOAD_CHUNK, fileBytes } from '../files.js';
import { base64, described } from './wire.js';
import { walletSession, type SessionLog } from './session.js';
import type { Services } from './main.js';

/**
 * Our side in the same page: postguard-ts/client as an app bundles it (the crypto in the crypto
 * worker), signing and decrypting through the same session callback pg-js gets, since an API key
 * has no place in a browser.
 */

export interface OursSent {
  uuid: string;
  sessions: SessionLog;
}

export interface OursOpened {
  recipients: string[];
  /** inspect(): how the header's sender is worded before decryption. */
  claimed: { standing: string; con: unknown[] };
  /** 'entries': name and base64 of each file, in the bundle's order. */
  entries: Array<{ name: string; size: number; bytes: string }>;
  /** 'bytes': the whole bundle (base64) and the sender as the signatures proved it. */
  zip: string;
  sender: { standing: string; con: unknown[] };
  sessions: SessionLog;
}

const client = ({ pkgUrl, storageUrl }: Services) =>
  new PostGuard({ pkgUrl, cryptifyUrl: storageUrl, allowInsecureUrls: true, uploadChunkSize: UPLOAD_CHUNK });

export async function oursSend(services: Services): Promise<OursSent> {
  const sessions: SessionLog = [];
  const pg = client(services);
  try {
    const { uuid } = await pg
      .encrypt({
        files: FILES.map((spec) => new File([fileBytes(spec)], spec.name)),
        recipients: [pg.recipient.email(RECIPIENT)],
        sign: pg.sign.session(walletSession(services.pkgUrl, { [EMAIL]: SENDER }, sessions), {
          senderEmail: SENDER,
        }),
      })
      .upload({ signal: AbortSignal.timeout(60_000) });
    return { uuid, sessions };
  } catch (error) {
    throw described(error);
  }
}

export async function oursOpen(services: Services & { uuid: string }): Promise<OursOpened> {
  const sessions: SessionLog = [];
  const pg = client(services);
  const session = walletSession(services.pkgUrl, { [EMAIL]: RECIPIENT }, sessions);
  const signal = AbortSignal.timeout(60_000);
  try {
    const opened = pg.open({ uuid: services.uuid, signal });
    const { recipients, sender: claimed } = await opened.inspect();
    const listed = await opened.decrypt({ output: 'entries', session, enableCache: true, signal });
    if (listed.output !== 'entries') throw new Error(`asked for entries, got ${listed.output}`);
    const entries: OursOpened['entries'] = [];
    for (const entry of listed.entries) {
      const bytes = new Uint8Array(await new Response(entry.stream()).arrayBuffer());
      entries.push({ name: entry.name, size: entry.size, bytes: base64(bytes) });
    }
    const whole = await opened.decrypt({ output: 'bytes', session, enableCache: true, signal });
    if (whole.output !== 'bytes') throw new Error(`asked for bytes, got ${whole.output}`);
    const words = (report: typeof claimed) => ({
      standing: report.standing,
      con: report.lines.map((line) => line.policy.con),
    });
    return {
      recipients,
      claimed: words(claimed),
      entries,
      zip: base64(whole.plaintext),
      sender: words(whole.sender),
      sessions,
    };
  } catch (error) {
    throw described(error);
  }
}
